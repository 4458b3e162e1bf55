"""conftest.py — shared fixtures of the kcap Python package tests (tests/python).

Paths come from the environment test_python_pkg.sh sets (KCAP_BUILD, repository root);
each test copies what it modifies into tmp_path, so the corpus is never touched.
"""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("KCAP_BUILD", "build"))
GOLDEN = os.path.join(ROOT, "tests", "golden", "snapshots")
KCAP = os.path.join(BUILD, "bin", "kcap")
CPU_LIB = os.path.join(BUILD, "lib", "libverify_attn_cpu.so")
PERTURBED_LIB = os.path.join(BUILD, "tests", "libverify_attn_cpu_perturbed.so")


def golden(name):
    return os.path.join(GOLDEN, name)


def golden_files():
    return sorted(f for f in os.listdir(GOLDEN) if f.endswith(".h5"))


def run(*args, check=None, **kw):
    """Run a command; check=N asserts the exit status."""
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       **kw)
    if check is not None:
        assert p.returncode == check, "%s -> %d\n%s\n%s" % (
            " ".join(map(str, args)), p.returncode, p.stdout.decode()[-3000:],
            p.stderr.decode()[-3000:])
    return p


@pytest.fixture
def small_corpus(tmp_path):
    """Three golden files copied into tmp_path/a."""
    import shutil
    d = tmp_path / "a"
    d.mkdir()
    for f in ("h8_q1_s0.h5", "h16_q8_s1.h5", "h64_q7_s0.h5"):
        shutil.copy(golden(f), d / f)
    return d
