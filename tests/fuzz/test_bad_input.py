"""Bad input everywhere a user can reach: every public function and
CLI command given the wrong type, a zero-size or 0-d array, a non-contiguous,
byte-swapped or read-only array, NaN/inf, an out= of the wrong dtype or shape,
or a size that cannot be allocated.  Each either works or raises one of the
exceptions NumPy raises for such input, with a message; never a crash, never
another exception type, and never a partial write into out= or a file."""
import io
import os

import numpy as np
import pytest

import minifloat as mf
from minifloat import cli

# what NumPy raises for bad input
NUMPY_KINDS = (TypeError, ValueError, BufferError, OverflowError, MemoryError, IndexError)

bf16 = mf.bfloat16
f4 = mf.float4_e2m1fn


def _byteswapped():
    a = np.arange(6, dtype=np.float32).astype(bf16)
    return a.astype(a.dtype.newbyteorder())


def _readonly():
    a = np.arange(6, dtype=np.float32).astype(bf16)
    a.setflags(write=False)
    return a


# name -> a factory of a weird input
WEIRD = {
    "none": lambda: None,
    "str": lambda: "abc",
    "object": lambda: object(),
    "ragged": lambda: [[1, 2], [3]],
    "dict": lambda: {1: 2},
    "object-array": lambda: np.array([None, 1], dtype=object),
    "str-array": lambda: np.array(["a", "b"]),
    "zero-size": lambda: np.empty((0, 3), bf16),
    "zero-d": lambda: np.array(1.5, np.float32).astype(bf16),
    "non-contiguous": lambda: np.arange(12, dtype=np.float32).astype(bf16)[::3],
    "fortran": lambda: np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4).astype(bf16)),
    "byte-swapped": _byteswapped,
    "read-only": _readonly,
    "nan-inf": lambda: np.array([np.nan, np.inf, -np.inf, 1e30, -0.0], np.float32),
    "nan-inf-bf16": lambda: np.array([np.nan, np.inf, -np.inf, -0.0], np.float32).astype(bf16),
    "sub-byte": lambda: np.arange(5, dtype=np.float32).astype(f4),
    "int64-huge": lambda: np.array([2**62, -2**63], np.int64),
    "complex": lambda: np.array([1 + 2j]),
    "datetime": lambda: np.array(["2020-01-01"], "M8[D]"),
    "longdouble": lambda: np.ones(3, np.longdouble),
}


def _save_bytes(x):
    buf = io.BytesIO()
    mf.save(buf, x)
    buf.seek(0)
    return mf.load(buf)


# name -> a public function of one array argument
FUNCS = {
    "convert-bf16": lambda x: mf.convert(x, bf16),
    "convert-e4m3-sat": lambda x: mf.convert(x, mf.float8_e4m3fn, saturate=True),
    "convert-stochastic": lambda x: mf.convert(x, mf.float8_e5m2, rounding="stochastic", seed=1),
    "convert-toward-zero": lambda x: mf.convert(x, f4, rounding="toward_zero"),
    "pack": mf.pack,
    "unpack": lambda x: mf.unpack(x, f4, (2,)),
    "dlpack-roundtrip": lambda x: mf.from_dlpack(mf.dlpack(x)),
    "from_dlpack": mf.from_dlpack,
    "from_dlpack-copy": lambda x: mf.from_dlpack(x, copy=True),
    "from_dlpack-nocopy": lambda x: mf.from_dlpack(x, copy=False),
    "asnumpy": mf.asnumpy,
    "asnumpy-bf16": lambda x: mf.asnumpy(x, bf16),
    "asnumpy-nocopy": lambda x: mf.asnumpy(x, copy=False),
    "save-load": _save_bytes,
    "savez": lambda x: mf.savez(io.BytesIO(), a=x),
    "finfo": mf.finfo,
    "iinfo": mf.iinfo,
    "astype-bf16": lambda x: np.asarray(x).astype(bf16),
    "ufunc-add": lambda x: np.add(x, x),
    "sum": lambda x: np.sum(x),
    "matmul": lambda x: np.matmul(x, x),
    "sort": lambda x: np.sort(x),
    "scalar": lambda x: bf16(x),
}


