"""Instructions per element of each kernel at each aarch64 level, counted
under qemu-user (no TCG plugins in Debian's static qemu): run the harness's
--count mode with `-d in_asm,exec,nochain`, add up the guest instructions of
every executed translation block, and take the difference between running
the kernel twice and once on the same N elements (N^3 multiply-adds for
gemm), so start-up and set-up cancel; the per-call overhead is included.  Usage:

    python insn_counts.py HARNESS_ARM [FORMAT ...]

HARNESS_ARM is the cross-compiled harness (build.sh OUT aarch64-linux-gnu-gcc).
Emulated CPU: max,sve=off (NEON + BF16); one thread.
"""
import os
import re
import subprocess
import sys
import tempfile

TRACE = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
INSN = re.compile(r"^0x([0-9a-f]+):\s+[0-9a-f]{8}\s")


def count(harness, level, kernel, fmt, n, reps):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "q.log")
        env = dict(os.environ, QEMU_CPU="max,sve=off", MINIFLOAT_NUM_THREADS="1",
                   MF_COUNT_REPS=str(reps))
        subprocess.run(["qemu-aarch64-static", "-d", "in_asm,exec,nochain", "-D", log,
                        harness, "--count", level, kernel, fmt, str(n)], env=env, check=True)
        sizes = {}
        total = 0
        cur = None
        with open(log, errors="replace") as fh:
            for line in fh:
                if line.startswith("IN:"):
                    cur = None
                    continue
                m = INSN.match(line)
                if m:
                    pc = int(m.group(1), 16)
                    if cur is None:
                        cur = pc
                        sizes[cur] = 0
                    sizes[cur] += 1
                    continue
                if line.strip() == "":
                    cur = None
                    continue
                m = TRACE.match(line)
                if m:
                    total += sizes.get(int(m.group(1), 16), 0)
        return total


KERNELS = [("decode", 4096), ("encode", 4096), ("add", 4096), ("mul", 4096),
           ("sum", 4096), ("dot", 4096), ("gemm", 64), ("stats", 4096), ("cast_err", 4096)]
FORMATS = ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"]
LEVELS = ["serial", "neon", "neon_bf16"]


def main():
    harness = sys.argv[1]
    rows = []
    for fmt in sys.argv[2:] or FORMATS:
        for kern, n in KERNELS:
            vals = []
            for lv in LEVELS:
                c1 = count(harness, lv, kern, fmt, n, 1)
                c2 = count(harness, lv, kern, fmt, n, 2)
                per = (c2 - c1) / (n ** 3 if kern == "gemm" else n)
                vals.append(per)
            rows.append((fmt, kern, vals))
            print(f"| {fmt} | {kern} | " + " | ".join(f"{v:.2f}" for v in vals)
                  + f" | {vals[0] / vals[1]:.1f}x | {vals[0] / vals[2]:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
