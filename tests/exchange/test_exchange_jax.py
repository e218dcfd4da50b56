"""DLPack exchange with JAX (CPU), both directions."""
import textwrap

import numpy as np
import pytest

import minifloat
from minifloat import _core

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from test_exchange import capsule_info, data_ptr, run_child  # noqa: E402

FORMATS = _core.formats()
# formats JAX has a dtype for, byte-sized (JAX exports and imports them over DLPack)
JAX_BYTE = [f for f in FORMATS if f["dlpack_bits"] == 8 * f["itemsize"]
            and hasattr(jnp, f["name"])]
JAX_SUBBYTE = [f for f in FORMATS if f["dlpack_bits"] < 8 * f["itemsize"]]


def test_jax_has_bfloat16_and_float8():
    names = {f["name"] for f in JAX_BYTE}
    assert {"bfloat16", "float8_e4m3fn", "float8_e5m2"} <= names


def codes(f, n=64, seed=0):
    """Every code of the format (n values), as an ndarray of the minifloat dtype."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 1 << f["bits"], n, dtype=np.uint32)
    return c.astype(f"u{f['itemsize']}").view(f["dtype"])


def aligned(a, alignment=64):
    """A copy of `a` whose data is `alignment`-byte aligned (JAX views only those)."""
    buf = np.empty(a.nbytes + alignment, np.uint8)
    off = (-buf.ctypes.data) % alignment
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("f", JAX_BYTE, ids=lambda f: f["name"])
def test_jax_to_numpy(f):
    src = codes(f).reshape(8, 8)
    ml = np.asarray(src.view(f"u{f['itemsize']}")).view(getattr(jnp, f["name"]))
    j = jnp.asarray(ml)
    a = minifloat.from_dlpack(j)
    assert a.dtype == f["dtype"] and a.shape == (8, 8)
    assert data_ptr(a) == j.unsafe_buffer_pointer()       # zero-copy
    assert not a.flags.writeable                           # JAX answers with legacy capsules
    assert a.tobytes() == src.tobytes()
    b = minifloat.asnumpy(j.T)
    assert b.dtype == f["dtype"] and b.tobytes() == np.ascontiguousarray(src.T).tobytes()


@pytest.mark.parametrize("f", JAX_BYTE, ids=lambda f: f["name"])
def test_numpy_to_jax(f):
    a = aligned(codes(f, seed=1).reshape(8, 8))
    j = minifloat.to_jax(a)
    assert j.dtype.name == f["name"] and j.shape == (8, 8)
    assert j.unsafe_buffer_pointer() == data_ptr(a)        # zero-copy when 64-byte aligned
    assert np.asarray(j).tobytes() == a.tobytes()
    j2 = jax.dlpack.from_dlpack(minifloat.dlpack(a))
    assert np.asarray(j2).tobytes() == a.tobytes()
    # round trip back
    assert minifloat.from_dlpack(j).tobytes() == a.tobytes()


def test_jax_exports_packed_float4():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    vals = np.array([0.5, 1, -6, 0, 2, 3, -0.5, 6], np.float32)
    j = jnp.asarray(vals.astype(ml_dtypes.float4_e2m1fn))
    info = capsule_info(j.__dlpack__())
    assert info["dtype"] == (17, 4, 1) and info["flags"] is None   # legacy: packed
    a = minifloat.from_dlpack(j)                                   # unpacked (a copy)
    assert a.dtype == minifloat.float4_e2m1fn and a.astype(np.float32).tolist() == vals.tolist()
    with pytest.raises(BufferError, match="packed"):
        minifloat.from_dlpack(j, copy=False)


@pytest.mark.parametrize("f", JAX_SUBBYTE, ids=lambda f: f["name"])
def test_sub_byte_to_jax(f):
    a = codes(f, 16, seed=2)
    try:
        j = minifloat.to_jax(a)
    except TypeError as err:          # JAX 0.10's CPU backend has no float6 or int1 arrays
        assert f["name"].startswith(("float6", "int1", "uint1")), err
        return
    assert j.dtype.name == f["name"]
    mask = (1 << f["bits"]) - 1
    assert (np.asarray(j).view(np.uint8) & mask).tolist() == a.view(np.uint8).tolist()
    with pytest.raises(BufferError, match="copy"):
        minifloat.to_jax(a, copy=False)


def test_read_only_and_unaligned_arrays_to_jax():
    a = aligned(np.arange(16, dtype=np.float32)).astype(minifloat.bfloat16)
    a.flags.writeable = False
    j = minifloat.to_jax(a)          # legacy capsules cannot say read-only: a copy
    assert j.unsafe_buffer_pointer() != data_ptr(a)
    assert np.asarray(j).tobytes() == a.tobytes()
    with pytest.raises(BufferError, match="read-only"):
        minifloat.to_jax(a, copy=False)
    u = aligned(np.arange(17, dtype=np.float32))[1:]     # 4 bytes past a 64-byte boundary
    assert data_ptr(u) % 64 == 4
    assert np.asarray(minifloat.to_jax(u)).tolist() == u.tolist()


def test_ml_dtypes_arrays_to_jax():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = aligned(np.arange(16, dtype=np.float32).astype(ml_dtypes.bfloat16))
    j = minifloat.to_jax(a)
    assert j.dtype == jnp.bfloat16 and j.unsafe_buffer_pointer() == data_ptr(a)
    assert np.asarray(j).tobytes() == a.tobytes()


# ------------------------------------------------------------------ strides
# JAX imports only compact layouts over DLPack (C order or a transpose) and
# raises for gaps, zero and negative strides; to_jax hands it a C-contiguous
# copy of those.  The cases run in a child process, like torch's (whose import
# aborts on a negative stride), so that an abort could not end the run.

NONCOMPACT = ["reversed", "rows reversed", "columns reversed, step 2", "strided",
              "zero stride"]
COMPACT = ["contiguous", "transposed"]

_STRIDES_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from numpy.lib.stride_tricks import as_strided
    import jax
    import minifloat as mf

    dtype = sys.argv[1]
    buf = np.empty(48 * 4 + 64, np.uint8)             # 64-byte aligned (JAX views only those)
    off = (-buf.ctypes.data) % 64
    t = np.dtype(getattr(mf, dtype, dtype))
    base = buf[off:off + 48 * t.itemsize].view(t).reshape(6, 8)
    base[...] = np.arange(48, dtype=np.float32).reshape(6, 8).astype(t)
    for layout in sys.argv[2:]:
        print("case:", dtype, layout, file=sys.stderr, flush=True)
        a = {"reversed": base.ravel()[::-1], "rows reversed": base[::-1],
             "columns reversed, step 2": base[:, ::-2], "strided": base[1:, ::3],
             "zero stride": as_strided(base, (4, 8), (0, t.itemsize)),
             "contiguous": base, "transposed": base.T}[layout]
        want = np.ascontiguousarray(a).tobytes()
        if layout in ("contiguous", "transposed"):
            j = mf.to_jax(a)
            assert np.asarray(j).tobytes() == want, "values"
            assert j.unsafe_buffer_pointer() == a.ctypes.data, "not zero-copy"
            assert mf.to_jax(a, copy=False).unsafe_buffer_pointer() == a.ctypes.data
        else:
            for copy in (None, True):
                j = mf.to_jax(a, copy=copy)
                assert np.asarray(j).tobytes() == want, ("values", copy)
            try:
                mf.to_jax(a, copy=False)
            except ValueError as err:
                assert "Unable to avoid copy" in str(err) and "compact" in str(err), err
            else:
                raise AssertionError("copy=False did not raise")
    print("ok")
""")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_to_jax_copies_what_it_cannot_view(dtype):
    run_child(_STRIDES_CHILD, dtype, *NONCOMPACT)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_to_jax_keeps_compact_layouts_zero_copy(dtype):
    run_child(_STRIDES_CHILD, dtype, *COMPACT)