@pytest.mark.parametrize("weird", sorted(WEIRD))
@pytest.mark.parametrize("func", sorted(FUNCS))
def test_weird_input_works_or_raises_numpy_kind(func, weird):
    x = WEIRD[weird]()
    before = x.copy() if isinstance(x, np.ndarray) else None
    try:
        FUNCS[func](x)
    except NUMPY_KINDS as e:
        assert str(e), f"{type(e).__name__} without a message"
    if before is not None:
        # inputs are never written to
        assert before.tobytes() == x.tobytes()


# ---------------------------------------------------------------- out=

@pytest.mark.parametrize("out_factory,exc", [
    (lambda: np.zeros(4, np.float32), ValueError),                    # wrong dtype
    (lambda: np.zeros(4, mf.float8_e4m3fn), ValueError),              # other minifloat
    (lambda: np.zeros(3, bf16), ValueError),                          # wrong shape
    (lambda: np.zeros((2, 2), bf16), ValueError),                     # not broadcastable
    (lambda: [0, 0, 0, 0], ValueError),                               # not an array
    (lambda: _readonly()[:4], ValueError),                            # read-only
])
@pytest.mark.parametrize("rounding", ["nearest", "toward_zero", "stochastic"])
def test_convert_bad_out_is_untouched(out_factory, exc, rounding):
    out = out_factory()
    before = np.array(out, copy=True) if isinstance(out, np.ndarray) else list(out)
    with pytest.raises(exc):
        mf.convert(np.array([1.0, 2.0, 3.0, 4.0]), bf16, rounding=rounding, out=out)
    if isinstance(out, np.ndarray):
        assert before.tobytes() == out.tobytes()
    else:
        assert out == before


def test_convert_good_out_non_contiguous():
    out = np.zeros(8, bf16)[::2]
    mf.convert(np.array([1.0, 2.0, 3.0, 4.0]), bf16, rounding="toward_zero", out=out)
    np.testing.assert_array_equal(out.astype(np.float32), [1, 2, 3, 4])


@pytest.mark.parametrize("kw,exc", [
    (dict(rounding="up"), ValueError),
    (dict(rounding=None), ValueError),
    (dict(seed=3), ValueError),                       # seed without stochastic
    (dict(rounding="stochastic", seed="x"), (TypeError, ValueError)),
])
def test_convert_bad_options(kw, exc):
    with pytest.raises(exc):
        mf.convert([1.0], bf16, **kw)


@pytest.mark.parametrize("dtype", [np.float32, "float32", None, "nope", mf.int4, object])
def test_convert_bad_dtype(dtype):
    with pytest.raises((ValueError, TypeError)):
        mf.convert([1.0], dtype)


# ---------------------------------------------------------------- sizes

def test_unallocatable_sizes():
    with pytest.raises((ValueError, MemoryError)):
        mf.unpack(np.zeros(1, np.uint8), f4, (2**62, 2**62))
    with pytest.raises((ValueError, MemoryError)):
        mf.unpack(np.zeros(1, np.uint8), f4, (-1,))
    # 2^57 bytes (128 PiB) is past any address space: a smaller size, such as
    # 64 TiB, is allocated where the kernel overcommits memory
    # (vm.overcommit_memory = 1, as on a lent GPU machine) and the worker is
    # killed writing it, as NumPy's own np.ones would be
    with pytest.raises(MemoryError):
        mf.convert(np.broadcast_to(np.float32(1), (2**56,)), bf16)
    with pytest.raises((ValueError, MemoryError)):
        np.empty(2**62, bf16)


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn", "int4"])
def test_pack_unpack_zero_and_0d(fmt):
    dt = np.dtype(getattr(mf, fmt))
    if fmt in ("bfloat16", "float8_e4m3fn"):
        with pytest.raises(ValueError, match="sub-byte"):
            mf.pack(np.zeros(3, dt))
        return
    assert mf.pack(np.zeros(0, dt)).size == 0
    assert mf.unpack(np.zeros(0, np.uint8), dt, (0, 5)).shape == (0, 5)
    z = np.zeros((), dt)
    back = mf.unpack(mf.pack(z), dt, ())
    assert back.shape == () and back.dtype == dt and back.view(np.uint8) == 0


