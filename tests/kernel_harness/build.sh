#!/usr/bin/env bash
# Build the C kernel harness (harness.c) with every kernel level of the
# target architecture.  The source lists and each level's compiler flags are
# meson.build's (its `kernel_harness` option builds the kernels and this
# harness without Python or NumPy), so they are written in one place.
#   build.sh OUT [CC]       CC defaults to cc; a cross compiler such as
#                           aarch64-linux-gnu-gcc cross-compiles (static,
#                           for qemu-aarch64)
# Needs meson and ninja; where they are not on PATH they are installed into a
# throwaway virtual environment first.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$1"
cc="${2:-cc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! command -v meson >/dev/null || ! command -v ninja >/dev/null; then
    python3 -m venv "$tmp/tools"
    "$tmp/tools/bin/pip" install -q meson ninja
    PATH="$tmp/tools/bin:$PATH"
fi

args=(-Dkernel_harness=true)
host="$("$cc" -dumpmachine)"
build="$(cc -dumpmachine 2>/dev/null || echo unknown)"
if [ "${host%%-*}" != "${build%%-*}" ]; then
    prefix="${cc%gcc}"            # aarch64-linux-gnu-gcc -> aarch64-linux-gnu-
    cpu="${host%%-*}"
    cat > "$tmp/cross.ini" <<INI
[binaries]
c = '$cc'
ar = '${prefix}ar'
strip = '${prefix}strip'

[host_machine]
system = 'linux'
cpu_family = '$cpu'
cpu = '$cpu'
endian = 'little'
INI
    args+=(--cross-file "$tmp/cross.ini")
else
    export CC="$cc"
fi
meson setup "$tmp/build" "$root" "${args[@]}" >"$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log"; exit 1; }
ninja -C "$tmp/build" kernel_harness >"$tmp/ninja.log" 2>&1 || { cat "$tmp/ninja.log"; exit 1; }
cp "$tmp/build/kernel_harness" "$out"
