import warnings
"""minifloat.save/load: .npy/.npz without pickle."""
import numpy as np
import pytest

import minifloat as mf

FORMATS = [f["name"] for f in mf._core.formats()]


@pytest.mark.parametrize("name", FORMATS)
def test_save_load_round_trip_every_format(tmp_path, name):
    dt = np.dtype(getattr(mf, name))
    codes = np.arange(256, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    if dt.itemsize == 1:
        codes &= (1 << mf._core.formats()[FORMATS.index(name)]["bits"]) - 1
    a = codes.view(dt).reshape(16, 16)[:, ::2]          # non-contiguous
    path = tmp_path / "a.npy"
    mf.save(path, a)
    b = mf.load(path)
    assert b.dtype == dt and b.shape == a.shape
    np.testing.assert_array_equal(b.view(codes.dtype), np.ascontiguousarray(a).view(codes.dtype))


def test_plain_numpy_reads_the_file_without_pickle(tmp_path):
    a = np.array([1.5, np.nan], mf.bfloat16)
    mf.save(tmp_path / "a.npy", a)
    raw = np.load(tmp_path / "a.npy", allow_pickle=False)
    assert raw.dtype.names == ("minifloat:bfloat16",)
    np.testing.assert_array_equal(raw["minifloat:bfloat16"], a.view(np.uint16))


def test_load_mmap_is_a_view(tmp_path):
    a = np.arange(10, dtype=mf.float8_e4m3fn)
    mf.save(tmp_path / "a.npy", a)
    m = mf.load(tmp_path / "a.npy", mmap_mode="r")
    assert m.dtype == a.dtype
    assert isinstance(m.base, np.memmap) or isinstance(m, np.memmap) or m.base is not None
    np.testing.assert_array_equal(m.view(np.uint8), a.view(np.uint8))


def test_savez_mixed(tmp_path):
    a = np.array([1, 2], mf.bfloat16)
    mf.savez(tmp_path / "z.npz", a=a, n=np.arange(3), f=np.ones(2, mf.float4_e2m1fn))
    with mf.load(tmp_path / "z.npz") as z:
        assert z["a"].dtype == a.dtype and z["f"].dtype == np.dtype(mf.float4_e2m1fn)
        np.testing.assert_array_equal(z["n"], np.arange(3))
        assert sorted(z.keys()) == ["a", "f", "n"]
    mf.savez_compressed(tmp_path / "c.npz", a)
    np.testing.assert_array_equal(mf.load(tmp_path / "c.npz")["arr_0"].view(np.uint16), a.view(np.uint16))


def test_np_save_needs_no_pickle(tmp_path):
    # the header's descr is the format's name (dt.str), which np.load resolves
    a = np.array([1.5], mf.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.save(tmp_path / "p.npy", a)
    assert np.load(tmp_path / "p.npy").dtype == np.dtype("bfloat16")   # ml_dtypes' if it holds the name


def test_unknown_format_in_file_is_a_clear_error(tmp_path):
    raw = np.zeros(2, dtype=[("minifloat:float3_e1m1", "u1")])
    np.save(tmp_path / "x.npy", raw)
    with pytest.raises(ValueError, match="unknown minifloat format"):
        mf.load(tmp_path / "x.npy")


@pytest.mark.parametrize("header", [
    b"\t{'descr': '<u2'}\n 1",                       # IndentationError in NumPy's tokenizer
    b"{'descr': '<u2', 'shape': (3,), '''",       # TokenError (an unterminated string)
])
def test_corrupt_header_is_a_value_error(tmp_path, header):
    # NumPy's header filter lets the tokenizer's own errors out for these
    # (found by fuzzing); minifloat.load says ValueError, as for every other
    # header it cannot parse
    hb = header + b" " * ((-(len(header) + 11)) % 64) + b"\n"
    blob = b"\x93NUMPY\x01\x00" + len(hb).to_bytes(2, "little") + hb + bytes(6)
    path = tmp_path / "bad.npy"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match="not a valid .npy file"):
        mf.load(path)
    with pytest.raises(ValueError, match="not a valid .npy file"):
        mf.load(path.open("rb"))