# ---------------------------------------------------------------- files

def test_save_failure_leaves_no_file(tmp_path):
    path = tmp_path / "x.npy"
    with pytest.raises(ValueError):
        mf.save(path, np.array([None, 1], dtype=object))     # allow_pickle=False
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_save_failure_keeps_the_old_file(tmp_path):
    path = tmp_path / "x.npy"
    good = np.arange(4, dtype=np.float32).astype(bf16)
    mf.save(path, good)
    with pytest.raises(ValueError):
        mf.save(path, np.array([None], dtype=object))
    np.testing.assert_array_equal(mf.load(path).view(np.uint16), good.view(np.uint16))
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_save_appends_npy_like_numpy(tmp_path):
    mf.save(tmp_path / "y", np.zeros(2, bf16))
    assert os.listdir(tmp_path) == ["y.npy"]
    assert mf.load(tmp_path / "y.npy").dtype == bf16


@pytest.mark.parametrize("blob", [b"", b"\x93NUMPY", b"\x93NUMPY\x01\x00\x10\x00{'descr'",
                                  b"garbage" * 10, b"\x93NUMPY\x01\x00\x76\x00{'descr': [('minifloat:"
                                  b"nope', '<u2')], 'fortran_order': False, 'shape': (1,), }" + b" " * 60])
def test_load_garbage(blob):
    with pytest.raises((ValueError, EOFError, OSError)):
        mf.load(io.BytesIO(blob))


@pytest.mark.parametrize("to_path", [False, True])
def test_load_header_larger_than_file_raises_before_allocating(tmp_path, to_path):
    # found by fuzzing: np.load allocates what the header says first (8 GB)
    buf = io.BytesIO()
    mf.save(buf, np.zeros(4, bf16))
    blob = buf.getvalue()
    header_end = blob.index(b"\n") + 1
    head = blob[:header_end].replace(b"'shape': (4,), ", b"'shape': (4000000000,), ")
    head = head[:-1].rstrip(b" ")
    head = head + b" " * ((-(len(head) + 1)) % 64) + b"\n"
    head = head[:8] + (len(head) - 10).to_bytes(2, "little") + head[10:]
    bad = head + blob[header_end:]
    src = io.BytesIO(bad)
    if to_path:
        (tmp_path / "big.npy").write_bytes(bad)
        src = tmp_path / "big.npy"
    with pytest.raises(ValueError, match="truncated or corrupt"):
        mf.load(src)


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        mf.load(tmp_path / "nope.npy")


# ---------------------------------------------------------------- CLI

@pytest.mark.parametrize("argv", [["nope"], ["formats", "--bogus"], ["info", "extra"],
                                  ["promotion", "--x"], ["--version-typo"]])
def test_cli_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "usage" in capsys.readouterr().err


# ---------------------------------------------------------------- scalars

@pytest.mark.parametrize("arg", ["abc", None, object(), [1, 2], {}, b"\x00", 1 + 2j])
@pytest.mark.parametrize("t", [mf.bfloat16, mf.float8_e4m3fn, mf.float4_e2m1fn, mf.int4])
def test_scalar_constructors(t, arg):
    try:
        t(arg)
    except NUMPY_KINDS as e:
        assert str(e)


@pytest.mark.parametrize("t", [mf.bfloat16, mf.float8_e5m2, mf.float8_e4m3fn, mf.int4])
def test_scalar_nan_inf(t):
    for v in (float("nan"), float("inf"), -float("inf"), 1e300):
        try:
            x = t(v)
        except NUMPY_KINDS:
            continue
        float(x)


# ---------------------------------------------------------------- torch

def test_patch_torch_bad_mode():
    with pytest.raises((ValueError, TypeError)):
        mf.patch_torch("bogus")
