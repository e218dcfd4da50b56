#!/usr/bin/env bash
# Build the C kernel harness (harness.c) with every kernel level of the
# target architecture, each ISA file with its own flags, as meson.build does.
#   build.sh OUT [CC]       CC defaults to cc; aarch64-linux-gnu-gcc
#                           cross-compiles (static, for qemu-aarch64)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../src"
out="$1"
cc="${2:-cc}"
arch="$("$cc" -dumpmachine)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
common=(-O3 -std=gnu11 -ffp-contract=off -fno-strict-aliasing -I"$src" -Wall -Wno-unused-function)
objs=()
defs=()
compile() {   # file flags...
    local f="$1"; shift
    local o="$tmp/${f//\//_}.o"   # kernels/gemm/avx2.c and kernels/stream/avx2.c both exist
    "$cc" "${common[@]}" "$@" -c "$src/$f" -o "$o"
    objs+=("$o")
}
case "$arch" in
    aarch64*)
        defs=(-DMF_HAVE_NEON=1 -DMF_HAVE_NEON_BF16=1)
        compile kernels/stream/neon.c -march=armv8-a
        compile kernels/gemm/neon.c -march=armv8-a
        compile kernels/stats/neon.c -march=armv8-a
        compile kernels/stream/neon_bf16.c -march=armv8.2-a+bf16
        compile kernels/gemm/neon_bf16.c -march=armv8.2-a+bf16
        static=(-static)
        ;;
    x86_64*)
        defs=(-DMF_HAVE_AVX2=1 -DMF_HAVE_AVX512=1 -DMF_HAVE_AVX512BF16=1)
        avx2=(-mavx2 -mfma -mf16c)
        avx512=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd -mfma -mf16c)
        compile kernels/stream/avx2.c "${avx2[@]}"
        compile kernels/gemm/avx2.c "${avx2[@]}"
        compile kernels/stats/avx2.c "${avx2[@]}"
        compile kernels/blocks/avx2.c "${avx2[@]}"
        compile kernels/stream/avx512.c "${avx512[@]}"
        compile kernels/gemm/avx512.c "${avx512[@]}"
        compile kernels/stream/avx512bf16.c "${avx512[@]}" -mavx512bf16
        compile kernels/gemm/avx512bf16.c "${avx512[@]}" -mavx512bf16
        static=()
        ;;
    *)
        static=()
        ;;
esac
for f in format_table.c kernels/stream/serial.c kernels/stats/common.c kernels/gemm/serial.c kernels/blocks/serial.c \
         kernels/parallel.c; do
    compile "$f"
done
if [ ${#defs[@]} -gt 0 ]; then
    compile kernels/gemm/driver.c      # the SIMD levels' GEMM driver
fi
compile kernels/dispatch.c "${defs[@]}"
"$cc" "${common[@]}" "${defs[@]}" "$here/harness.c" "${objs[@]}" -o "$out" "${static[@]}" -lm -lpthread
