"""report.py — the HTML page of `kcap replay --report DIR` (python3 -m kcap report DIR).

Input: DIR/replay.json (the run, docs/JSON.md) and the snapshots the run saved with the
kernel-under-test's outputs (each case's "saved"). Output: DIR/index.html with one row per
case and, per failing case, a heatmap per output of the largest |got - want| over channels
by (token, head), so a wrong head, a wrong request or a single bad element stands out at a
glance; PNGs are drawn with matplotlib when it is installed (the page says so otherwise).
"""
import html
import json
import os
import re

import numpy as np

from .snapshot import load


def error_map(captured, saved, name):
    """[T, H] max over channels of |saved - captured| for output `name` (NaN where either
    side is not finite, +inf where only one side is)."""
    want = captured.values(name, "out").astype(np.float64)
    got = saved.values(name, "out").astype(np.float64)
    err = np.abs(got - want)
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(got) & np.isinf(want) & (np.sign(got) == np.sign(want))
    err[both_nan | same_inf] = 0.0
    err[np.isnan(err)] = np.inf  # a NaN on one side only
    if err.ndim == 3:
        err = err.max(axis=2)
    return err


def _plot(err, title, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    shown = np.where(np.isfinite(err), err, np.nanmax(np.where(np.isfinite(err), err, 0)) * 2)
    im = ax.imshow(shown, aspect="auto", interpolation="nearest", cmap="magma")
    ax.set_xlabel("head")
    ax.set_ylabel("token (request-major)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="max |got - want| over channels")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _worst(case):
    best = None
    for side in ("vs_captured", "vs_ref"):
        for name, t in ((case.get(side) or {}).get("tensors") or {}).items():
            if t.get("max_abs") is not None and (best is None or t["max_abs"] > best[2]):
                best = (side, name, t["max_abs"], t.get("worst") or {}, t.get("verdict"))
    return best


def _case_row(case):
    w = _worst(case)
    where = ""
    if w and w[3]:
        where = "r%s t%s h%s c%s" % tuple(w[3].get(k) for k in ("request", "token", "head",
                                                               "channel"))
    cells = [case["name"], case["status"], w[1] if w else "-", "%.3e" % w[2] if w else "-",
             where, case.get("error") or ""]
    cls = "pass" if case["pass"] else "fail"
    return "<tr class=%s>%s</tr>" % (cls, "".join("<td>%s</td>" % html.escape(str(c))
                                                  for c in cells))


def _fs_path(p):
    """A path from replay.json as the file system knows it: names are bytes, and the JSON
    writes a byte outside UTF-8 as the text \\xNN (docs/JSON.md); the path as written is
    tried first (a name may really hold a backslash)."""
    if not isinstance(p, str) or os.path.exists(p):
        return p
    raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), p.encode())
    return os.fsdecode(raw)


def _failing_section(i, case, outdir, plots):
    parts = ["<h2 id='%s'>%s — %s</h2>" % (html.escape(case["name"]), html.escape(case["name"]),
                                           html.escape(case["status"]))]
    if case.get("error"):
        parts.append("<p>%s</p>" % html.escape(case["error"]))
    saved_path = _fs_path(case.get("saved"))
    if not saved_path or not os.path.exists(saved_path):
        parts.append("<p>no saved outputs for this case (it did not run to the end)</p>")
        return "\n".join(parts)
    captured, saved = load(_fs_path(case["file"])), load(saved_path)
    for name in saved.outputs:
        err = error_map(captured, saved, name)
        t, h = np.unravel_index(int(np.argmax(np.where(np.isfinite(err), err, np.inf))),
                                err.shape) if err.ndim == 2 else (0, 0)
        cap = "%s: max %.3e at token %d head %d; %d (token, head) cells above 0" % (
            name, float(err.max()), t, h, int((err > 0).sum()))
        if plots:
            # named by the case's position, never by its name: a name from the JSON such as
            # ../outside/x (or an absolute one) would put the picture outside outdir
            png = "case%04d.%s.png" % (i, re.sub(r"[^A-Za-z0-9_.-]", "_", name))
            _plot(err, "%s  %s" % (case["name"], name), os.path.join(outdir, png))
            parts.append("<figure><img src='%s' alt='%s'><figcaption>%s</figcaption></figure>"
                         % (html.escape(png), html.escape(name), html.escape(cap)))
        else:
            parts.append("<p>%s</p>" % html.escape(cap))
    return "\n".join(parts)


def write(outdir):
    """Read outdir/replay.json, write outdir/index.html (+ PNGs). Returns the page's path.
    A document that is not a replay run's (keys missing, wrong types, nested too deep) is a
    ValueError naming the file, not a traceback."""
    src = os.path.join(outdir, "replay.json")
    try:
        return _write(outdir, src)
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError,
            json.JSONDecodeError) as e:
        raise ValueError("%s: not a kcap replay document (docs/JSON.md): %s: %s"
                         % (src, type(e).__name__, e)) from None


def _write(outdir, src):
    with open(src) as f:
        doc = json.load(f)
    plots = _have_matplotlib()
    cases = doc.get("cases", [])
    failing = [c for c in cases if not c["pass"]]
    s = doc.get("summary", {})
    head = ("<!doctype html><html><head><meta charset='utf-8'><title>kcap replay report</title>"
            "<style>body{font-family:sans-serif}td,th{padding:2px 8px}tr.fail{background:#fdd}"
            "tr.pass{background:#dfd}</style></head><body>")
    body = ["<h1>kcap replay: %s</h1>" % html.escape(doc.get("kernel", "")),
            "<p>%s passed, %s failed (%s errors) of %s cases; reference %s; kcap %s</p>"
            % tuple(html.escape(str(x)) for x in (s.get("passed"), s.get("failed"),
                                                   s.get("errors"), s.get("cases"),
                                                   doc.get("ref"), doc.get("kcap_version")))]
    if doc.get("load_error"):
        body.append("<p><b>%s</b></p>" % html.escape(doc["load_error"]))
    if not plots:
        body.append("<p>matplotlib is not installed: no heatmaps, text summaries only.</p>")
    body.append("<table><tr><th>case</th><th>status</th><th>worst output</th><th>max abs</th>"
                "<th>worst element</th><th>error</th></tr>")
    body += [_case_row(c) for c in cases]
    body.append("</table>")
    body += [_failing_section(i, c, outdir, plots) for i, c in enumerate(failing)]
    path = os.path.join(outdir, "index.html")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(head + "\n".join(body) + "</body></html>\n")
    os.replace(tmp, path)
    return path
