"""test_plugin.py — kcap.testing (pytest plugin) and kcap.manifest.

Runs pytest in a subprocess on a copied corpus with a manifest: one result per case, skip,
xfail and tolerance overrides honoured, a wrong kernel failing with the located element,
JUnit XML with one testcase per snapshot, and manifest typos refused.
"""
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import CPU_LIB, KCAP, PERTURBED_LIB, ROOT, run
from kcap.manifest import Manifest, ManifestError, replay_flags


def pytest_run(corpus, kernel, *extra, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KCAP_BIN=KCAP)
    return run(sys.executable, "-m", "pytest", "-p", "kcap.testing", "-p", "no:cacheprovider",
               "--kcap-golden", corpus, "--kcap-kernel", kernel, "-v", *extra, env=env,
               cwd=cwd or corpus)


def write_manifest(d, text):
    (d / "kcap-manifest.toml").write_text(text)


def test_one_result_per_case(small_corpus, tmp_path):
    write_manifest(small_corpus, '[defaults]\nref = "none"\n')
    junit = tmp_path / "j.xml"
    p = pytest_run(small_corpus, CPU_LIB, "--junitxml", junit, cwd=tmp_path)
    out = p.stdout.decode()
    assert p.returncode == 0, out
    for name in ("h8_q1_s0", "h16_q8_s1", "h64_q7_s0"):
        assert "::%s PASSED" % name in out
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert sorted(c.get("name") for c in cases) == ["h16_q8_s1", "h64_q7_s0", "h8_q1_s0"]
    props = [p.get("name") for c in cases for p in c.iter("property")]
    assert "max_abs" in props


def test_manifest_skip_xfail_tolerance(small_corpus, tmp_path):
    write_manifest(small_corpus, '''
[defaults]
ref = "none"
[cases."h8_*"]
skip = "not today"
[cases."h16_q8_s1"]
atol = 0.0
rtol = 0.0
xfail = "zero tolerance cannot hold across GPU and CPU"
''')
    p = pytest_run(small_corpus, CPU_LIB, "-rsx", cwd=tmp_path)
    out = p.stdout.decode()
    assert p.returncode == 0, out
    assert "::h8_q1_s0 SKIPPED" in out and "not today" in out
    assert "::h16_q8_s1 XFAIL" in out
    assert "::h64_q7_s0 PASSED" in out


def test_strict_xfail_that_passes_fails(small_corpus, tmp_path):
    write_manifest(small_corpus, '[defaults]\nref = "none"\n[cases."h64_q7_s0"]\nxfail = "x"\n')
    p = pytest_run(small_corpus, CPU_LIB, cwd=tmp_path)
    out = p.stdout.decode()
    assert p.returncode == 1, out
    assert "::h64_q7_s0 FAILED" in out and "XPASS(strict)" in out


def test_wrong_kernel_fails_with_location(small_corpus, tmp_path):
    write_manifest(small_corpus, '[defaults]\nref = "none"\n')
    p = pytest_run(small_corpus, PERTURBED_LIB, "-k", "h16_q8_s1", cwd=tmp_path)
    out = p.stdout.decode()
    assert p.returncode == 1, out
    assert "::h16_q8_s1 FAILED" in out and "2 deselected" in out
    assert "vs_captured o: FAIL" in out and ",c77)" in out


def test_manifest_errors(tmp_path):
    (tmp_path / "kcap-manifest.toml").write_text('[defaults]\natoll = 1\n')
    with pytest.raises(ManifestError, match="unknown key 'atoll'"):
        Manifest.find(str(tmp_path))
    (tmp_path / "kcap-manifest.toml").write_text('[defaults]\nref = "gpux"\n')
    with pytest.raises(ManifestError, match="bad value"):
        Manifest.find(str(tmp_path))
    (tmp_path / "kcap-manifest.toml").write_text('[defaults\n')
    with pytest.raises(ManifestError, match="kcap-manifest.toml"):
        Manifest.find(str(tmp_path))


def test_manifest_merge_and_flags(tmp_path):
    (tmp_path / "kcap-manifest.toml").write_text(
        '[defaults]\natol = 0.5\nref = "none"\n[cases."a*"]\natol = 0.25\n[cases."ab"]\n'
        'rtol = 0.125\n')
    m = Manifest.find(str(tmp_path))
    assert m.settings("ab") == {"atol": 0.25, "ref": "none", "rtol": 0.125}
    assert m.settings("zz") == {"atol": 0.5, "ref": "none"}
    assert replay_flags(m.settings("ab")) == ["--atol", "0.25", "--rtol", "0.125", "--ref",
                                              "none"]
    assert m.unmatched(["ab"]) == []


def test_plugin_usage_errors(small_corpus, tmp_path):
    write_manifest(small_corpus, '[defaults]\nbogus = 1\n')
    p = pytest_run(small_corpus, CPU_LIB, cwd=tmp_path)
    assert p.returncode == 4 and "bogus" in p.stderr.decode() + p.stdout.decode()
    p = pytest_run(small_corpus, tmp_path / "missing.so", cwd=tmp_path)
    assert p.returncode == 4 and "missing.so" in p.stderr.decode()


def test_plugin_autoloads_without_p(small_corpus, tmp_path):
    """python/kcap-VERSION.dist-info registers the plugin: PYTHONPATH=python is enough."""
    write_manifest(small_corpus, '[defaults]\nref = "none"\n')
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KCAP_BIN=KCAP)
    p = run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--kcap-golden",
            small_corpus, "--kcap-kernel", CPU_LIB, "-q", env=env, cwd=tmp_path)
    assert p.returncode == 0 and "3 passed" in p.stdout.decode(), p.stdout.decode()


def test_versions_agree():
    import importlib.metadata
    import kcap
    dist = importlib.metadata.distribution("kcap")
    assert dist.version == kcap.__version__
    assert run(KCAP, "-V", check=0).stdout.decode().split() == ["kcap", kcap.__version__]
    eps = [e for e in dist.entry_points if e.group == "pytest11"]
    assert [(e.name, e.value) for e in eps] == [("kcap.testing", "kcap.testing")]
