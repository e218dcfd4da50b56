"""Views, memory layout and data movement.

Data movement must keep every bit: each operation below is run on all 65536
codes (NaN payloads and -0.0 included) and compared code for code.
"""
import io
import subprocess
import sys

import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R

BF = np.dtype(bf16)
ALL = R.ALL_CODES
rng = np.random.default_rng(0)
PERM = rng.permutation(1 << 16)
MASK = rng.random(1 << 16) < 0.5


def _A():
    return R.as_bf16(ALL)


def _B():
    return R.as_bf16(ALL[::-1].copy())


# --------------------------------------------------------------------------
# views stay views
# --------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda a: a.reshape(16, 256 * 16),
    lambda a: a.reshape(256, 256).T,
    lambda a: a[::2],
    lambda a: a[100:200],
    lambda a: a[::-1],
    lambda a: np.moveaxis(a.reshape(16, 16, 256), 0, -1),
    lambda a: np.swapaxes(a.reshape(256, 256), 0, 1),
    lambda a: np.broadcast_to(a, (2, a.size)),
    lambda a: a.reshape(1, -1, 1).squeeze(),
    lambda a: np.expand_dims(a, 0),
    lambda a: a.ravel(),
    lambda a: a.reshape(256, 256)[:, 3],
    lambda a: np.lib.stride_tricks.sliding_window_view(a, 4),
    lambda a: a.reshape(256, 256).diagonal(),
    lambda a: np.flip(a),
], ids=["reshape", "T", "step", "slice", "reverse", "moveaxis", "swapaxes", "broadcast_to",
        "squeeze", "expand_dims", "ravel", "column", "sliding_window", "diagonal", "flip"])
def test_views_share_memory_and_bits(make):
    a = _A()
    v = make(a)
    assert v.dtype == BF
    assert np.shares_memory(a, v)
    base = make(ALL)
    assert np.array_equal(R.bits(v), base)
    # a write through the view shows in the base
    a2 = _A()
    v2 = make(a2)
    if v2.flags.writeable:
        v2[(0,) * v2.ndim] = bf16(42)
        assert np.any(R.bits(a2) == R.bits(bf16(42)))


def test_view_as_integers_and_back():
    a = _A()
    u = a.view(np.uint16)
    assert np.shares_memory(a, u) and np.array_equal(u, ALL)
    i = a.view(np.int16)
    assert np.array_equal(i, ALL.view(np.int16))
    b = a.view(np.uint8)
    assert b.shape == (2 * ALL.size,)
    assert np.array_equal(b[:4], [0, 0, 1, 0])           # little-endian codes 0x0000, 0x0001
    back = b.view(BF)
    assert np.array_equal(R.bits(back), ALL)
    two = ALL.reshape(256, 256).view(BF)
    assert two.shape == (256, 256) and np.array_equal(R.bits(two), ALL.reshape(256, 256))
    f = ALL.reshape(-1, 2).copy().view(np.uint32).view(BF)
    assert np.array_equal(R.bits(f).ravel(), ALL)
    assert np.array_equal(a.view(np.uint16).view(bf16).view(np.uint16), ALL)


def test_view_preserves_bits_of_scalar():
    x = R.as_bf16(np.array([0x7F81], np.uint16))[0]
    assert int(x.view(np.uint16)) == 0x7F81
    assert x.tobytes() == b"\x81\x7f"


