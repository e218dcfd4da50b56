"""Where two threads start to pay: bf16 add into out, f32->bf16 copyto and bf16 sum at
16 KiB..8 MiB, 1 vs 2 threads.  Run it against a build with the thresholds lowered:
    CFLAGS="-DMF_PAR_MIN_BYTES=16384 -DMF_PAR_THREAD_BYTES=8192" pip install --no-build-isolation .
(docs/design.md, "The thresholds")."""
import numpy as np, time, minifloat as mf, sys
def best(f, r):
    b = 1e9
    for _ in range(r):
        s = time.perf_counter(); f(); b = min(b, time.perf_counter() - s)
    return b
print("bytes(out) | add 1t us | add 2t us | ratio | cast 1t | cast 2t | ratio | sum 1t | sum 2t | ratio")
for kb in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192):
    n = kb * 1024 // 2
    a = np.random.default_rng(0).standard_normal(n).astype(mf.bfloat16); b = a[::-1].copy(); o = np.empty_like(a)
    x = a.astype(np.float32)
    r = max(20, 20000 // kb)
    row = []
    for fn in (lambda: np.add(a, b, out=o), lambda: np.copyto(o, x, casting="unsafe"), lambda: np.sum(a)):
        t = {}
        for th in (1, 2, 1, 2):
            mf.set_num_threads(th); t[th] = min(t.get(th, 1e9), best(fn, r))
        row += [t[1]*1e6, t[2]*1e6, t[1]/t[2]]
    print(f"{kb:5d} KiB | " + " | ".join(f"{v:.1f}" if i % 3 != 2 else f"{v:.2f}x" for i, v in enumerate(row)), flush=True)
