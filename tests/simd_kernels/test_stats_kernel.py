"""inspect's fused statistics kernel (_core._stats, src/kernels/stats/common.c) and
the direct casts between two minifloat formats.

The kernel's order of operations is documented (kernels.h, "Statistics of
one block"), so a NumPy float64 model of that order (``model`` below) must
give the same bits: counts, min, max, mean, m2, err2 and ref2 are compared
exactly, at every kernel level.  The round trip y of the target is made here
with the codec oracle (``_core._oracle_encode`` from the float64 value, one
rounding), NumPy (float16) or the identity (float32), never with the
kernels.  A second test compares the statistics Stats reports with plain
float64 formulas (approximately: those sum in another order).
"""
import math

import numpy as np
import pytest

import minifloat
from minifloat import _core
from minifloat.io import checkpoint as ck

from conftest import FLOAT_FORMATS, LEVELS, kernel_level

LANES, BLOCK = 8, 2048
FMT = {f["name"]: f for f in _core.formats()}
SOURCES = FLOAT_FORMATS + ["float16", "float32", "float64"]
TARGETS = [n for n in FLOAT_FORMATS] + ["float16", "float32"]


def dtype_of(name):
    return np.dtype(getattr(minifloat, name, None) or name)


def rel_of(target):
    return 2.0 ** (-ck._precision_bits(target) / 2)


def roundtrip(values, target):
    """float64 values -> target -> float64, independently of the kernels."""
    with np.errstate(invalid="ignore"):
        v = np.asarray(values, np.float64)
    if target == "float32":
        return v.astype(np.float32).astype(np.float64)
    if target == "float16":
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(np.float16).astype(np.float64)
    return _core._oracle_decode(target, _core._oracle_encode(target, v))


def lane_sums(terms):
    """Sum of float64 terms in the kernel's order: lane i % 8, each lane from
    +0 in index order, lanes combined by halving."""
    t = np.zeros(-(-terms.size // LANES) * LANES)
    t[:terms.size] = terms
    lanes = np.cumsum(t.reshape(-1, LANES), axis=0)[-1] if terms.size else np.zeros(LANES)
    lanes = [float(v) for v in lanes]
    w = LANES // 2
    while w >= 1:
        for j in range(w):
            lanes[j] = lanes[j] + lanes[j + w]
        w //= 2
    return lanes[0]


def model(x, y, rel):
    """The kernel's accumulator after one call, computed with NumPy: x the
    values (float32 or float64), y their round trip (same type) or None."""
    with np.errstate(all="ignore"):
        return _model(x, y, rel)


def _model(x, y, rel):
    acc = dict(n=0, nan=0, inf=0, finite=0, min=math.inf, max=-math.inf, mean=0.0, m2=0.0,
               over=0, zy=0, zx=0, gt=0, err2=0.0, ref2=0.0)
    for s in range(0, x.size, BLOCK):
        b = x[s:s + BLOCK]
        f = np.isfinite(b)
        x64 = np.where(f, b.astype(np.float64), 0.0)
        k = int(f.sum())
        acc["n"] += b.size
        acc["nan"] += int(np.isnan(b).sum())
        acc["inf"] += int(np.isinf(b).sum())
        bsum = lane_sums(x64)
        mean = bsum / k if k else 0.0
        d = np.where(f, b.astype(np.float64) - mean, 0.0)
        m2 = lane_sums(d * d)
        if y is not None:
            w = y[s:s + BLOCK]
            g = f & np.isfinite(w)
            acc["over"] += int((f & ~g).sum())
            acc["zy"] += int((g & (w == 0)).sum())
            acc["zx"] += int((g & (b == 0)).sum())
            with np.errstate(invalid="ignore", over="ignore"):
                e = np.where(g, (w - b).astype(np.float64), 0.0)   # in the values' type
            xg = np.where(g, b.astype(np.float64), 0.0)
            acc["err2"] += lane_sums(e * e)
            acc["ref2"] += lane_sums(xg * xg)
            acc["gt"] += int((np.abs(e) > np.abs(xg) * rel).sum())
        if k:
            n0 = acc["finite"]
            tot = n0 + k
            delta = bsum / k - acc["mean"]
            acc["mean"] += delta * k / tot
            acc["m2"] += m2 + delta * delta * n0 * k / tot
            acc["finite"] = tot
            acc["min"] = min(acc["min"], float(b[f].min()))
            acc["max"] = max(acc["max"], float(b[f].max()))
    return [acc[k] for k in ("n", "nan", "inf", "finite", "min", "max", "mean", "m2", "over", "zy",
                             "zx", "gt", "err2", "ref2")]


def codes(a):
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


def run_kernel(x, target, y=None):
    acc = np.zeros(14)
    acc[4], acc[5] = math.inf, -math.inf
    _core._stats(acc, x, target, rel_of(target) if target else 1.0, y)
    return acc


def sample(name, n, rng):
    """n values of format `name` with every kind of special: all codes of
    the format (NaN, inf, -0, subnormals) and random ones."""
    dt = dtype_of(name)
    if name in ("float32", "float64"):
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 5e-324, 3.4e38,
                            -1.0, 1.5], np.float64)
        with np.errstate(over="ignore"):
            special = special.astype(dt)
        x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 50.0, 1e4], n)).astype(dt)
        x[rng.integers(0, n, min(n, 40))] = rng.choice(special, min(n, 40))
        if n > 100:
            x[:special.size] = special
        return x
    codes = rng.integers(0, 256 ** dt.itemsize, n).astype(np.uint16 if dt.itemsize == 2 else np.uint8)
    if name.startswith("float6"):
        codes &= 0x3F
    elif name.startswith("float4"):
        codes &= 0x0F
    return codes.view(dt)


