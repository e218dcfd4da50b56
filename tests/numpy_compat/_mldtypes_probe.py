"""A sample of ml_dtypes' public behaviour, observed through whatever module is
importable as ``ml_dtypes``.

    python _mldtypes_probe.py real    # the real ml_dtypes
    python _mldtypes_probe.py shim    # sys.modules["ml_dtypes"] = minifloat

prints one JSON object {observation: outcome}; test_dropin.py runs
both and compares.  Every outcome is a string: a value's repr-like text, or
"raises <ExceptionType>".  Values are compared by their exact float value or
by their stored bits, never by how a library prints them, except in the
"print." observations.
"""
import json
import pickle
import sys
import warnings

import numpy as np

if __name__ == "__main__" and sys.argv[1:] == ["shim"]:
    import minifloat
    sys.modules["ml_dtypes"] = minifloat

import ml_dtypes  # noqa: E402  (the real one, or minifloat under its name)

FLOATS = ["bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
          "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
          "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"]
INTS = ["int1", "int2", "int4", "uint1", "uint2", "uint4"]
PUBLIC = ["__version__", "bfloat16", "finfo", "iinfo", "bcomplex32", "complex32"] + FLOATS + INTS

OUT = {}


def text(v):
    """a library-neutral text for a result"""
    if isinstance(v, np.ndarray):
        if v.dtype.name in FLOATS or v.dtype.name in INTS:
            bits = v.view(np.uint16 if v.dtype.itemsize == 2 else np.uint8)
            return f"array[{v.dtype.name}] bits={bits.ravel().tolist()} shape={v.shape}"
        return f"array[{v.dtype.name}] {v.ravel().tolist()} shape={v.shape}"
    if isinstance(v, np.dtype):
        return f"dtype {v.name}"
    if isinstance(v, np.generic):
        name = type(v).__name__
        if name in FLOATS or name in INTS:
            arr = np.array([v])
            return f"scalar[{name}] bits={text(arr).split('bits=')[1].split(' ')[0]}"
        return f"scalar[{np.dtype(type(v)).name}] {v.item()!r}"
    if isinstance(v, float):
        return repr(v)
    return repr(v)


