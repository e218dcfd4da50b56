"""The peak memory of `minifloat convert` on the model hubs' quantized
layouts: it streams, so the peak must not grow with the checkpoint
(docs/benchmarks.md, "Checkpoint layouts: speed and memory").

    python benchmarks/mem_layouts.py [--gib 4] [--twice [CASE ...]]
                                     [--layouts CASE ...] [--dir D]

For each case (the dequantizing layouts fp8-block, gpt-oss-mxfp4,
ct-nvfp4, ct-int4, modelopt-nvfp4 -> bf16, and bf16 -> deepseek-fp8,
modelopt-nvfp4: benchmarks/bench_layouts.py builds the synthetic model
folders) a checkpoint of about --gib GiB of stored bytes is written, then
`python -m minifloat convert IN OUT --to T` runs in a subprocess while this
process reads RssAnon in /proc/PID/status every 10 ms: the anonymous
memory (heap, arrays) -- the input's mapping is file-backed and does not
count, nor do the output's pages in the page cache.  --twice also runs the
named cases (default: fp8-block gpt-oss-mxfp4) at twice --gib, to show the
peak does not grow with the size.  Each checkpoint and output is deleted
after use.  Exits 1 when a peak reaches --limit MiB (default 512).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import bench_layouts as bl

MIB = 1 << 20
CASES = ["fp8-block", "gpt-oss-mxfp4", "ct-nvfp4", "ct-int4", "modelopt-nvfp4",
         "to-deepseek-fp8", "to-modelopt-nvfp4"]


def _rss_anon(pid):
    """RssAnon of process `pid` in bytes (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def sampled(cmd, cwd, period=0.01):
    """Run `cmd`, sampling its RssAnon every `period` s: (peak bytes,
    seconds, return code, stderr's tail)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    peak = 0
    with tempfile.TemporaryFile("w+") as err:
        # stderr is drained by a thread so a chatty child never blocks
        import threading
        th = threading.Thread(target=lambda: shutil.copyfileobj(p.stderr, err), daemon=True)
        th.start()
        while p.poll() is None:
            r = _rss_anon(p.pid)
            if r is not None:
                peak = max(peak, r)
            time.sleep(period)
        th.join()
        err.seek(0)
        tail = err.read()[-2000:]
    return peak, time.perf_counter() - t0, p.returncode, tail


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--twice", nargs="*", metavar="CASE",
                    help="also run these cases (none named: fp8-block gpt-oss-mxfp4) at "
                         "2 x --gib")
    ap.add_argument("--layouts", nargs="+", default=CASES, choices=list(bl.CASES),
                    metavar="CASE", help=" ".join(CASES))
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--limit", type=float, default=512, help="MiB (default 512)")
    args = ap.parse_args(argv)
    runs = [(c, args.gib) for c in args.layouts]
    if args.twice is not None:
        runs += [(c, 2 * args.gib) for c in (args.twice or ["fp8-block", "gpt-oss-mxfp4"])]

    base = tempfile.mkdtemp(prefix="minifloat-mem-layouts.", dir=args.dir)
    print(f"# CPU: {bl.cpu_name()}, {bl.ncpu()} CPUs; {time.strftime('%Y-%m-%d %H:%M')}; "
          f"RssAnon of `minifloat convert` sampled every 10 ms")
    rows = []
    try:
        # what the interpreter and the modules convert imports take, converting nothing
        peak, secs, rc, _ = sampled(
            [sys.executable, "-c", "import minifloat.cli, minifloat.io.checkpoint, "
             "minifloat.io.layouts, minifloat.io.requantize, minifloat.io.packed_int, time; "
             "time.sleep(0.5)"], base)
        print(f"imports alone: {peak / MIB:.0f} MiB", flush=True)
        rows.append(("(imports alone)", "", 0, 0, peak, secs, rc))
        for case, gib in runs:
            src, out = os.path.join(base, "in"), os.path.join(base, "out")
            shutil.rmtree(src, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            m = bl.build(case, src, gib)
            built = time.perf_counter() - t0
            to = bl.CASES[case]["to"]
            peak, secs, rc, tail = sampled(
                [sys.executable, "-m", "minifloat", "convert", src, out, "--to", to], base)
            shapes = sorted({tuple(w[1]) for w in m["weights"]})
            print(f"{case:<18} {m['in_bytes'] / bl.GIB:6.2f} GiB in -> "
                  f"{m['out_bytes'] / bl.GIB:6.2f} GiB out: peak RssAnon "
                  f"{peak / MIB:7.1f} MiB, {secs:6.1f} s (built in {built:.0f} s; "
                  f"{len(m['weights'])} weights {shapes}, {len(m['shards'])} shards)"
                  + ("" if rc == 0 else f"  FAILED rc {rc}: {tail}"), flush=True)
            rows.append((case, to, m["in_bytes"], m["out_bytes"], peak, secs, rc))
            shutil.rmtree(src, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print("| case | to | input GiB | output GiB | peak RssAnon MiB | seconds |")
    print("|---|---|---|---|---|---|")
    for case, to, ib, ob, peak, secs, rc in rows:
        print(f"| {case} | {to} | {ib / bl.GIB:.2f} | {ob / bl.GIB:.2f} | "
              f"{peak / MIB:.0f}{'' if rc == 0 else ' (failed)'} | {secs:.1f} |")
    bad = [r for r in rows if r[4] >= args.limit * MIB or r[6] != 0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
