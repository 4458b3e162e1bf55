"""test_vattn.py — kcap.vattn, the one ctypes binding of kernels/verify_attn.h.

Both structs' layouts (vattn_args, vattn_extend_args) are checked against the C compiler's
own offsetof/sizeof (a C program built from the header) and the binding's prototypes
against the header's (a C file that must compile with -Werror), the binding against the captured GPU outputs of the golden corpus,
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


STRUCTS = [("vattn_args", v.VattnArgs), ("vattn_extend_args", v.VattnExtendArgs)]


def c_layout(tmp_path, cname, fields):
    """{field: (offset, size)} and sizeof(cname) as the C compiler lays them out."""
    src = tmp_path / ("%s.c" % cname)
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "verify_attn.h"\n'
                   "int main(void){\n" +
                   "".join('printf("%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));\n'
                           % (f, cname, f, cname, f) for f in fields) +
                   'printf("sizeof %%zu 0\\n", sizeof(%s));\nreturn 0;}\n' % cname)
    exe = tmp_path / cname
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-I", os.path.join(ROOT, "kernels"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, stdout=subprocess.PIPE).stdout.decode()
    return {k: (int(o), int(n)) for k, o, n in (line.split() for line in out.splitlines())}


@pytest.mark.parametrize("cname,cls", STRUCTS, ids=[c for c, _ in STRUCTS])
def test_struct_matches_c_header(tmp_path, cname, cls):
    """Every ctypes field at the C offset with the C size, the same total size (a field
    missing on either side, or of another width, moves an offset or the size)."""
    lay = c_layout(tmp_path, cname, [f for f, _ in cls._fields_])
    assert lay.pop("sizeof")[0] == ctypes.sizeof(cls)
    assert list(lay) == [f for f, _ in cls._fields_]
    for name, (off, size) in lay.items():
        assert (getattr(cls, name).offset, getattr(cls, name).size) == (off, size), name
    assert cls().struct_size == ctypes.sizeof(cls)


def test_function_signatures_match_c_header(tmp_path):
    """The prototypes the binding declares (Library's argtypes/restype, from ARGS_OF) are
    the header's: assigning each function to a pointer of that type compiles cleanly."""
    cname = {cls: c for c, cls in STRUCTS}
    lines = ['#include "verify_attn.h"']
    for i, (fn, cls) in enumerate(v.ARGS_OF.items()):
        if fn.endswith("_workspace_size"):
            lines.append("size_t (*p%d)(const %s *) = %s;" % (i, cname[cls], fn))
        else:
            lines.append("int (*p%d)(const %s *, void *, size_t, void *) = %s;"
                         % (i, cname[cls], fn))
    src = tmp_path / "protos.c"
    src.write_text("\n".join(lines) + "\n")
    cc = os.environ.get("CC", "cc")
    p = subprocess.run([cc, "-Werror", "-Wall", "-I", os.path.join(ROOT, "kernels"), "-c",
                        str(src), "-o", str(tmp_path / "protos.o")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 0, p.stdout.decode()
    assert len(v.ARGS_OF) == 6  # both entry points: workspace size, call, reference


def test_extend_calls_check_their_struct():
    lib = v.Library(CPU_LIB)
    with pytest.raises(TypeError):
        lib.extend(v.VattnArgs(), None, 0)
    with pytest.raises(TypeError):
        lib.verify(v.VattnExtendArgs(), None, 0)
    if not lib.has_extend:  # the implementation lands separately
        with pytest.raises(AttributeError, match="vattn_extend"):
            lib.extend(v.VattnExtendArgs(), None, 0)


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