def as_values(x):
    """The exact values of a sample: float32 for every format but float64."""
    with np.errstate(invalid="ignore"):
        return x if x.dtype == np.float64 else x.astype(np.float32)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 2047, 2048, 2049, 5000])
@pytest.mark.parametrize("name", SOURCES)
def test_stats_match_model(level, name, n):
    rng = np.random.default_rng(n * 31 + len(name))
    x = sample(name, n, rng)
    xv = as_values(x)
    for target in [None, "float8_e4m3fn", TARGETS[(n + len(name)) % len(TARGETS)]]:
        if target is None:
            y = None
        else:
            y = roundtrip(xv, target).astype(xv.dtype)
        with kernel_level(level):
            got = run_kernel(x, target, y if x.dtype == np.float64 else None)
        want = model(xv, y, rel_of(target) if target else 1.0)
        assert got.tolist() == want, (name, target, n)
        if target is not None and x.dtype != np.float64:
            # convert's mode: the cast's error sums only
            acc = np.zeros(14)
            out = np.empty(n, dtype_of(target)) if target not in ("float16", "float32") else None
            with kernel_level(level), np.errstate(over="ignore"):
                _core._stats(acc, x, target, rel_of(target), None, out, False)
            assert acc[0] == n and acc[12:].tolist() == want[12:], (name, target, n)
            if out is not None:
                with np.errstate(over="ignore"):
                    assert codes(out).tolist() == codes(xv.astype(out.dtype)).tolist()


