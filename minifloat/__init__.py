"""minifloat: low-precision floats (bfloat16, float8, float6, float4, ...) as
first-class NumPy dtypes, with ml_dtypes' names and semantics."""
from . import _core
from ._core import (
    bfloat16,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float6_e2m3fn,
    float6_e3m2fn,
    float4_e2m1fn,
    int4,
    uint4,
    int2,
    uint2,
    int1,
    uint1,
)

__version__ = "0.1.0"
