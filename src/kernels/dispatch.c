/*
 * Run-time choice of the kernel level from the CPU's features.
 */
#include <string.h>
#include "kernels.h"
#include "blocks/blocks.h"
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

const mf_kernels *mf_k = &mf_kernels_serial;
const mf_block_ops *mf_kb = &mf_block_ops_serial;
mf_level mf_active_level = MF_LEVEL_SERIAL;

static const char *level_names[MF_NUM_LEVELS] = {"serial", "avx2", "avx512", "avx512bf16",
                                                    "neon", "neon_bf16"};

const char *
mf_level_name(mf_level level)
{
    return (level >= 0 && level < MF_NUM_LEVELS) ? level_names[level] : "unknown";
}

int
mf_level_from_name(const char *name)
{
    for (int i = 0; i < MF_NUM_LEVELS; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

static const mf_kernels *
level_table(mf_level level)
{
    switch (level) {
        case MF_LEVEL_SERIAL: return &mf_kernels_serial;
#ifdef MF_HAVE_AVX2
        case MF_LEVEL_AVX2: return &mf_kernels_avx2;
#endif
#ifdef MF_HAVE_AVX512
        case MF_LEVEL_AVX512: return &mf_kernels_avx512;
#endif
#ifdef MF_HAVE_AVX512BF16
        case MF_LEVEL_AVX512BF16: return &mf_kernels_avx512bf16;
#endif
#ifdef MF_HAVE_NEON
        case MF_LEVEL_NEON: return &mf_kernels_neon;
#endif
#ifdef MF_HAVE_NEON_BF16
        case MF_LEVEL_NEON_BF16: return &mf_kernels_neon_bf16;
#endif
        default: return NULL;
    }
}

/* the block-scaled kernels' inner loops exist as serial and AVX2 code: the
 * AVX-512 levels run the AVX2 loops built with their flags (blocks/avx512.c:
 * the round trip sixteen lanes wide), the NEON levels the serial ones */
static const mf_block_ops *
level_block_ops(mf_level level)
{
    switch (level) {
#ifdef MF_HAVE_AVX512
        case MF_LEVEL_AVX512:
        case MF_LEVEL_AVX512BF16:
            return &mf_block_ops_avx512;
#endif
#ifdef MF_HAVE_AVX2
        case MF_LEVEL_AVX2:
#ifndef MF_HAVE_AVX512
        case MF_LEVEL_AVX512:
        case MF_LEVEL_AVX512BF16:
#endif
            return &mf_block_ops_avx2;
#endif
        default: return &mf_block_ops_serial;
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
/* F16C from CPUID leaf 1 (ECX bit 29): clang before 15 has no
 * __builtin_cpu_supports("f16c") (the fuzzing build uses Debian 12's clang 14) */
static int
cpu_has_f16c(void)
{
    unsigned int a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

#if defined(__aarch64__)
/* FEAT_BF16 (BFCVT, BFCVTN, BFDOT, BFMMLA, BFMLALB/T) as the OS reports it */
static int
arm_has_bf16(void)
{
#if defined(__linux__)
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif
    return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#elif defined(__APPLE__)
    int v = 0;
    size_t len = sizeof(v);
    if (sysctlbyname("hw.optional.arm.FEAT_BF16", &v, &len, NULL, 0) != 0) {
        return 0;
    }
    return v != 0;
#else
    return 0;
#endif
}
#endif

static int
cpu_has(mf_level level)
{
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    switch (level) {
        case MF_LEVEL_SERIAL:
            return 1;
        case MF_LEVEL_AVX2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                   && cpu_has_f16c();
        case MF_LEVEL_AVX512:
            return cpu_has(MF_LEVEL_AVX2) && __builtin_cpu_supports("avx512f")
                   && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
                   && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd");
        case MF_LEVEL_AVX512BF16:
            return cpu_has(MF_LEVEL_AVX512) && __builtin_cpu_supports("avx512bf16");
        default:
            return 0;
    }
#elif defined(__aarch64__)
    switch (level) {
        case MF_LEVEL_SERIAL:
        case MF_LEVEL_NEON:
            return 1;      /* Advanced SIMD and FP are part of every aarch64 CPU */
        case MF_LEVEL_NEON_BF16:
            return arm_has_bf16();
        default:
            return 0;
    }
#else
    return level == MF_LEVEL_SERIAL;
#endif
}

int
mf_level_supported(mf_level level)
{
    return level_table(level) != NULL && cpu_has(level);
}

mf_level
mf_best_level(void)
{
    for (int level = MF_NUM_LEVELS - 1; level > 0; level--) {
        if (mf_level_supported((mf_level)level)) {
            return (mf_level)level;
        }
    }
    return MF_LEVEL_SERIAL;
}

mf_intp mf_read_prefetch = 0;

/*
 * Software prefetch of the runs sum and dot read, this many bytes ahead.
 * On an AMD Zen 5 (family 1Ah) one thread summing 32 MiB of bfloat16 from
 * memory read 42 GB/s on the hardware prefetchers alone and 69 GB/s with a
 * prefetch 16 KiB ahead (4 KiB: 55, 64 KiB: 62); copies, which also write,
 * gained nothing.  Other CPUs keep the hardware's alone until measured
 * (MINIFLOAT_READ_PREFETCH sets it for that).
 */
mf_intp
mf_default_read_prefetch(void)
{
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    unsigned int a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u
            && c == 0x444d4163u && __get_cpuid(1, &a, &b, &c, &d)) {
        /* "AuthenticAMD"; the family: base + extended where base is 0Fh */
        unsigned int family = (a >> 8) & 0xF;
        if (family == 0xF) {
            family += (a >> 20) & 0xFF;
        }
        if (family >= 0x1A) {
            return 16384;
        }
    }
#endif
    return 0;
}

int
mf_set_level(mf_level level)
{
    if (!mf_level_supported(level)) {
        return -1;
    }
    mf_k = level_table(level);
    mf_kb = level_block_ops(level);
    mf_active_level = level;
    return 0;
}
