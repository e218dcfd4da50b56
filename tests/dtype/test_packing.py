"""Family conformance: sub-byte packing, minifloat.pack(a) /
minifloat.unpack(b, dtype, shape), for float4_e2m1fn, float6_e2m3fn,
float6_e3m2fn, int4, uint4, int2, uint2, int1, uint1.

Layout (as DLPack packs sub-byte types): the values in C order, each taking
`bits` bits, little bit-endian -- 4-bit formats two per byte, the first in the
low nibble; 6-bit formats four values in three bytes; 2-bit four per byte;
1-bit eight per byte.  The reference packer below works bit by bit with
Python integers.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp

import minifloat

import _family_refs as R
from conftest import mf_type

SUB_BYTE = [n for n in R.FLOAT_NAMES + R.INT_NAMES if R.bits_of(n) < 8]


def ref_pack(codes, bits):
    """one big little-endian integer, `bits` bits per value, then its bytes"""
    acc = 0
    for i, c in enumerate(np.asarray(codes).reshape(-1).tolist()):
        acc |= (int(c) & ((1 << bits) - 1)) << (i * bits)
    nbytes = (len(np.asarray(codes).reshape(-1)) * bits + 7) // 8
    return np.frombuffer(acc.to_bytes(nbytes, "little"), np.uint8) if nbytes else np.zeros(0, np.uint8)


def test_sub_byte_formats_are_the_expected_ones():
    assert sorted(SUB_BYTE) == sorted(["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int4",
                                       "uint4", "int2", "uint2", "int1", "uint1"])


@pytest.mark.parametrize("name", SUB_BYTE)
def test_known_layouts(name):
    bits = R.bits_of(name)
    t = mf_type(name)
    n = R.ncodes(name)
    codes = np.arange(n, dtype=np.uint8)
    packed = minifloat.pack(codes.view(t))
    assert packed.dtype == np.uint8 and packed.ndim == 1
    np.testing.assert_array_equal(packed, ref_pack(codes, bits))
    # by hand
    if bits == 4:
        # 0,1,2,...,15 -> 0x10, 0x32, 0x54, ... (first value in the low nibble)
        assert packed.tolist() == [0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]
        assert minifloat.pack(np.array([1, 2, 3], np.uint8).view(t)).tolist() == [0x21, 0x03]
    elif bits == 6:
        # four values in three bytes: v0 | v1 << 6 | v2 << 12 | v3 << 18, little endian
        four = np.array([0x01, 0x02, 0x03, 0x3F], np.uint8)
        word = 0x01 | 0x02 << 6 | 0x03 << 12 | 0x3F << 18
        assert minifloat.pack(four.view(t)).tolist() == [word & 0xFF, (word >> 8) & 0xFF, word >> 16]
        assert len(minifloat.pack(np.zeros(5, np.uint8).view(t))) == 4        # 30 bits -> 4 bytes
    elif bits == 2:
        assert minifloat.pack(np.array([1, 2, 3, 0, 1], np.uint8).view(t)).tolist() == \
            [1 | 2 << 2 | 3 << 4, 1]
    elif bits == 1:
        assert minifloat.pack(np.array([1, 0, 1, 1, 0, 0, 0, 1, 1], np.uint8).view(t)).tolist() == \
            [0b10001101, 1]
    # float4 values: 1.0 is code 0b0010, -6 is 0b1111
    if name == "float4_e2m1fn":
        a = np.array([1.0, -6.0, 0.5], dtype=t)
        assert minifloat.pack(a).tolist() == [0x2 | 0xF << 4, 0x1]
    if name == "float6_e2m3fn":
        a = np.array([1.0, -2.0, 0.5], dtype=t)        # codes 0b001000, 0b110000, 0b000100
        word = 0x08 | 0x30 << 6 | 0x04 << 12
        assert minifloat.pack(a).tolist() == [word & 0xFF, (word >> 8) & 0xFF, word >> 16]


@pytest.mark.parametrize("name", SUB_BYTE)
def test_unpack_inverts_pack_every_code(name):
    t = mf_type(name)
    codes = np.arange(R.ncodes(name), dtype=np.uint8)
    for shape in [(R.ncodes(name),), (1, R.ncodes(name)), (R.ncodes(name) // 2, 2)]:
        a = codes.reshape(shape).view(t)
        b = minifloat.unpack(minifloat.pack(a), t, shape)
        assert b.dtype == np.dtype(t) and b.shape == shape
        np.testing.assert_array_equal(b.view(np.uint8), codes.reshape(shape))
    # names and dtypes work as the dtype argument, an int as the shape
    np.testing.assert_array_equal(minifloat.unpack(minifloat.pack(codes.view(t)), name, len(codes))
                                  .view(np.uint8), codes)
    np.testing.assert_array_equal(minifloat.unpack(minifloat.pack(codes.view(t)), np.dtype(t),
                                                   len(codes)).view(np.uint8), codes)


@pytest.mark.parametrize("name", SUB_BYTE)
def test_pack_takes_any_layout_in_c_order(name):
    t = mf_type(name)
    rng = np.random.default_rng(1)
    codes = rng.integers(0, R.ncodes(name), (6, 5)).astype(np.uint8)
    a = codes.view(t)
    want = ref_pack(codes, R.bits_of(name))
    np.testing.assert_array_equal(minifloat.pack(np.asfortranarray(a)), want)
    np.testing.assert_array_equal(minifloat.pack(a.T.copy().T), want)
    np.testing.assert_array_equal(minifloat.pack(a[:, ::2]), ref_pack(codes[:, ::2], R.bits_of(name)))


@pytest.mark.parametrize("name", SUB_BYTE)
def test_wrong_sizes_and_formats_raise(name):
    t = mf_type(name)
    bits = R.bits_of(name)
    for n in (1, 3, 7, 8, 9, 17):
        need = (n * bits + 7) // 8
        for wrong in (need - 1, need + 1):
            if wrong < 0:
                continue
            with pytest.raises(ValueError):
                minifloat.unpack(np.zeros(wrong, np.uint8), t, n)
        assert minifloat.unpack(np.zeros(need, np.uint8), t, n).shape == (n,)
    with pytest.raises(ValueError):
        minifloat.unpack(np.zeros(2, np.uint16), t, 4)          # not bytes


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu"])
def test_pack_refuses_byte_formats(name):
    with pytest.raises(ValueError, match="sub-byte"):
        minifloat.pack(np.zeros(4, mf_type(name)))
    with pytest.raises(ValueError, match="sub-byte"):
        minifloat.unpack(np.zeros(4, np.uint8), mf_type(name), 4)
    with pytest.raises(ValueError):
        minifloat.pack(np.zeros(4, np.uint8))
    with pytest.raises(ValueError):
        minifloat.unpack(np.zeros(4, np.uint8), np.float32, 4)


SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=9)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SUB_BYTE), SHAPES, st.data())
def test_property_round_trip(name, shape, data):
    t = mf_type(name)
    codes = data.draw(hnp.arrays(np.uint8, shape, elements=st.integers(0, R.ncodes(name) - 1)))
    a = codes.view(t)
    p = minifloat.pack(a)
    assert p.dtype == np.uint8 and p.shape == ((codes.size * R.bits_of(name) + 7) // 8,)
    np.testing.assert_array_equal(p, ref_pack(codes, R.bits_of(name)))
    b = minifloat.unpack(p, t, shape)
    assert b.shape == shape and b.dtype == np.dtype(t)
    np.testing.assert_array_equal(b.view(np.uint8), codes)
    # unpacked values equal the originals as numbers too
    np.testing.assert_array_equal(b.astype(np.float64), a.astype(np.float64))