# --------------------------------------------------------------------------
# data movement keeps bits, all codes
# --------------------------------------------------------------------------
MOVES = {
    "copy": (lambda A, B: A.copy(), lambda: ALL),
    "np.copy": (lambda A, B: np.copy(A), lambda: ALL),
    "copy_F": (lambda A, B: A.reshape(256, 256).copy(order="F").ravel(order="C"), lambda: ALL),
    "astype_same": (lambda A, B: A.astype(bf16), lambda: ALL),
    "concatenate": (lambda A, B: np.concatenate([A[:100], A, A[:5]])[100:-5], lambda: ALL),
    "stack": (lambda A, B: np.stack([B, A])[1], lambda: ALL),
    "hstack_vstack": (lambda A, B: np.vstack([np.hstack([A[:3], A[3:]]), B])[0], lambda: ALL),
    "where": (lambda A, B: np.where(MASK, A, B), lambda: np.where(MASK, ALL, ALL[::-1])),
    "take": (lambda A, B: np.take(A, PERM), lambda: ALL[PERM]),
    "fancy_get": (lambda A, B: A[PERM], lambda: ALL[PERM]),
    "bool_get": (lambda A, B: A[MASK], lambda: ALL[MASK]),
    "fancy_set": (lambda A, B: _set(np.zeros(1 << 16, bf16), PERM, A), lambda: _set(
        np.zeros(1 << 16, np.uint16), PERM, ALL)),
    "bool_set": (lambda A, B: _set(B.copy(), MASK, A[MASK]), lambda: _set(
        ALL[::-1].copy(), MASK, ALL[MASK])),
    "pad": (lambda A, B: np.pad(A, 3)[3:-3], lambda: ALL),
    "pad_edge": (lambda A, B: np.pad(A, (2, 2), mode="edge")[2:-2], lambda: ALL),
    "pad_wrap": (lambda A, B: np.pad(A, 2, mode="wrap")[:4], lambda: np.concatenate(
        [ALL[-2:], ALL[:2]])),
    "repeat": (lambda A, B: np.repeat(A, 2)[1::2], lambda: ALL),
    "tile": (lambda A, B: np.tile(A, 2)[1 << 16:], lambda: ALL),
    "roll": (lambda A, B: np.roll(A, 5), lambda: np.roll(ALL, 5)),
    "strided_copy": (lambda A, B: A[::3].copy(), lambda: ALL[::3]),
    "strided_assign": (lambda A, B: _set(np.zeros(3 << 16, bf16), slice(None, None, 3), A)[::3],
                       lambda: ALL),
    "transpose_copy": (lambda A, B: np.ascontiguousarray(A.reshape(256, 256).T).T.ravel(),
                       lambda: ALL),
    "copyto_where": (lambda A, B: _copyto(np.zeros(1 << 16, bf16), A, MASK), lambda: np.where(
        MASK, ALL, 0)),
    "put": (lambda A, B: _put(np.zeros(1 << 16, bf16), PERM, A), lambda: _set(
        np.zeros(1 << 16, np.uint16), PERM, ALL)),
    "choose": (lambda A, B: np.choose(MASK.astype(int), [A, B]), lambda: np.where(
        MASK, ALL[::-1], ALL)),
    "compress": (lambda A, B: np.compress(MASK, A), lambda: ALL[MASK]),
    "insert_delete": (lambda A, B: np.delete(np.insert(A, 7, A[0]), 7), lambda: ALL),
    "resize": (lambda A, B: np.resize(A, 70000)[:1 << 16], lambda: ALL),
    "broadcast_copy": (lambda A, B: np.broadcast_to(A, (2, 1 << 16)).copy()[1], lambda: ALL),
    "flat": (lambda A, B: A.reshape(256, 256).T.flat[:], lambda: ALL.reshape(256, 256).T.ravel()),
    "frombuffer": (lambda A, B: np.frombuffer(A.tobytes(), BF), lambda: ALL),
    "tobytes_F": (lambda A, B: np.frombuffer(A.reshape(256, 256).tobytes(order="F"), BF),
                  lambda: ALL.reshape(256, 256).T.ravel()),
    "scalar_roundtrip": (lambda A, B: np.array([A[i] for i in range(1 << 16)], dtype=bf16),
                         lambda: ALL),
    # via Python floats (tolist gives floats, as float16's): bits kept except
    # NaN payloads, which the cast from float makes ml_dtypes' quiet NaN
    "list_roundtrip": (lambda A, B: np.array(A.tolist(), dtype=bf16),
                       lambda: np.where(((ALL & 0x7FFF) > 0x7F80), (ALL & 0x8000) | 0x7FC0, ALL)
                       .astype(np.uint16)),
}


