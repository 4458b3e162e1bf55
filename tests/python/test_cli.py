"""test_cli.py — the CLI's outputs (save-outputs, folder diff, dump, export, JUnit), checked through independent paths.

dump's numbers against numpy over kcap.load; --json/--junit documents parsed (JSON, XML)
with their counts; --save-outputs files against a kcap.vattn run of the same library
(the CPU library is deterministic, so bitwise); diff of folders with agreeing, differing,
renamed and unpaired cases; export's npz read back with numpy alone, its pt with torch
(where torch is importable) and its error without torch.
"""
import io
import json
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import kcap
import kcap.vattn as v
from conftest import CPU_LIB, KCAP, PERTURBED_LIB, golden, run


def test_version():
    for flag in ("-V", "--version"):
        out = run(KCAP, flag, check=0).stdout.decode()
        assert out.strip() == "kcap " + kcap.__version__


def test_dump_stats_match_numpy():
    path = golden("h16_q8_s1.h5")
    s = kcap.load(path)
    out = run(KCAP, "dump", path, "--stats", check=0).stdout.decode()
    stats = dict(re.findall(r"^  (?:in|out) +(\w+) .*\n    stats: (.*)$", out, re.M))
    assert set(stats) == {t.name for t in s.tensors}
    for t in s.tensors:
        vals = s.values(t.name, t.direction).astype(np.float64)
        f = dict(kv.split("=") for kv in stats[t.name].split())
        assert int(f["n"]) == vals.size
        assert float(f["min"]) == pytest.approx(vals.min(), rel=1e-7, abs=1e-12)
        assert float(f["max"]) == pytest.approx(vals.max(), rel=1e-7, abs=1e-12)
        assert float(f["mean"]) == pytest.approx(vals.mean(), rel=1e-6, abs=1e-9)
        assert int(f["nan"]) == int(np.isnan(vals).sum()) == 0


def test_dump_tensor_values():
    path = golden("h8_q1_s0.h5")
    out = run(KCAP, "dump", path, "--tensor", "lse", check=0).stdout.decode()
    rows = [l for l in out.splitlines() if l.startswith("    [")]
    got = np.array([float(x) for r in rows for x in r.split("]", 1)[1].split()])
    assert np.array_equal(got.astype(np.float32), kcap.load(path).outputs["lse"].ravel())
    p = run(KCAP, "dump", path, "--tensor", "nope")
    assert p.returncode == 1 and "nope" in p.stderr.decode()
    assert run(KCAP, "dump", path, "--limit", "x").returncode == 2


def replay(files, lib, *extra, check=None):
    return run(KCAP, "replay", *files, "--kernel", lib, "--ref", "none", *extra, check=check)


def test_json_to_stdout_with_schema(small_corpus):
    p = replay([small_corpus], CPU_LIB, "--json", "-")
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout.decode())  # the table went to stderr
    assert doc["schema_version"] == 1 and doc["kcap_version"] == kcap.__version__
    assert doc["tool"] == "kcap replay" and len(doc["cases"]) == 3 and doc["pass"] is True
    assert "cases:" in p.stderr.decode()
    assert not os.path.exists("-")
    both = replay([small_corpus], CPU_LIB, "--json", "-", "--junit", "-")
    assert both.returncode == 2


