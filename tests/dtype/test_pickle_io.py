"""Pickle and .npy I/O: bfloat16, then every member of the
family, every code.  Cross-process round trips run the writer and
the reader in fresh interpreters."""
import copy
import io
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R
import _family_refs as FR
from conftest import mf_type

BF = np.dtype(bf16)


def _run(code, *args):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


WRITER = """
import pickle, sys
import numpy as np, minifloat
bf = minifloat.bfloat16
codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
a = codes.view(bf)
objs = {
    "dtype": np.dtype(bf),
    "scalar": bf(0.1),
    "nan_scalar": codes[0x7F81:0x7F82].view(bf)[0],
    "all": a,
    "fortran": np.asfortranarray(a.reshape(256, 256)),
    "strided": a[::-3],
    "zero_d": np.array(bf(1.5)),
    "empty": np.zeros((0, 4), bf),
    "structured": np.array([(1.5, 2)], dtype=[("x", bf), ("y", np.int32)]),
    "scalar_type": bf,
    "dtype_class": minifloat.dtypes.BFloat16DType,
    "list": [bf(2.5), np.ones(2, bf)],
}
with open(sys.argv[1], "wb") as fh:
    pickle.dump(objs, fh, protocol=int(sys.argv[2]))
"""

READER = """
import pickle, sys
import numpy as np
# deliberately no "import minifloat": unpickling must import it
with open(sys.argv[1], "rb") as fh:
    objs = pickle.load(fh)
import minifloat
bf = minifloat.bfloat16
codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
assert objs["dtype"] == np.dtype(bf) and type(objs["dtype"]) is minifloat.dtypes.BFloat16DType
assert type(objs["scalar"]) is bf and objs["scalar"].view(np.uint16) == bf(0.1).view(np.uint16)
assert objs["nan_scalar"].view(np.uint16) == 0x7F81
a = objs["all"]
assert a.dtype == np.dtype(bf) and np.array_equal(a.view(np.uint16), codes)
f = objs["fortran"]
assert f.flags.f_contiguous and np.array_equal(f.view(np.uint16), codes.reshape(256, 256))
assert np.array_equal(objs["strided"].view(np.uint16), codes[::-3])
assert objs["zero_d"].shape == () and objs["zero_d"][()] == 1.5
assert objs["empty"].shape == (0, 4) and objs["empty"].dtype == np.dtype(bf)
s = objs["structured"]
assert s["x"].dtype == np.dtype(bf) and s["x"][0] == 1.5 and s["y"][0] == 2
assert objs["scalar_type"] is bf and objs["dtype_class"] is minifloat.dtypes.BFloat16DType
assert objs["list"][0] == 2.5 and objs["list"][1].dtype == np.dtype(bf)
print("ok")
"""


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickle_across_processes(tmp_path, protocol):
    p = tmp_path / "objs.pkl"
    _run(WRITER, p, protocol)
    assert _run(READER, p).strip() == "ok"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_in_process(protocol):
    a = R.as_bf16(R.ALL_CODES)
    b = pickle.loads(pickle.dumps(a, protocol=protocol))
    assert b.dtype == BF and np.array_equal(R.bits(b), R.ALL_CODES)
    d = pickle.loads(pickle.dumps(BF, protocol=protocol))
    assert d == BF and d is BF
    x = pickle.loads(pickle.dumps(bf16(-0.0), protocol=protocol))
    assert type(x) is bf16 and R.bits(x) == 0x8000


def test_copy_deepcopy():
    a = np.array([1.5, np.nan, -0.0], bf16)
    for b in (copy.copy(a), copy.deepcopy(a), copy.deepcopy([a])[0]):
        assert b.dtype == BF and np.array_equal(R.bits(b), R.bits(a))
        assert not np.shares_memory(a, b)
    assert copy.deepcopy(BF) == BF


# --------------------------------------------------------------------------
# np.save / np.load
# --------------------------------------------------------------------------
def _save(arr):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # NumPy warns that a custom dtype is pickled into the header
        warnings.simplefilter("ignore", UserWarning)
        np.save(buf, arr)
    buf.seek(0)
    return buf


def test_np_save_load_needs_no_pickle():
    a = R.as_bf16(R.ALL_CODES)
    b = np.load(_save(a))
    # the name resolves to whoever holds it: ml_dtypes' bfloat16 (same codes) when imported
    assert b.dtype == np.dtype("bfloat16") and np.array_equal(R.bits(b), R.ALL_CODES)


def test_np_save_does_not_warn():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.save(io.BytesIO(), np.ones(2, bf16))


@pytest.mark.parametrize("arr", [
    lambda: np.asfortranarray(R.as_bf16(R.ALL_CODES).reshape(256, 256)),
    lambda: R.as_bf16(R.ALL_CODES)[::7],
    lambda: np.array(bf16(2.5)),
    lambda: np.zeros((3, 0), bf16),
], ids=["fortran", "strided", "0-d", "empty"])
def test_np_save_load_layouts(arr):
    a = arr()
    b = np.load(_save(a))
    assert b.dtype == np.dtype("bfloat16") and b.shape == a.shape
    assert np.array_equal(R.bits(b), R.bits(a))