def _set(arr, idx, val):
    arr[idx] = val
    return arr


def _put(arr, idx, val):
    np.put(arr, idx, val)
    return arr


def _copyto(dst, src, where):
    np.copyto(dst, src, where=where)
    return dst


@pytest.mark.parametrize("name", list(MOVES))
def test_data_movement_keeps_bits(name):
    fn, want = MOVES[name]
    got = fn(_A(), _B())
    assert got.dtype == BF
    assert np.array_equal(R.bits(got), want())


def test_fill_full_and_scalar_setitem_keep_bits():
    nan_payload = R.as_bf16(np.array([0x7F81], np.uint16))[0]
    z = np.zeros(3, bf16)
    z.fill(nan_payload)
    assert (R.bits(z) == 0x7F81).all()
    assert (R.bits(np.full(3, nan_payload, bf16)) == 0x7F81).all()
    z[1] = R.as_bf16(np.array([0x8000], np.uint16))[0]
    assert R.bits(z)[1] == 0x8000


def test_setitem_converts_and_rounds():
    a = np.zeros(6, bf16)
    a[0] = 1 + 2 ** -8 + 2 ** -30      # Python float, one rounding
    a[1] = np.float32(0.1)
    a[2] = 3
    a[3] = "1.5"
    a[4] = True
    a[5] = np.float16(-2.5)
    assert list(R.bits(a)) == [0x3F81, int(R.bf16_codes_from_f32(np.float32(0.1))), 0x4040,
                               0x3FC0, 0x3F80, 0xC020]
    a[:3] = np.array([1.5, 2.5, 3.5], np.float32)
    assert a[:3].tolist() == [1.5, 2.5, 3.5]
    a[np.array([True, False, True, False, False, False])] = 7.0
    assert a[0] == 7 and a[2] == 7


def test_pad_modes():
    a = np.arange(1, 7).astype(bf16).reshape(2, 3)
    f = a.astype(np.float32)
    for mode, kw in [("constant", {"constant_values": 7.5}), ("edge", {}), ("reflect", {}),
                     ("symmetric", {}), ("wrap", {}), ("linear_ramp", {"end_values": 2}),
                     ("maximum", {}), ("minimum", {}), ("mean", {})]:
        got = np.pad(a, 2, mode=mode, **kw)
        want = np.pad(f, 2, mode=mode, **kw)
        assert got.dtype == BF, mode
        assert np.array_equal(R.bits(got), R.bf16_codes_from_f32(want)) or \
            mode in ("linear_ramp", "mean"), mode
        assert np.allclose(got.astype(np.float32), want, rtol=2 ** -8), mode
    c = np.pad(a, 1, constant_values=0.1)
    assert R.bits(c)[0, 0] == R.bf16_codes_from_f32(np.float32(0.1))


def test_creation_like_functions_keep_dtype():
    a = np.ones((2, 3), bf16)
    for fn in (np.empty_like, np.zeros_like, np.ones_like, lambda x: np.full_like(x, 2.5)):
        r = fn(a)
        assert r.dtype == BF and r.shape == (2, 3)
    assert (np.zeros_like(a) == 0).all() and (np.full_like(a, 2.5) == 2.5).all()
    assert np.asarray(a) is a
    assert np.array(a, copy=False) is a if np.lib.NumpyVersion(np.__version__) < "2.0.0" else \
        np.asarray(a, dtype=bf16) is a
    assert np.ascontiguousarray(a) is a
    assert np.require(a, requirements="C") is a
    e = np.eye(3, dtype=bf16)
    assert e.dtype == BF and float(e.sum()) == 3
    assert np.identity(2, dtype=bf16).dtype == BF
    assert np.tri(3, dtype=bf16).dtype == BF
    assert np.arange(0, 2, 0.5, dtype=bf16).tolist() == [0, 0.5, 1, 1.5]
    assert np.linspace(0, 1, 5, dtype=bf16).tolist() == [0, 0.25, 0.5, 0.75, 1]


