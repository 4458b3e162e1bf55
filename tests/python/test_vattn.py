"""test_vattn.py — kcap.vattn, the one ctypes binding of kernels/verify_attn.h.

The struct layout is checked against the C compiler's own offsetof/sizeof (a C program
built from the header), the binding against the captured GPU outputs of the golden corpus,
and a deliberately wrong library must be caught.
"""
import ctypes
import os
import subprocess

import numpy as np
import pytest

import kcap
import kcap.vattn as v
from conftest import CPU_LIB, PERTURBED_LIB, ROOT, golden, golden_files


def c_layout(tmp_path):
    """{field: offset} and sizeof(vattn_args) as the C compiler lays them out."""
    fields = [f for f, _ in v.VattnArgs._fields_]
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "verify_attn.h"\n'
                   "int main(void){\n" +
                   "".join('printf("%s %%zu\\n", offsetof(vattn_args, %s));\n' % (f, f)
                           for f in fields) +
                   'printf("sizeof %zu\\n", sizeof(vattn_args));\nreturn 0;}\n')
    exe = tmp_path / "layout"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-I", os.path.join(ROOT, "kernels"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, stdout=subprocess.PIPE).stdout.decode()
    return {k: int(n) for k, n in (line.split() for line in out.splitlines())}


def test_struct_matches_c_header(tmp_path):
    lay = c_layout(tmp_path)
    assert lay.pop("sizeof") == ctypes.sizeof(v.VattnArgs)
    for name, off in lay.items():
        assert getattr(v.VattnArgs, name).offset == off, name
    assert v.VattnArgs().struct_size == ctypes.sizeof(v.VattnArgs)


def test_library_identity():
    lib = v.Library(CPU_LIB)
    assert lib.backend == "cpu" and lib.abi_version == v.ABI_VERSION
    assert lib.status_string(0)
    assert len(v.STATUS) == 18  # VATTN_STATUS_COUNT


def _tol_ok(got, want, atol, rtol):
    return np.all(np.abs(got - want) <= atol + rtol * np.abs(want))


@pytest.mark.parametrize("name", golden_files())
def test_run_snapshot_matches_gpu_capture(name):
    s = kcap.load(golden(name))
    out = v.run_snapshot(v.Library(CPU_LIB), s)
    got = kcap.bf16_to_float32(out["o"])
    assert not np.isnan(got).any(), "an output element was never written"
    assert _tol_ok(got, s.values("o"), 1e-2, 2e-2)
    assert _tol_ok(out["lse"], s.outputs["lse"], 1e-3, 1e-3)


def test_perturbed_library_is_caught():
    s = kcap.load(golden("h16_q8_s1.h5"))
    good = kcap.bf16_to_float32(v.run_snapshot(v.Library(CPU_LIB), s)["o"])
    bad = kcap.bf16_to_float32(v.run_snapshot(v.Library(PERTURBED_LIB), s)["o"])
    diff = np.argwhere(np.abs(good - bad) > 0.25)
    T, H = s.outputs["o"].shape[:2]
    q_len = s.scalars["q_len"]
    # exactly the documented element: last request's first draft token, last head, ch 77
    assert diff.tolist() == [[T - q_len, H - 1, 77]]


def test_bad_arguments_raise_vattn_error():
    lib = v.Library(CPU_LIB)
    a = v.VattnArgs(bs=0, q_len=1, num_heads=1, num_slots=1, sm_scale=1.0)
    with pytest.raises((v.VattnError, ValueError)):
        lib.workspace_size(a)
        lib.verify(a, None, 0)
    st = lib.verify(a, None, 0, check=False)
    assert st != 0 and v.STATUS[st].startswith("VATTN_ERR_")
    with pytest.raises(v.VattnError) as e:
        lib.verify(a, None, 0)
    assert e.value.status == st and e.value.name == v.STATUS[st]
