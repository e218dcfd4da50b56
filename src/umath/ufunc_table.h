/*
 * The ufuncs minifloat implements for every float format: one row per loop.
 * Included once, by ufuncs.c, which registers the rows with NumPy.
 */
#include "umath.h"

const mf_ufunc_def mf_ufunc_defs[] = {
    /* ufunc, our signature, NumPy float32 loop, kind, op, reorderable, keeps partials, identity */
    {"add", "MM->M", "ff->f", MF_LOOP_ARITH, MF_OP_ADD, 1, 1, 1},
    {"subtract", "MM->M", "ff->f", MF_LOOP_ARITH, MF_OP_SUB, 0, 0, 0},
    {"multiply", "MM->M", "ff->f", MF_LOOP_ARITH, MF_OP_MUL, 1, 1, 2},
    {"divide", "MM->M", "ff->f", MF_LOOP_ARITH, MF_OP_DIV, 0, 0, 0},
    {"power", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"remainder", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"fmod", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"floor_divide", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"copysign", "MM->M", "ff->f", MF_LOOP_SIGN, MF_SIGN_COPYSIGN, 0, 0, 0},
    {"hypot", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arctan2", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"logaddexp", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"logaddexp2", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"heaviside", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"maximum", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 1, 0, 0},
    {"minimum", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 1, 0, 0},
    {"fmax", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 1, 0, 0},
    {"fmin", "MM->M", "ff->f", MF_LOOP_VIA_F32, 0, 1, 0, 0},
    {"divmod", "MM->MM", "ff->ff", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"equal", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"not_equal", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"less", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"less_equal", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"greater", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"greater_equal", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"logical_and", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"logical_or", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"logical_xor", "MM->?", "ff->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"negative", "M->M", "f->f", MF_LOOP_SIGN, MF_SIGN_NEGATE, 0, 0, 0},
    {"positive", "M->M", "f->f", MF_LOOP_SIGN, MF_SIGN_COPY, 0, 0, 0},
    {"absolute", "M->M", "f->f", MF_LOOP_SIGN, MF_SIGN_ABS, 0, 0, 0},
    {"fabs", "M->M", "f->f", MF_LOOP_SIGN, MF_SIGN_ABS, 0, 0, 0},
    {"sign", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"sqrt", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"cbrt", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"square", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"reciprocal", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"exp", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"exp2", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"expm1", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"log", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"log2", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"log10", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"log1p", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"sin", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"cos", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"tan", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arcsin", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arccos", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arctan", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"sinh", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"cosh", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"tanh", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arcsinh", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arccosh", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"arctanh", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"deg2rad", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"rad2deg", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"degrees", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"radians", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"floor", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"ceil", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"trunc", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"rint", "M->M", "f->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"conjugate", "M->M", "f->f", MF_LOOP_SIGN, MF_SIGN_COPY, 0, 0, 0},
    {"isnan", "M->?", "f->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"isinf", "M->?", "f->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"isfinite", "M->?", "f->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"signbit", "M->?", "f->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"logical_not", "M->?", "f->?", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"modf", "M->MM", "f->ff", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"frexp", "M->Mi", "f->fi", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"ldexp", "Mi->M", "fi->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"ldexp", "Ml->M", "fl->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"clip", "MMM->M", "fff->f", MF_LOOP_VIA_F32, 0, 0, 0, 0},
    {"nextafter", "MM->M", NULL, MF_LOOP_NEXTAFTER, 0, 0, 0, 0},
    {"spacing", "M->M", NULL, MF_LOOP_SPACING, 0, 0, 0, 0},
    /* a float format against float64 (a Python float or int is given float64 by
     * the promoter: comparisons compare values, ufuncs.c) */
    {"equal", "Md->?", NULL, MF_LOOP_CMP64, MF_CMP_EQ, 0, 0, 0},
    {"equal", "dM->?", NULL, MF_LOOP_CMP64, MF_CMP_EQ, 0, 0, 0},
    {"not_equal", "Md->?", NULL, MF_LOOP_CMP64, MF_CMP_NE, 0, 0, 0},
    {"not_equal", "dM->?", NULL, MF_LOOP_CMP64, MF_CMP_NE, 0, 0, 0},
    {"less", "Md->?", NULL, MF_LOOP_CMP64, MF_CMP_LT, 0, 0, 0},
    {"less", "dM->?", NULL, MF_LOOP_CMP64, MF_CMP_LT, 0, 0, 0},
    {"less_equal", "Md->?", NULL, MF_LOOP_CMP64, MF_CMP_LE, 0, 0, 0},
    {"less_equal", "dM->?", NULL, MF_LOOP_CMP64, MF_CMP_LE, 0, 0, 0},
    {"greater", "Md->?", NULL, MF_LOOP_CMP64, MF_CMP_GT, 0, 0, 0},
    {"greater", "dM->?", NULL, MF_LOOP_CMP64, MF_CMP_GT, 0, 0, 0},
    {"greater_equal", "Md->?", NULL, MF_LOOP_CMP64, MF_CMP_GE, 0, 0, 0},
    {"greater_equal", "dM->?", NULL, MF_LOOP_CMP64, MF_CMP_GE, 0, 0, 0},
    /* integer formats (int4, uint2, ...): NumPy's int32 loops, results wrap */
    {"add", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 1},
    {"subtract", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"multiply", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 2},
    {"floor_divide", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"remainder", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"fmod", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"bitwise_and", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"bitwise_or", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"bitwise_xor", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"left_shift", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"right_shift", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"gcd", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"lcm", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"power", "MM->M", "ii->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"maximum", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"minimum", "MM->M", "ii->i", MF_LOOP_INT, 0, 1, 0, 0},
    {"divmod", "MM->MM", "ii->ii", MF_LOOP_INT, 0, 0, 0, 0},
    {"equal", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"not_equal", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"less", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"less_equal", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"greater", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"greater_equal", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"logical_and", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"logical_or", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"logical_xor", "MM->?", "ii->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"negative", "M->M", "i->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"positive", "M->M", "i->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"absolute", "M->M", "i->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"sign", "M->M", "i->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"square", "M->M", "i->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"invert", "M->M", "i->i", MF_LOOP_INT, 0, 0, 0, 0},
    {"logical_not", "M->?", "i->?", MF_LOOP_INT, 0, 0, 0, 0},
    {"clip", "MMM->M", "iii->i", MF_LOOP_INT, 0, 0, 0, 0},
};
const int mf_num_ufunc_defs = 123;

/* one get_loop / get_reduction_initial per table row */
#define MF_GL(i)                                                                            \
    static int get_loop_##i(PyArrayMethod_Context *c, int a, int m, const npy_intp *s,      \
                            PyArrayMethod_StridedLoop **l, NpyAuxData **d,                 \
                            NPY_ARRAYMETHOD_FLAGS *f)                                      \
    { return mf_generic_get_loop(i, c, a, m, s, l, d, f); }                                 \
    static int red_init_##i(PyArrayMethod_Context *c, npy_bool e, void *init)              \
    { return mf_get_reduction_initial(i, c, e, init); }
MF_GL(0)
MF_GL(1)
MF_GL(2)
MF_GL(3)
MF_GL(4)
MF_GL(5)
MF_GL(6)
MF_GL(7)
MF_GL(8)
MF_GL(9)
MF_GL(10)
MF_GL(11)
MF_GL(12)
MF_GL(13)
MF_GL(14)
MF_GL(15)
MF_GL(16)
MF_GL(17)
MF_GL(18)
MF_GL(19)
MF_GL(20)
MF_GL(21)
MF_GL(22)
MF_GL(23)
MF_GL(24)
MF_GL(25)
MF_GL(26)
MF_GL(27)
MF_GL(28)
MF_GL(29)
MF_GL(30)
MF_GL(31)
MF_GL(32)
MF_GL(33)
MF_GL(34)
MF_GL(35)
MF_GL(36)
MF_GL(37)
MF_GL(38)
MF_GL(39)
MF_GL(40)
MF_GL(41)
MF_GL(42)
MF_GL(43)
MF_GL(44)
MF_GL(45)
MF_GL(46)
MF_GL(47)
MF_GL(48)
MF_GL(49)
MF_GL(50)
MF_GL(51)
MF_GL(52)
MF_GL(53)
MF_GL(54)
MF_GL(55)
MF_GL(56)
MF_GL(57)
MF_GL(58)
MF_GL(59)
MF_GL(60)
MF_GL(61)
MF_GL(62)
MF_GL(63)
MF_GL(64)
MF_GL(65)
MF_GL(66)
MF_GL(67)
MF_GL(68)
MF_GL(69)
MF_GL(70)
MF_GL(71)
MF_GL(72)
MF_GL(73)
MF_GL(74)
MF_GL(75)
MF_GL(76)
MF_GL(77)
MF_GL(78)
MF_GL(79)
MF_GL(80)
MF_GL(81)
MF_GL(82)
MF_GL(83)
MF_GL(84)
MF_GL(85)
MF_GL(86)
MF_GL(87)
MF_GL(88)
MF_GL(89)
MF_GL(90)
MF_GL(91)
MF_GL(92)
MF_GL(93)
MF_GL(94)
MF_GL(95)
MF_GL(96)
MF_GL(97)
MF_GL(98)
MF_GL(99)
MF_GL(100)
MF_GL(101)
MF_GL(102)
MF_GL(103)
MF_GL(104)
MF_GL(105)
MF_GL(106)
MF_GL(107)
MF_GL(108)
MF_GL(109)
MF_GL(110)
MF_GL(111)
MF_GL(112)
MF_GL(113)
MF_GL(114)
MF_GL(115)
MF_GL(116)
MF_GL(117)
MF_GL(118)
MF_GL(119)
MF_GL(120)
MF_GL(121)
MF_GL(122)

static PyArrayMethod_GetLoop *get_loops[] = {get_loop_0, get_loop_1, get_loop_2, get_loop_3, get_loop_4, get_loop_5, get_loop_6, get_loop_7, get_loop_8, get_loop_9, get_loop_10, get_loop_11, get_loop_12, get_loop_13, get_loop_14, get_loop_15, get_loop_16, get_loop_17, get_loop_18, get_loop_19, get_loop_20, get_loop_21, get_loop_22, get_loop_23, get_loop_24, get_loop_25, get_loop_26, get_loop_27, get_loop_28, get_loop_29, get_loop_30, get_loop_31, get_loop_32, get_loop_33, get_loop_34, get_loop_35, get_loop_36, get_loop_37, get_loop_38, get_loop_39, get_loop_40, get_loop_41, get_loop_42, get_loop_43, get_loop_44, get_loop_45, get_loop_46, get_loop_47, get_loop_48, get_loop_49, get_loop_50, get_loop_51, get_loop_52, get_loop_53, get_loop_54, get_loop_55, get_loop_56, get_loop_57, get_loop_58, get_loop_59, get_loop_60, get_loop_61, get_loop_62, get_loop_63, get_loop_64, get_loop_65, get_loop_66, get_loop_67, get_loop_68, get_loop_69, get_loop_70, get_loop_71, get_loop_72, get_loop_73, get_loop_74, get_loop_75, get_loop_76, get_loop_77, get_loop_78, get_loop_79, get_loop_80, get_loop_81, get_loop_82, get_loop_83, get_loop_84, get_loop_85, get_loop_86, get_loop_87, get_loop_88, get_loop_89, get_loop_90, get_loop_91, get_loop_92, get_loop_93, get_loop_94, get_loop_95, get_loop_96, get_loop_97, get_loop_98, get_loop_99, get_loop_100, get_loop_101, get_loop_102, get_loop_103, get_loop_104, get_loop_105, get_loop_106, get_loop_107, get_loop_108, get_loop_109, get_loop_110, get_loop_111, get_loop_112, get_loop_113, get_loop_114, get_loop_115, get_loop_116, get_loop_117, get_loop_118, get_loop_119, get_loop_120, get_loop_121, get_loop_122};
static PyArrayMethod_GetReductionInitial *red_inits[] = {red_init_0, red_init_1, red_init_2, red_init_3, red_init_4, red_init_5, red_init_6, red_init_7, red_init_8, red_init_9, red_init_10, red_init_11, red_init_12, red_init_13, red_init_14, red_init_15, red_init_16, red_init_17, red_init_18, red_init_19, red_init_20, red_init_21, red_init_22, red_init_23, red_init_24, red_init_25, red_init_26, red_init_27, red_init_28, red_init_29, red_init_30, red_init_31, red_init_32, red_init_33, red_init_34, red_init_35, red_init_36, red_init_37, red_init_38, red_init_39, red_init_40, red_init_41, red_init_42, red_init_43, red_init_44, red_init_45, red_init_46, red_init_47, red_init_48, red_init_49, red_init_50, red_init_51, red_init_52, red_init_53, red_init_54, red_init_55, red_init_56, red_init_57, red_init_58, red_init_59, red_init_60, red_init_61, red_init_62, red_init_63, red_init_64, red_init_65, red_init_66, red_init_67, red_init_68, red_init_69, red_init_70, red_init_71, red_init_72, red_init_73, red_init_74, red_init_75, red_init_76, red_init_77, red_init_78, red_init_79, red_init_80, red_init_81, red_init_82, red_init_83, red_init_84, red_init_85, red_init_86, red_init_87, red_init_88, red_init_89, red_init_90, red_init_91, red_init_92, red_init_93, red_init_94, red_init_95, red_init_96, red_init_97, red_init_98, red_init_99, red_init_100, red_init_101, red_init_102, red_init_103, red_init_104, red_init_105, red_init_106, red_init_107, red_init_108, red_init_109, red_init_110, red_init_111, red_init_112, red_init_113, red_init_114, red_init_115, red_init_116, red_init_117, red_init_118, red_init_119, red_init_120, red_init_121, red_init_122};