def test_split_and_block():
    a = np.arange(12).astype(bf16).reshape(3, 4)
    parts = np.array_split(a, 2, axis=1)
    assert all(p.dtype == BF for p in parts)
    assert np.array_equal(R.bits(np.block([[parts[0], parts[1]]])), R.bits(a))
    assert np.column_stack([a[:, 0], a[:, 1]]).dtype == BF
    assert np.dstack([a, a]).shape == (3, 4, 2)


# --------------------------------------------------------------------------
# files and buffers
# --------------------------------------------------------------------------
def test_tofile_fromfile_binary(tmp_path):
    p = tmp_path / "x.bin"
    _A().tofile(p)
    assert p.stat().st_size == 2 << 16
    back = np.fromfile(p, dtype=bf16)
    assert back.dtype == BF and np.array_equal(R.bits(back), ALL)
    part = np.fromfile(p, dtype=bf16, count=10, offset=20)
    assert np.array_equal(R.bits(part), ALL[10:20])
    with open(p, "rb") as fh:
        assert np.array_equal(R.bits(np.fromfile(fh, dtype=bf16, count=3)), ALL[:3])


def test_frombuffer_sources():
    raw = _A().tobytes()
    for src in (raw, bytearray(raw), memoryview(raw), ALL.copy()):
        got = np.frombuffer(src, dtype=bf16)
        assert np.array_equal(R.bits(got), ALL)
    got = np.frombuffer(raw, dtype=bf16, count=5, offset=8)
    assert np.array_equal(R.bits(got), ALL[4:9])
    assert np.array_equal(R.bits(np.frombuffer(b"\x80\x3f", bf16)), [0x3F80])


def test_savetxt_loadtxt_genfromtxt(tmp_path):
    a = np.array([[1.5, -2, np.nan], [0.1, np.inf, -0.0]], bf16)
    s = io.StringIO()
    np.savetxt(s, a)
    back = np.loadtxt(io.StringIO(s.getvalue()), dtype=bf16)
    assert back.dtype == BF and np.array_equal(back, a, equal_nan=True)
    g = np.genfromtxt(io.StringIO("1.5,2\n3,nan"), delimiter=",", dtype=bf16)
    assert g.dtype == BF and g[0].tolist() == [1.5, 2.0]


def test_fromstring_fromfile_text(tmp_path):
    a = np.fromstring("1.5 2 0.1", dtype=bf16, sep=" ")
    assert a.tolist() == [1.5, 2.0, float(bf16(0.1))]
    p = tmp_path / "x.txt"
    np.array([1.5, -2], bf16).tofile(p, sep=" ")
    assert np.fromfile(p, dtype=bf16, sep=" ").tolist() == [1.5, -2.0]


# --------------------------------------------------------------------------
# unaligned data, structured and sub-array dtypes, byte order
# --------------------------------------------------------------------------
def test_unaligned_array_operations(each_level):
    buf = np.zeros(2 * 1001 + 1, np.uint8)
    u = np.ndarray((1001,), BF, buffer=buf[1:])
    assert not u.flags.aligned
    src = np.random.default_rng(3).integers(-8, 9, 1001).astype(np.float32)
    u[...] = src
    assert np.array_equal(u.astype(np.float32), src)
    assert np.array_equal(R.bits(u + u), R.bits(src.astype(bf16) * bf16(2)))
    assert R.bits(u.sum()) == R.bf16_codes_from_f64(src.astype(np.float64).sum())
    assert np.array_equal(R.bits(np.sqrt(np.abs(u))), R.bits(np.sqrt(np.abs(src.astype(bf16)))))
    assert np.array_equal(np.sort(u).astype(np.float32), np.sort(src))
    m = u[:1000].reshape(10, 100)
    assert np.array_equal(R.bits(m @ m.T), R.bits(src[:1000].astype(bf16).reshape(10, 100) @
                                                  src[:1000].astype(bf16).reshape(10, 100).T))


