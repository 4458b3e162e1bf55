"""test_load.py — kcap.load / kcap.check against independent readers.

Shapes and dtypes are checked against `kcap info --json`; the values against h5py reading
the same datasets through the HDF5 filter plugin (a different decoder path); errors against
`kcap check`.
"""
import json
import os
import shutil

import numpy as np
import pytest

import kcap
from conftest import BUILD, KCAP, golden, golden_files, run


@pytest.mark.parametrize("name", golden_files())
def test_shapes_dtypes_match_info(name):
    s = kcap.load(golden(name))
    info = json.loads(run(KCAP, "info", golden(name), "--json", check=0).stdout)
    assert s.scalars == info["scalars"]
    for key in ("call", "abi_version", "pid", "rank", "seq", "lib_hash", "time_utc",
                "call_status", "kcap_version", "device_name"):
        assert s.meta[key] == info[key], key
    for t in s.tensors:
        a = (s.inputs if t.direction == "in" else s.outputs)[t.name]
        assert a.shape == t.shape
        assert a.dtype == kcap.dtypes.numpy_dtype(t.dtype)
    # every tensor kcap info lists is in the snapshot, with the same shape
    listed = info.get("tensors") or []
    assert listed, "kcap info --json lists no tensors"
    for lt in listed:
        t = s.info(lt["name"], lt["dir"])
        assert list(t.shape) == list(lt["shape"])
        assert t.dtype == lt["dtype"]
    T = s.scalars["bs"] * s.scalars["q_len"]
    assert s.inputs["q"].shape == (T, s.scalars["num_heads"], 576)
    assert s.outputs["o"].shape == (T, s.scalars["num_heads"], 512)


def test_values_match_h5py():
    h5py = pytest.importorskip("h5py")
    os.environ["HDF5_PLUGIN_PATH"] = os.path.join(BUILD, "plugins")
    path = golden("h16_q8_s1.h5")
    s = kcap.load(path)
    f32 = kcap.load(path, bf16="float32")
    with h5py.File(path, "r") as f:
        for t in s.tensors:
            ds = f["/%sputs/%s" % (t.direction, t.name)][()]
            raw = s.raw(t.name, t.direction)
            assert np.array_equal(ds.view(raw.dtype).reshape(raw.shape), raw), t.name
    # bf16 widening: exact, and what bf16="float32" gives
    q = s.inputs["q"]
    assert q.dtype == np.uint16 and f32.inputs["q"].dtype == np.float32
    assert np.array_equal(f32.inputs["q"], kcap.bf16_to_float32(q))
    assert np.array_equal(kcap.float32_to_bf16(f32.inputs["q"]), q)
    assert np.all(np.abs(f32.inputs["q"]) <= 1.0) and np.any(f32.inputs["q"] != 0)


def test_bf16_rounding():
    x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, np.inf, np.nan], np.float32)
    b = kcap.float32_to_bf16(x)
    back = kcap.bf16_to_float32(b)
    assert back[0] == 1.0 and back[1] == 1.0            # tie rounds to even
    assert back[2] == 1.0 + 2 ** -6                      # tie rounds up to even
    assert back[3] == -2.5 and np.isinf(back[4]) and np.isnan(back[5])


def test_to_torch():
    torch = pytest.importorskip("torch")
    s = kcap.load(golden("h8_q1_s0.h5"))
    t = s.to_torch()
    assert t["q"].dtype == torch.bfloat16 and tuple(t["q"].shape) == s.inputs["q"].shape
    assert np.array_equal(t["q"].float().numpy(), s.values("q"))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        kcap.load(tmp_path / "nope.h5")
    assert "nope.h5" in str(e.value)


def test_not_a_snapshot(tmp_path):
    p = tmp_path / "text.h5"
    p.write_text("hello, not hdf5\n" * 100)
    with pytest.raises(kcap.SnapshotError) as e:
        kcap.load(p)
    assert str(p) in str(e.value) and e.value.code != 0
    assert run(KCAP, "check", p).returncode == 1


def test_corrupt_data_refused_like_check(tmp_path):
    """Flip bytes in the middle of a file: kcap.load and kcap check must both refuse it."""
    p = tmp_path / "bad.h5"
    shutil.copy(golden("h8_q1_s0.h5"), p)
    data = bytearray(p.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + 64):
        data[i] ^= 0x5A
    p.write_bytes(bytes(data))
    chk = run(KCAP, "check", p)
    assert chk.returncode == 1
    with pytest.raises(kcap.SnapshotError) as e:
        kcap.load(p)
    assert str(p) in str(e.value)
    with pytest.raises(kcap.SnapshotError):
        kcap.check(p)
    kcap.check(golden("h8_q1_s0.h5"))  # a good file passes


def test_bad_bf16_option():
    with pytest.raises(ValueError):
        kcap.load(golden("h8_q1_s0.h5"), bf16="half")