def test_junit_valid_and_counts(small_corpus, tmp_path):
    j = tmp_path / "r.xml"
    p = replay([small_corpus, tmp_path / "missing.h5"], PERTURBED_LIB, "--junit", j)
    assert p.returncode == 1
    suite = ET.parse(j).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == 4
    fails = [c for c in cases if c.find("failure") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    assert int(suite.get("failures")) == len(fails) == 3   # the perturbed element, per case
    assert int(suite.get("errors")) == len(errors) == 1    # the missing file
    assert "c77" in fails[0].find("failure").text
    p = replay([small_corpus], CPU_LIB, "--junit", "-")
    assert p.returncode == 0
    root = ET.fromstring(p.stdout)
    assert len(list(root.iter("testcase"))) == 3 and root.find("testsuite").get("failures") == "0"


@pytest.mark.parametrize("lib", [CPU_LIB, PERTURBED_LIB])
def test_save_outputs(small_corpus, tmp_path, lib):
    out = tmp_path / "saved"
    p = replay([small_corpus], lib, "--save-outputs", out, "--json", tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert sorted(os.listdir(out)) == sorted(os.listdir(small_corpus))
    run(KCAP, "check", out, check=0)
    library = v.Library(lib)
    for case in doc["cases"]:
        assert case["saved"] == os.path.join(str(out), case["name"])
        orig, saved = kcap.load(case["file"]), kcap.load(case["saved"])
        for name, a in orig.inputs.items():
            assert np.array_equal(a, saved.inputs[name]), name
        assert saved.meta["lib_hash"] == doc["kernel_hash"]
        assert saved.meta["lib_path"] == lib
        want = v.run_snapshot(library, orig)
        assert np.array_equal(saved.outputs["o"], want["o"])
        assert np.array_equal(saved.outputs["lse"], want["lse"])
    assert p.returncode == (0 if lib == CPU_LIB else 1)


def test_diff_folders(small_corpus, tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    replay([small_corpus], CPU_LIB, "--save-outputs", good, check=0)
    replay([small_corpus], PERTURBED_LIB, "--save-outputs", bad, check=1)
    p = run(KCAP, "diff", small_corpus, good, "--json", tmp_path / "d.json", check=0)
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["schema_version"] == 1 and doc["same"] is True
    assert doc["summary"] == {"pairs": 3, "agree": 3, "differ": 0, "errors": 0, "unpaired": 0}
    p = run(KCAP, "diff", good, bad, "--junit", tmp_path / "d.xml", check=1)
    assert p.stdout.decode().count("DIFFER") == 3
    suite = ET.parse(tmp_path / "d.xml").getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "3"
    # renamed -> paired by (call, rank, seq) when unique; an extra file is unpaired
    ren = tmp_path / "ren"
    ren.mkdir()
    shutil.copy(good / "h8_q1_s0.h5", ren / "renamed.h5")
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(small_corpus / "h8_q1_s0.h5", one / "h8_q1_s0.h5")
    p = run(KCAP, "diff", one, ren, check=0)
    assert "call+seq" in p.stdout.decode()
    shutil.copy(small_corpus / "h64_q7_s0.h5", ren / "h64_q7_s0.h5")
    p = run(KCAP, "diff", one, ren, check=1)
    assert "only in b" in p.stdout.decode()
    assert run(KCAP, "diff", one, golden("h8_q1_s0.h5")).returncode == 2


def test_export_npz(tmp_path):
    path = golden("h64_q7_s0.h5")
    out = tmp_path / "x.npz"
    run(KCAP, "export", path, "--to", "npz", "-o", out, check=0)
    s = kcap.load(path, bf16="float32")
    with np.load(out) as z:
        meta = json.loads(str(z["meta"]))
        assert meta["meta"]["seq"] == s.meta["seq"]
        for t in s.tensors:
            key = "%sputs/%s" % (t.direction, t.name)
            want = (s.inputs if t.direction == "in" else s.outputs)[t.name]
            assert np.array_equal(z[key], want) and meta["dtypes"][key] == t.dtype
        assert int(z["scalars/bs"]) == s.scalars["bs"]
    p = run(KCAP, "export", tmp_path / "none.h5", "--to", "npz")
    assert p.returncode == 1 and "none.h5" in p.stderr.decode()


def test_export_npz_to_stdout(tmp_path):
    path = golden("h8_q1_s0.h5")
    p = run(KCAP, "export", path, "--to=npz", "-o", "-", check=0, cwd=tmp_path)
    with np.load(io.BytesIO(p.stdout)) as z:
        assert np.array_equal(z["outputs/lse"], kcap.load(path).outputs["lse"])
    assert os.listdir(tmp_path) == []  # no file named "-"
    assert "wrote stdout" in p.stderr.decode()


def _have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.mark.skipif(not _have_torch(), reason="SKIP: torch is not importable here; "
                    "--to pt is checked where it is (its error path by the next test)")
def test_export_pt(tmp_path):
    import torch
    path = golden("h16_q8_s1.h5")
    out = tmp_path / "x.pt"
    # the python that has torch (the CLI defaults to /usr/bin/python3)
    run(KCAP, "export", path, "--to", "pt", "-o", out, check=0,
        env=dict(os.environ, KCAP_PYTHON=sys.executable))
    d = torch.load(str(out))
    s = kcap.load(path)
    assert d["meta"]["seq"] == s.meta["seq"] and d["scalars"] == s.scalars
    for t in s.tensors:
        got = d["%sputs" % t.direction][t.name]
        assert d["dtypes"]["%sputs/%s" % (t.direction, t.name)] == t.dtype
        if t.dtype == "bfloat16":
            assert got.dtype == torch.bfloat16
            assert np.array_equal(got.view(torch.int16).numpy().view(np.uint16), s.raw(t.name))
        else:
            assert np.array_equal(got.numpy(), s.raw(t.name, t.direction))


def test_export_pt_without_torch(tmp_path):
    """A python that cannot import torch: exit 1 and a message naming --to pt and torch
    (a stand-in torch module that fails to import, so this runs where torch exists too)."""
    fake = tmp_path / "notorch"
    fake.mkdir()
    (fake / "torch.py").write_text("raise ImportError(\"No module named 'torch' (test)\")\n")
    env = dict(os.environ, PYTHONPATH=str(fake))
    p = run(KCAP, "export", golden("h8_q1_s0.h5"), "--to", "pt", "-o", tmp_path / "x.pt",
            env=env)
    err = p.stderr.decode()
    assert p.returncode == 1 and "--to pt needs torch" in err and "--to npz" in err, err
    assert not (tmp_path / "x.pt").exists()
    p = run(KCAP, "export", golden("h8_q1_s0.h5"), "--to", "pt", "--raw", "-o",
            tmp_path / "y.pt", env=env)
    assert p.returncode == 1 and "--raw" in p.stderr.decode()


def test_save_outputs_refuses_a_second_file_of_the_same_name(small_corpus, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(small_corpus / "h8_q1_s0.h5", other / "h8_q1_s0.h5")
    p = replay([small_corpus, other], CPU_LIB, "--save-outputs", tmp_path / "s", "--json", "-")
    assert p.returncode == 1
    cases = json.loads(p.stdout.decode())["cases"]
    bad = [c for c in cases if c["status"] == "error"]
    assert len(bad) == 1 and "another snapshot named h8_q1_s0.h5" in bad[0]["error"]
    assert len(os.listdir(tmp_path / "s")) == 3


def test_diff_files_json_stdout_and_junit(tmp_path):
    a = golden("h8_q1_s0.h5")
    p = run(KCAP, "diff", a, a, "--json", "-", "--junit", tmp_path / "j.xml", check=0)
    doc = json.loads(p.stdout.decode())  # the table went to stderr
    assert doc["same"] is True and doc["schema_version"] == 1
    assert {t["status"] for t in doc["tensors"]} == {"bitwise"}
    assert "snapshots agree" in p.stderr.decode()
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    p = run(KCAP, "diff", a, golden("h16_q8_s1.h5"), "--junit", "-", check=1)
    case = ET.fromstring(p.stdout).find("testsuite/testcase")
    assert case.get("name") == "h8_q1_s0.h5" and case.find("failure") is not None