def test_structured_dtype_field():
    dt = np.dtype([("x", bf16), ("y", np.int32)])
    assert dt.fields["x"][0] == BF
    st = np.zeros(3, dtype=dt)
    st["x"] = [1.5, 2.5, 0.1]
    st["y"] = [1, 2, 3]
    assert st["x"].dtype == BF
    assert R.bits(st["x"]).tolist() == [0x3FC0, 0x4020, int(R.bf16_codes_from_f32(np.float32(0.1)))]
    assert type(st[0]["x"]) is bf16 and st[0]["x"] == 1.5
    st2 = np.array([(1.5, 2)], dtype=dt)
    assert st2["x"][0] == 1.5 and st2["y"][0] == 2
    conv = st2.astype([("x", np.float32), ("y", np.int32)])
    assert conv["x"][0] == 1.5


def test_subarray_dtypes():
    sa = np.zeros(2, dtype=(bf16, (3,)))
    assert sa.shape == (2, 3) and sa.dtype == BF
    sb = np.zeros(2, dtype=[("v", bf16, (3,))])
    sb["v"][0] = [1, 2, 3]
    assert sb["v"].dtype == BF and sb["v"][0].tolist() == [1, 2, 3]


def test_byteorder_change_gives_a_swapped_dtype():
    # legacy-compatible DTypes have a byte order (tests/numpy_compat/test_numpy_integration.py)
    sw = np.dtype(bf16).newbyteorder(">")
    assert sw.byteorder == ">" and sw.newbyteorder("=") == np.dtype(bf16)


def test_byteswap_does_not_crash():
    code = ("import numpy as np, minifloat\n"
            "a = np.array([1.0, 2.0], minifloat.bfloat16)\n"
            "b = a.byteswap()\n"
            "assert b.view(np.uint16).tolist() == [0x803F, 0x0040], b.view(np.uint16)\n"
            "a.byteswap(inplace=True)\n"
            "assert a.view(np.uint16).tolist() == [0x803F, 0x0040]\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn", "bfloat16"])
def test_strided_and_transposed_copies_keep_codes(name):
    # NumPy copies strided and transposed arrays through the self cast's
    # loop (a move an element of the format's size): every code, unchanged
    t = np.dtype(getattr(minifloat, name))
    n = 1 << (8 * t.itemsize)
    codes = np.random.default_rng(1).permutation(np.tile(np.arange(n, dtype=f"u{t.itemsize}"), 4))
    a = codes.view(t).reshape(16, -1)
    for moved, want in [(np.ascontiguousarray(a.T), codes.reshape(16, -1).T),
                        (a[:, ::3].copy(), codes.reshape(16, -1)[:, ::3]),
                        (a[::-2, 1::5].copy(order="F"), codes.reshape(16, -1)[::-2, 1::5])]:
        assert moved.dtype == t
        assert np.array_equal(moved.view(codes.dtype), want)
    # masked copies (the self cast's move-only loop, once a run of True),
    # scalar fills and buffered broadcasts (a repeated code, long and short)
    rng = np.random.default_rng(2)
    flat, cflat = a.ravel(), codes.copy()
    for mask in (rng.random(flat.size) < 0.5, rng.random(flat.size) < 0.97):
        np.testing.assert_array_equal(flat[mask].view(codes.dtype), cflat[mask])
        dst, cdst = np.zeros_like(flat), np.zeros_like(cflat)
        np.copyto(dst, flat, where=mask)
        cdst[mask] = cflat[mask]
        np.testing.assert_array_equal(dst.view(codes.dtype), cdst)
        dst[~mask] = flat[7]
        cdst[~mask] = cflat[7]
        np.testing.assert_array_equal(dst.view(codes.dtype), cdst)
    for length in (3, 15, 16, 17, 1000):
        for c in rng.choice(n, 8):
            for filled in (np.zeros(length, t),          # and unaligned for 2-byte codes
                           np.frombuffer(bytearray(length * t.itemsize + 1), t, length, 1)):
                filled[...] = codes.view(t)[c]
                assert (np.frombuffer(filled.tobytes(), codes.dtype) == codes[c]).all()
            wide = np.broadcast_to(codes.view(t)[c:c + 1], (length,)).copy()
            assert (wide.view(codes.dtype) == codes[c]).all()