def finite_sample(name, n, rng):
    """n finite values of format `name` below 2^16 in magnitude (larger ones
    would swamp the float64 sums, hiding a wrong small term): for 8-bit
    formats every finite code in turn, for wider ones a sweep over the
    largest values of the sub-byte targets (which saturate there), then the
    finite codes (float32: wide-ranging values) in a random order, with
    subnormals, zeros of both signs and values that overflow the narrower
    targets."""
    dt = dtype_of(name)
    sweep = np.arange(-40, 40, 0.25)
    if name == "float32":
        x = (rng.standard_normal(n) * 2.0 ** rng.integers(-140, 12, n)).astype(np.float32)
        x = np.concatenate([sweep.astype(np.float32), [0.0, -0.0, 1e-45, -60000.0, 448.0], x])
        return x[:n].astype(np.float32)
    c = np.arange(256 ** dt.itemsize).astype(np.uint16 if dt.itemsize == 2 else np.uint8)
    v = c.view(dt)
    with np.errstate(invalid="ignore"):
        a = np.abs(v.astype(np.float32))
    fin = v[a < 2.0 ** 16]
    reps = -(-n // fin.size)
    first = [fin] if fin.size <= 256 else [sweep.astype(dt)]
    x = np.concatenate(first + [rng.permutation(fin) for _ in range(reps)])
    return x[:n]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("source", ["bfloat16", "float16", "float32", "float8_e5m2"])
def test_convert_fused_loop(level, source):
    """convert's mode on blocks of finite values, where a level's fused loop
    (kernels.h, cast_err: encode and error in one pass) does the work: the codes and
    err2/ref2 of every target, bit for bit the serial route's and the model's.
    Lengths leave tails of every size; one run puts a NaN, another an inf,
    in one block only (that block leaves the fused loop, the others stay)."""
    rng = np.random.default_rng(len(source))
    for target in TARGETS:
        for n in (5, 2048, 2048 + 8 + 7, 3 * 2048 + 31):
            x = finite_sample(source, n, rng)
            variants = [x]
            if n > 4096:
                for special in (np.nan, np.inf):
                    z = x.copy()
                    with np.errstate(invalid="ignore", over="ignore"):
                        z[2048 + 100] = special
                    variants.append(z)
            for z in variants:
                out = {}
                for lv in ("serial", level):
                    acc = np.zeros(14)
                    o = (np.empty(n, dtype_of(target)) if target not in ("float16", "float32")
                         else None)
                    with kernel_level(lv), np.errstate(over="ignore", invalid="ignore"):
                        _core._stats(acc, z, target, 0.25, None, o, False)
                    out[lv] = (acc[12:].view(np.uint64).tolist(),
                               None if o is None else codes(o).tolist())
                assert out[level] == out["serial"], (source, target, n)
                zv = as_values(z)
                y = roundtrip(zv, target).astype(zv.dtype)
                want = model(zv, y, 0.25)
                assert np.array(want[12:]).view(np.uint64).tolist() == out[level][0]
                if out[level][1] is not None:
                    with np.errstate(over="ignore", invalid="ignore"):
                        assert out[level][1] == codes(zv.astype(dtype_of(target))).tolist()


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float32", "float8_e5m2"])
def test_levels_bit_identical(name):
    """Every level against serial, bits (the sign of a zero min included)."""
    rng = np.random.default_rng(1)
    x = sample(name, 30000, rng)
    x[:3000] = np.zeros(1, np.float32).astype(x.dtype)          # a block of zeros...
    x[1000:1003] = (-np.zeros(3, np.float32)).astype(x.dtype)    # ...with some -0
    for target in [None, "float8_e4m3fn", "bfloat16", "float16"]:
        with kernel_level("serial"):
            want = run_kernel(x, target)
        for level in LEVELS:
            with kernel_level(level):
                got = run_kernel(x, target)
            assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist(), (level, target)


def test_all_finite_fast_path_matches_masked():
    """A block where only the last vector holds a NaN (the SIMD levels try an
    unmasked loop first) and one where only y overflows."""
    x = np.linspace(-300, 300, 4096).astype(np.float32)
    x[2040] = np.nan
    x[4095] = 1000.0                     # overflows float8_e4m3fn
    y = roundtrip(x, "float8_e4m3fn").astype(np.float32)
    want = model(x, y, rel_of("float8_e4m3fn"))
    for level in LEVELS:
        with kernel_level(level):
            assert run_kernel(x, "float8_e4m3fn").tolist() == want, level


def test_codes_out_and_errors():
    x = np.linspace(-3, 3, 5000).astype(minifloat.bfloat16)
    out = np.empty(x.size, minifloat.float8_e4m3fn)
    acc = np.zeros(14)
    acc[4], acc[5] = math.inf, -math.inf
    _core._stats(acc, x, "float8_e4m3fn", 0.25, None, out)
    assert out.view(np.uint8).tolist() == x.astype(minifloat.float8_e4m3fn).view(np.uint8).tolist()
    # moments=False: the same codes and error sums (the rest undefined)
    for level in LEVELS:
        with kernel_level(level):
            acc2 = np.zeros(14)
            acc2[4], acc2[5] = math.inf, -math.inf
            out2 = np.empty_like(out)
            _core._stats(acc2, x, "float8_e4m3fn", 0.25, None, out2, False)
        assert out2.view(np.uint8).tolist() == out.view(np.uint8).tolist()
        assert acc2[0] == acc[0] and acc2[12:].tolist() == acc[12:].tolist()
    with pytest.raises(ValueError, match="acc"):
        _core._stats(np.zeros(3), x, None, 1.0)
    with pytest.raises(TypeError):
        _core._stats(acc, np.arange(3), None, 1.0)
    with pytest.raises(ValueError, match="contiguous"):
        _core._stats(acc, x[::2], None, 1.0)
    with pytest.raises(ValueError, match="round trip"):
        _core._stats(acc, np.zeros(3), "float8_e4m3fn", 1.0)
    with pytest.raises(ValueError, match="unknown"):
        _core._stats(acc, x, "int4", 1.0)


def stats_numpy(x, target):
    """Stats' numbers by plain float64 formulas (another summation order)."""
    with np.errstate(invalid="ignore"):
        x = np.asarray(x, np.float64).reshape(-1)
    f = x[np.isfinite(x)]
    out = {"n": x.size, "nan": int(np.isnan(x).sum()), "inf": int(np.isinf(x).sum())}
    if f.size:
        out.update(min=f.min(), max=f.max(), mean=f.mean(), std=f.std())
    if target:
        y = roundtrip(f, target)
        ok = np.isfinite(y)
        xs, ys = f[ok], y[ok]
        zeros = int((ys == 0).sum())
        ftz = zeros - int((xs == 0).sum()) if zeros else 0
        out.update(over=int((~ok).sum()), ftz=ftz,
                   lossy=int((np.abs(ys - xs) > rel_of(target) * np.abs(xs)).sum()) - ftz,
                   err2=float(((ys - xs) ** 2).sum()), ref2=float((xs ** 2).sum()))
    return out


@pytest.mark.parametrize("name", SOURCES + ["int8", "uint8", "int32", "int64", "bool"])
def test_stats_class_every_dtype(name):
    """Stats (the class inspect uses) on several chunks of every source dtype
    against float64 formulas; the NumPy route (_add_numpy) agrees too."""
    rng = np.random.default_rng(len(name))
    if name in ("int8", "uint8", "int32", "int64", "bool"):
        x = rng.integers(-100 if name[0] == "i" else 0, 100, 7000).astype(name)
    else:
        x = sample(name, 7000, rng)
    xv = as_values(x) if x.dtype.kind != "b" else x
    is_float = x.dtype.kind not in "iub"
    for target in ([None, "float8_e4m3fn", "float16", "float8_e8m0fnu"] if is_float else [None]):
        s, t = ck.Stats(target), ck.Stats(target)
        for i in range(0, x.size, 3000):
            s.add(x[i:i + 3000])
            t._add_numpy(x[i:i + 3000])
        want = stats_numpy(xv, target)
        for st in (s, t):
            assert (st.n, st.nan, st.inf) == (want["n"], want["nan"], want["inf"])
            assert st.min == want["min"] and st.max == want["max"]
            assert st.mean == pytest.approx(want["mean"], rel=1e-12, abs=1e-300)
            assert st.std == pytest.approx(want["std"], rel=1e-12)
            if target:
                assert (st.over, st.ftz, st.lossy) == (want["over"], want["ftz"], want["lossy"])
                assert st.err2 == pytest.approx(want["err2"], rel=1e-12, abs=1e-300)
                assert st.ref2 == pytest.approx(want["ref2"], rel=1e-12, abs=1e-300)


def test_stats_empty_and_all_nan():
    s = ck.Stats("float8_e4m3fn")
    s.add(np.zeros(0, minifloat.bfloat16))
    s.add(np.full(5, np.nan, np.float32).astype(minifloat.bfloat16))
    d = s.as_dict()
    assert d["min"] is None and d["nan"] == 5 and d["target"]["overflow"] is None


# ------------------------------------------------------- direct casts

PAIRS = [(a, b) for a in FLOAT_FORMATS for b in FLOAT_FORMATS if a != b]


def codes_of(x):
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)


