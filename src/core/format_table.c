/*
 * The rows of the format table.  Parameters are the formats' definitions
 * (OCP 8-bit FP, OCP MX, ml_dtypes, DLPack 1.3); see docs/formats.md, which
 * is generated from this table by `python -m minifloat formats --markdown`.
 */
#include <stddef.h>
#include "format_table.h"

/* DLPack type codes (dlpack.h 1.3) */
enum {
    DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4,
    DL_F8_E3M4 = 7, DL_F8_E4M3 = 8, DL_F8_E4M3B11FNUZ = 9, DL_F8_E4M3FN = 10,
    DL_F8_E4M3FNUZ = 11, DL_F8_E5M2 = 12, DL_F8_E5M2FNUZ = 13, DL_F8_E8M0FNU = 14,
    DL_F6_E2M3FN = 15, DL_F6_E3M2FN = 16, DL_F4_E2M1FN = 17,
};

#define FLOAT_ROW(ID, NAME, CLS, BITS, SIZE, E, M, BIAS, SPECIAL, SIGNED, DLCODE, CHAR) \
    [ID] = {.id = ID, .name = NAME, .dtype_class = CLS, .kind = MF_KIND_FLOAT,          \
            .bits = BITS, .itemsize = SIZE, .exp_bits = E, .mant_bits = M,              \
            .bias = BIAS, .special = SPECIAL, .has_sign = SIGNED,                       \
            .dlpack_code = DLCODE, .dlpack_bits = BITS, .typechar = CHAR}

#define INT_ROW(ID, NAME, CLS, KIND, BITS, DLCODE, CHAR)                                \
    [ID] = {.id = ID, .name = NAME, .dtype_class = CLS, .kind = KIND, .bits = BITS,     \
            .itemsize = 1, .has_sign = (KIND == MF_KIND_SINT),                          \
            .special = MF_SPECIAL_NONE, .dlpack_code = DLCODE, .dlpack_bits = BITS,     \
            .typechar = CHAR}

const mf_format mf_formats[MF_NUM_FORMATS] = {
    /*        id                     name                   DType class                bits size e  m bias special           sign DLPack            char */
    FLOAT_ROW(MF_BFLOAT16,           "bfloat16",            "BFloat16DType",           16, 2, 8, 7, 127, MF_SPECIAL_IEEE, 1, DL_BFLOAT,        'E'),
    FLOAT_ROW(MF_FLOAT8_E3M4,        "float8_e3m4",         "Float8E3M4DType",          8, 1, 3, 4,   3, MF_SPECIAL_IEEE, 1, DL_F8_E3M4,        '1'),
    FLOAT_ROW(MF_FLOAT8_E4M3,        "float8_e4m3",         "Float8E4M3DType",          8, 1, 4, 3,   7, MF_SPECIAL_IEEE, 1, DL_F8_E4M3,        '2'),
    FLOAT_ROW(MF_FLOAT8_E4M3B11FNUZ, "float8_e4m3b11fnuz",  "Float8E4M3B11FNUZDType",   8, 1, 4, 3,  11, MF_SPECIAL_FNUZ, 1, DL_F8_E4M3B11FNUZ, '3'),
    FLOAT_ROW(MF_FLOAT8_E4M3FN,      "float8_e4m3fn",       "Float8E4M3FNDType",        8, 1, 4, 3,   7, MF_SPECIAL_FN,   1, DL_F8_E4M3FN,      '4'),
    FLOAT_ROW(MF_FLOAT8_E4M3FNUZ,    "float8_e4m3fnuz",     "Float8E4M3FNUZDType",      8, 1, 4, 3,   8, MF_SPECIAL_FNUZ, 1, DL_F8_E4M3FNUZ,    '5'),
    FLOAT_ROW(MF_FLOAT8_E5M2,        "float8_e5m2",         "Float8E5M2DType",          8, 1, 5, 2,  15, MF_SPECIAL_IEEE, 1, DL_F8_E5M2,        '6'),
    FLOAT_ROW(MF_FLOAT8_E5M2FNUZ,    "float8_e5m2fnuz",     "Float8E5M2FNUZDType",      8, 1, 5, 2,  16, MF_SPECIAL_FNUZ, 1, DL_F8_E5M2FNUZ,    '7'),
    FLOAT_ROW(MF_FLOAT8_E8M0FNU,     "float8_e8m0fnu",      "Float8E8M0FNUDType",       8, 1, 8, 0, 127, MF_SPECIAL_E8M0, 0, DL_F8_E8M0FNU,     '8'),
    FLOAT_ROW(MF_FLOAT6_E2M3FN,      "float6_e2m3fn",       "Float6E2M3FNDType",        6, 1, 2, 3,   1, MF_SPECIAL_NONE, 1, DL_F6_E2M3FN,      '9'),
    FLOAT_ROW(MF_FLOAT6_E3M2FN,      "float6_e3m2fn",       "Float6E3M2FNDType",        6, 1, 3, 2,   3, MF_SPECIAL_NONE, 1, DL_F6_E3M2FN,      '0'),
    FLOAT_ROW(MF_FLOAT4_E2M1FN,      "float4_e2m1fn",       "Float4E2M1FNDType",        4, 1, 2, 1,   1, MF_SPECIAL_NONE, 1, DL_F4_E2M1FN,      'j'),
    INT_ROW(MF_INT4,  "int4",  "Int4DType",  MF_KIND_SINT, 4, DL_INT,  'k'),
    INT_ROW(MF_UINT4, "uint4", "UInt4DType", MF_KIND_UINT, 4, DL_UINT, 'K'),
    INT_ROW(MF_INT2,  "int2",  "Int2DType",  MF_KIND_SINT, 2, DL_INT,  'w'),
    INT_ROW(MF_UINT2, "uint2", "UInt2DType", MF_KIND_UINT, 2, DL_UINT, 'W'),
    INT_ROW(MF_INT1,  "int1",  "Int1DType",  MF_KIND_SINT, 1, DL_INT,  'x'),
    INT_ROW(MF_UINT1, "uint1", "UInt1DType", MF_KIND_UINT, 1, DL_UINT, 'X'),
    /* NumPy's own IEEE formats, for the codec only */
    FLOAT_ROW(MF_IEEE_FLOAT16,       "float16",             NULL,                      16, 2, 5, 10, 15, MF_SPECIAL_IEEE, 1, DL_FLOAT,          'e'),
    FLOAT_ROW(MF_IEEE_FLOAT32,       "float32",             NULL,                      32, 4, 8, 23, 127, MF_SPECIAL_IEEE, 1, DL_FLOAT,         'f'),
};