def test_np_savez(tmp_path):
    p = tmp_path / "x.npz"
    a = R.as_bf16(R.ALL_CODES[::5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        np.savez(p, x=a, y=np.arange(3))
        np.savez_compressed(tmp_path / "c.npz", x=a)
    z = np.load(p)
    assert z["x"].dtype == np.dtype("bfloat16") and np.array_equal(R.bits(z["x"]), R.ALL_CODES[::5])
    assert z["y"].tolist() == [0, 1, 2]
    c = np.load(tmp_path / "c.npz")
    assert np.array_equal(R.bits(c["x"]), R.ALL_CODES[::5])


def test_np_save_load_across_processes(tmp_path):
    p = tmp_path / "x.npy"
    _run("""
        import sys, warnings, numpy as np, minifloat
        warnings.simplefilter("ignore", UserWarning)
        codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        np.save(sys.argv[1], codes.view(minifloat.bfloat16))
    """, p)
    out = _run("""
        import sys, numpy as np
        try:   # the header names the format: minifloat (or ml_dtypes) must be imported
            np.load(sys.argv[1])
            raise AssertionError("loaded without minifloat")
        except ValueError as e:   # NumPy: "descr is not a valid dtype descriptor: 'bfloat16'"
            assert "bfloat16" in str(e), e
        import minifloat
        a = np.load(sys.argv[1])
        assert a.dtype == np.dtype(minifloat.bfloat16)
        codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        assert np.array_equal(a.view(np.uint16), codes)
        print("ok")
    """, p)
    assert out.strip() == "ok"


# --------------------------------------------------------------------------
# minifloat.save / minifloat.load (no pickle needed)
# --------------------------------------------------------------------------
def test_minifloat_save_load_round_trip(tmp_path):
    p = tmp_path / "x.npy"
    a = R.as_bf16(R.ALL_CODES).reshape(256, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no pickle warning
        minifloat.save(p, a)
    b = minifloat.load(p)
    assert b.dtype == BF and b.shape == a.shape
    assert np.array_equal(R.bits(b), R.bits(a))


def test_minifloat_load_needs_no_pickle(tmp_path):
    p = tmp_path / "x.npy"
    minifloat.save(p, np.array([1.5, np.nan], bf16))
    # the file holds no pickle: a plain np.load without allow_pickle reads it
    # (as raw bits or as the dtype), and minifloat.load gives the dtype back
    raw = np.load(p)
    assert raw.dtype.itemsize == 2 and raw.dtype != np.dtype(object)
    assert minifloat.load(p).dtype == BF


def test_minifloat_save_load_fresh_process(tmp_path):
    p = tmp_path / "x.npy"
    minifloat.save(p, R.as_bf16(R.ALL_CODES))
    out = _run("""
        import sys, numpy as np, minifloat
        a = minifloat.load(sys.argv[1])
        codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        assert a.dtype == np.dtype(minifloat.bfloat16)
        assert np.array_equal(a.view(np.uint16), codes)
        print("ok")
    """, p)
    assert out.strip() == "ok"

# ==========================================================================
# Every member of the family (bfloat16 included)
# ==========================================================================
def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES + FR.INT_NAMES)
def test_pickle_round_trip(name):
    t = mf_type(name)
    codes = FR.all_codes(name)
    a = codes.view(t)
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        dt = pickle.loads(pickle.dumps(np.dtype(t), protocol=proto))
        assert dt == np.dtype(t)
        b = pickle.loads(pickle.dumps(a, protocol=proto))
        assert b.dtype == a.dtype
        np.testing.assert_array_equal(codes_of(b, name), codes)
        m = a[: (len(a) // 2) * 2].reshape(2, -1)[:, ::2]      # non-contiguous
        c = pickle.loads(pickle.dumps(m, protocol=proto))
        np.testing.assert_array_equal(codes_of(c, name), codes_of(m, name))
        for i in (0, 1, len(codes) - 1):
            s = pickle.loads(pickle.dumps(a[i], protocol=proto))
            assert type(s) is t
            assert codes_of(np.array([s], t), name)[0] == codes[i]


@pytest.mark.parametrize("name", FR.FLOAT_NAMES + FR.INT_NAMES)
def test_save_load_without_pickle(name):
    a = FR.all_codes(name).view(mf_type(name)).reshape(-1, 2)
    buf = io.BytesIO()
    minifloat.save(buf, a)
    buf.seek(0)
    b = minifloat.load(buf)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(codes_of(b, name), codes_of(a, name))
    buf.seek(0)
    raw = np.load(buf, allow_pickle=False)          # plain NumPy can read it
    assert raw.dtype.itemsize == a.dtype.itemsize