def cast_flags(fn):
    seen = set()
    with np.errstate(all="call", call=lambda kind, flag: seen.add(kind)):
        r = fn()
    return r, seen


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("a,b", PAIRS)
def test_direct_cast_all_codes(level, a, b):
    """x.astype(b) for every code of a, bit for bit the cast via float64 (one
    rounding by the codec), with the same overflow warning; contiguous,
    strided in and strided out."""
    da, db = dtype_of(a), dtype_of(b)
    codes = np.arange(256 ** da.itemsize).astype(np.uint16 if da.itemsize == 2 else np.uint8)
    x = codes.view(da)
    finite = np.isfinite(x.astype(np.float64))
    want, wflags = cast_flags(lambda: x.astype(np.float64).astype(db))
    with kernel_level(level):
        got, gflags = cast_flags(lambda: x.astype(db))
        assert codes_of(got).tolist() == codes_of(want).tolist()
        assert gflags == wflags
        # per value: the warning only where the float64 route warns
        big = x[finite][-3:]
        assert ("overflow" in cast_flags(lambda: big.astype(db))[1]) == \
            ("overflow" in cast_flags(lambda: big.astype(np.float64).astype(db))[1])
        out = np.zeros(2 * x.size, db)
        with np.errstate(over="ignore"):
            out[::2] = x[::-1]
        assert codes_of(out[::2]).tolist() == codes_of(want[::-1]).tolist()
        with np.errstate(over="ignore"):
            y2 = np.repeat(x, 2)[::2].astype(db)
        assert codes_of(y2).tolist() == codes_of(want).tolist()