def obs(key, fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                OUT[key] = text(fn())
    except Exception as e:  # noqa: BLE001
        OUT[key] = f"raises {type(e).__name__}"


def T(name):
    return getattr(ml_dtypes, name)


def main():
    for n in PUBLIC:
        obs(f"name.{n}", lambda n=n: hasattr(ml_dtypes, n))
    for n in FLOATS + INTS:
        obs(f"dtype.{n}", lambda n=n: str(np.dtype(T(n))))
        obs(f"dtype.by_name.{n}", lambda n=n: np.dtype(n) == np.dtype(T(n)))
        obs(f"dtype.attr.{n}", lambda n=n: T(n).dtype == np.dtype(T(n)))
        obs(f"dtype.kind.{n}", lambda n=n: np.dtype(T(n)).kind)
        obs(f"dtype.char.{n}", lambda n=n: np.dtype(T(n)).char)
        obs(f"dtype.itemsize.{n}", lambda n=n: np.dtype(T(n)).itemsize)
        obs(f"type.name.{n}", lambda n=n: T(n).__name__)
        obs(f"type.mro.{n}", lambda n=n: [issubclass(T(n), c) for c in
                                          (np.generic, np.number, np.floating, np.integer,
                                           np.signedinteger, np.unsignedinteger)])
    for n in FLOATS:
        fields = ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal",
                  "smallest_subnormal", "nmant", "nexp", "maxexp", "minexp", "machep", "negep",
                  "precision", "resolution"]
        for fld in fields:
            obs(f"finfo.{n}.{fld}", lambda n=n, fld=fld: (
                float(getattr(ml_dtypes.finfo(T(n)), fld))))
        obs(f"finfo.{n}.dtype", lambda n=n: ml_dtypes.finfo(T(n)).dtype)
        obs(f"finfo.{n}.max_type", lambda n=n: type(ml_dtypes.finfo(T(n)).max).__name__)
        obs(f"finfo.{n}.of_array", lambda n=n: ml_dtypes.finfo(np.zeros(2, T(n))).dtype)
        obs(f"finfo.{n}.of_name", lambda n=n: ml_dtypes.finfo(n).dtype)
        obs(f"finfo.{n}.np_finfo_max", lambda n=n: float(np.finfo(T(n)).max))
        obs(f"finfo.{n}.min_ge_0", lambda n=n: bool(ml_dtypes.finfo(T(n)).min >= 0.0))
        # scalar constructors
        for v in (1.5, -2, 0.1, 1e6, "0.25", np.float32(3), float("nan")):
            obs(f"scalar.{n}({v!r})", lambda n=n, v=v: T(n)(v))
        obs(f"scalar.{n}.float", lambda n=n: float(T(n)(1.75)))
        obs(f"scalar.{n}.int", lambda n=n: int(T(n)(3.5)))
        # casts from float32 and back
        src = np.array([0.1, -0.3, 1.0, 1e6, -1e6, np.inf, -np.inf, np.nan, 1e-30, -0.0, 7.9],
                       np.float32)
        obs(f"cast.f32.{n}", lambda n=n: src.astype(T(n)))
        obs(f"cast.f64.{n}", lambda n=n: src.astype(np.float64).astype(T(n)))
        obs(f"cast.back.{n}", lambda n=n: src.astype(T(n)).astype(np.float32))
        obs(f"cast.int32.{n}", lambda n=n: np.array([1, 2, 3, 1000], np.int32).astype(T(n)))
        obs(f"cast.to_int.{n}", lambda n=n: np.array([1.5, -2.5], T(n)).astype(np.int32))
        obs(f"cast.bfloat16.{n}", lambda n=n: np.array([0.5, 3.0], T(n)).astype(T("bfloat16")))
        # arithmetic and promotion
        a = lambda n=n: np.array([0.5, 1.5, 3.0], T(n))   # noqa: E731
        b = lambda n=n: np.array([0.25, 2.0, 0.5], T(n))  # noqa: E731
        obs(f"arith.add.{n}", lambda a=a, b=b: a() + b())
        obs(f"arith.mul.{n}", lambda a=a, b=b: a() * b())
        obs(f"arith.div.{n}", lambda a=a, b=b: a() / b())
        obs(f"arith.neg.{n}", lambda a=a: -a())
        obs(f"arith.sqrt.{n}", lambda a=a: np.sqrt(a()))
        obs(f"arith.py_float.dtype.{n}", lambda a=a: (a() + 1.0).dtype)
        obs(f"arith.py_int.dtype.{n}", lambda a=a: (a() * 2).dtype)
        obs(f"arith.f32.dtype.{n}", lambda a=a: (a() + np.float32(1)).dtype)
        obs(f"arith.f16.dtype.{n}", lambda a=a: (a() + np.ones(3, np.float16)).dtype)
        obs(f"arith.scalar.{n}", lambda n=n: T(n)(1.5) + T(n)(0.5))
        obs(f"reduce.sum.{n}", lambda a=a: np.sum(a()))
        obs(f"reduce.mean.{n}", lambda a=a: np.mean(a()))
        obs(f"reduce.max.{n}", lambda a=a: np.max(a()))
        obs(f"matmul.{n}", lambda a=a, b=b: a() @ b())
        obs(f"fft.rfft.{n}", lambda a=a: np.fft.rfft(a()))
        obs(f"fft.fft.{n}", lambda a=a: np.fft.fft(a()))
        obs(f"fft.ifft.{n}", lambda a=a: np.fft.ifft(a()))
        obs(f"linalg.norm.{n}", lambda a=a: np.linalg.norm(a()))
        # comparisons
        obs(f"cmp.arrays.{n}", lambda a=a, b=b: (a() < b()).tolist())
        obs(f"cmp.nan.{n}", lambda n=n: (np.array([np.nan], T(n)) == np.array([np.nan], T(n))).tolist())
        for y in (1.0, 0.1, 0.0, -1.0, 1e6, 460.0):
            obs(f"cmp.py.{n}.lt({y})", lambda a=a, y=y: (a() < y).tolist())
            obs(f"cmp.py.{n}.eq({y})", lambda n=n, y=y: bool(T(n)(y) == y))
        obs(f"cmp.scalar.{n}", lambda n=n: bool(T(n)(1) < T(n)(2)))
        # NaN payloads through sign operations
        obs(f"sign.{n}", lambda n=n: np.negative(np.array([np.nan, 1.0], T(n))))
        obs(f"sort.{n}", lambda n=n: np.sort(np.array([3, np.nan, -1, 0.5], T(n))))
        obs(f"nextafter.{n}", lambda n=n: np.nextafter(np.array([1.0], T(n)), np.array([2.0], T(n))))
        obs(f"isnan.{n}", lambda n=n: np.isnan(np.array([np.nan, 1], T(n))).tolist())
        # pickling
        obs(f"pickle.scalar.{n}", lambda n=n: pickle.loads(pickle.dumps(T(n)(1.5))))
        obs(f"pickle.array.{n}", lambda n=n: pickle.loads(pickle.dumps(np.array([1.5, -2], T(n)))))
        # printing
        obs(f"print.str.{n}", lambda n=n: str(T(n)(0.1)))
        obs(f"print.repr.{n}", lambda n=n: repr(T(n)(0.1)))
        obs(f"print.array.{n}", lambda n=n: repr(np.array([0.1, 1.0], T(n))))
        obs(f"print.str_array.{n}", lambda n=n: str(np.array([0.1, 1.0], T(n))))
    for n in INTS:
        obs(f"iinfo.{n}", lambda n=n: (int(ml_dtypes.iinfo(T(n)).min), int(ml_dtypes.iinfo(T(n)).max),
                                       ml_dtypes.iinfo(T(n)).bits, ml_dtypes.iinfo(T(n)).kind))
        obs(f"iinfo.{n}.dtype", lambda n=n: ml_dtypes.iinfo(T(n)).dtype)
        obs(f"iinfo.{n}.of_array", lambda n=n: ml_dtypes.iinfo(np.zeros(2, T(n))).dtype)
        for v in (0, 1, -1, 7, 8, 3.7):
            obs(f"scalar.{n}({v!r})", lambda n=n, v=v: T(n)(v))
        lo, hi = (-1, 0) if n == "int1" else (0, 1)
        a = lambda n=n, lo=lo, hi=hi: np.array([lo, hi, hi], T(n))   # noqa: E731
        obs(f"arith.add.{n}", lambda a=a: a() + a())
        obs(f"arith.mul.{n}", lambda a=a: a() * a())
        obs(f"arith.div.dtype.{n}", lambda a=a: (a() / a()).dtype)
        obs(f"arith.py_int.dtype.{n}", lambda a=a: (a() + 0).dtype)
        obs(f"arith.neg.{n}", lambda a=a: -a())
        obs(f"reduce.sum.{n}", lambda a=a: np.sum(a()))
        obs(f"cmp.py.{n}.lt(100)", lambda a=a: (a() < 100).tolist())
        obs(f"cast.int32.{n}", lambda n=n: np.array([-9, -1, 0, 1, 3, 16], np.int32).astype(T(n)))
        obs(f"cast.f32.{n}", lambda n=n: np.array([-1.5, 0.7, 2.0], np.float32).astype(T(n)))
        obs(f"cast.back.{n}", lambda a=a: a().astype(np.float32))
        obs(f"pickle.array.{n}", lambda a=a: pickle.loads(pickle.dumps(a())))
        obs(f"print.str.{n}", lambda n=n, hi=hi: str(T(n)(hi)))
        obs(f"print.repr.{n}", lambda n=n, hi=hi: repr(T(n)(hi)))
        obs(f"print.array.{n}", lambda a=a: repr(a()))
    json.dump(OUT, sys.stdout, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
