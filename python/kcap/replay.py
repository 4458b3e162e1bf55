"""replay.py — drive `kcap replay` on one snapshot and return its JSON case record.

The replay engine is C (replay/); Python runs the CLI with `--json -` rather than
re-implementing it, so a case judged here is judged exactly as on the command line.
"""
import json
import os
import shutil
import signal
import subprocess

_HERE = os.path.dirname(os.path.abspath(__file__))


def find_kcap(explicit=None):
    """Path of the kcap binary: explicit, $KCAP_BIN, the in-tree build, the installed
    PREFIX/bin (PREFIX/lib/pythonX.Y/dist-packages/kcap), PATH, else None."""
    if explicit:
        return explicit
    if os.environ.get("KCAP_BIN"):
        return os.environ["KCAP_BIN"]
    root = os.path.dirname(os.path.dirname(_HERE))
    tree = os.path.join(root, os.environ.get("KCAP_BUILD", "build"), "bin", "kcap")
    prefix = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
    for p in (tree, os.path.join(prefix, "bin", "kcap")):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("kcap")


class ReplayError(RuntimeError):
    """`kcap replay` could not judge the case (usage error, crash, no JSON)."""


def replay_case(kcap, path, kernel, flags=(), timeout=600):
    """Run one snapshot; returns (case dict, whole JSON document, stderr text)."""
    cmd = [kcap, "replay", os.fspath(path), "--kernel", kernel, "--json", "-", "--quiet"]
    cmd += list(flags)
    # its own session, so a timeout kills everything the replay started (a hung kernel's
    # helper processes outlived a SIGKILL of kcap alone)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, errb = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        raise ReplayError("%s: timed out after %g s (the replay and what it started were "
                          "killed)" % (path, timeout)) from None
    err = errb.decode(errors="replace")
    if p.returncode not in (0, 1):
        raise ReplayError("%s exited %d: %s" % (" ".join(cmd), p.returncode, err.strip()))
    try:
        doc = json.loads(out.decode())
    except ValueError as e:
        raise ReplayError("%s: no JSON on stdout (%s); stderr: %s" % (" ".join(cmd), e,
                                                                      err.strip())) from None
    if doc.get("load_error"):
        raise ReplayError("%s: %s" % (kernel, doc["load_error"]))
    if len(doc.get("cases", [])) != 1:
        raise ReplayError("%s: expected one case in the JSON, got %d"
                          % (path, len(doc.get("cases", []))))
    return doc["cases"][0], doc, err


def describe_failure(case):
    """Lines explaining why a case failed: its error, then every failing tensor."""
    lines = ["%s: %s" % (case.get("file"), case.get("status"))]
    if case.get("error"):
        lines.append("  error: " + case["error"])
    for side in ("vs_captured", "vs_ref"):
        v = case.get(side) or {}
        if v.get("error"):
            lines.append("  %s: %s" % (side, v["error"]))
        for name, t in (v.get("tensors") or {}).items():
            if t.get("pass"):
                continue
            w = t.get("worst") or {}
            lines.append("  %s %s: %s max_abs=%s max_rel=%s beyond=%s/%s (atol %s rtol %s) "
                         "worst %s (r%s,t%s,h%s,c%s) got=%s want=%s"
                         % (side, name, t.get("verdict"), t.get("max_abs"), t.get("max_rel"),
                            t.get("n_beyond"), t.get("n"), t.get("atol"), t.get("rtol"),
                            w.get("index"), w.get("request"), w.get("token"), w.get("head"),
                            w.get("channel"), w.get("got"), w.get("want")))
    return "\n".join(lines)