def test_threads_give_the_same_bits():
    """Chunks above 1 MiB are split between threads at block boundaries and
    the blocks merged in order: any thread count gives the same result."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(3 * 2**20 + 5) * 300).astype(np.float32).astype(minifloat.bfloat16)
    x[12345] = np.nan
    res = {}
    for t in (1, 2, 3):
        prev = minifloat.set_num_threads(t)
        try:
            for moments in (True, False):
                acc = np.zeros(14)
                acc[4], acc[5] = math.inf, -math.inf
                out = np.empty(x.size, minifloat.float8_e4m3fn)
                with np.errstate(over="ignore"):
                    _core._stats(acc, x, "float8_e4m3fn", 0.25, None, out, moments)
                res.setdefault(moments, []).append((acc.view(np.uint64).tolist(),
                                                    out.view(np.uint8).tobytes()))
        finally:
            minifloat.set_num_threads(prev)
    for moments, rs in res.items():
        assert all(r == rs[0] for r in rs), moments
    xv = x.astype(np.float32)
    y = roundtrip(xv, "float8_e4m3fn").astype(np.float32)
    assert res[True][0][0] == np.array(model(xv, y, 0.25)).view(np.uint64).tolist()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("name", ["bfloat16", "float8_e5m2", "float32", "float64", "float16"])
def test_kernel_route_warns_nothing(name):
    """Every code (NaN payloads, signalling NaNs, infs) through Stats with a
    target: no RuntimeWarning (the kernels' FP flags are not the user's)."""
    dt = dtype_of(name)
    if dt.itemsize <= 2:
        x = np.arange(256 ** dt.itemsize).astype(np.uint16 if dt.itemsize == 2 else np.uint8).view(dt)
    else:
        x = sample(name, 5000, np.random.default_rng(0))
    s = ck.Stats("float8_e4m3fn")
    s.add(x)
    np.add(np.ones(3), 1.0)            # NumPy reports flags left over after its own loops
    assert s.nan == int(np.isnan(as_values(x)).sum())
