"""Top-k cosine search over a bfloat16 embedding table bigger than a worker's memory.

The table lives in a zarr v3 store (data type "bfloat16", one chunk per block
of rows); dask on a local cluster of worker processes writes it, normalises
its rows (float32 arithmetic, rounded once to bfloat16) into a second store,
and searches it: scores = table @ query in float32, then ``da.argtopk``.  No
step holds more than a few row blocks per worker.

    python examples/embedding_search.py                       # 1 GiB table, 2 workers of 384 MiB
    python examples/embedding_search.py --rows 100000 --dim 64 --memory-limit 256MiB

It prints the sizes, each step's time and throughput, and each worker's peak
resident memory (docs/zarr-dask.md has the numbers of a run).
"""
import argparse
import json
import os
import resource
import sys
import tempfile
import time

import dask.array as da
import numpy as np
import zarr
from distributed import Client, LocalCluster

import minifloat as mf


def _normalise_block(block):
    x = block.astype(np.float32)
    norm = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
    return (x / np.maximum(norm, np.float32(1e-30))).astype(mf.bfloat16)


def _peak_rss_mib():
    # ru_maxrss: KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_table(path, rows, dim, chunk_rows, seed=0):
    """A random bfloat16 table, written block by block (never whole in memory)."""
    rs = da.random.default_rng(seed)
    table = rs.standard_normal((rows, dim), chunks=(chunk_rows, dim), dtype=np.float32)
    table = table.astype(mf.bfloat16)
    z = zarr.create_array(path, shape=table.shape, chunks=(chunk_rows, dim), dtype=mf.bfloat16,
                          overwrite=True)
    # each dask block is one zarr chunk: store them as they are (da.to_zarr into
    # an existing zarr array would first merge blocks up to dask's
    # array.chunk-size, 128 MiB, more than this example lets a worker hold)
    da.store(table, z, lock=False)
    return z


def normalise(src, dst):
    """Rows scaled to unit length (float32 arithmetic, one rounding), to a new store."""
    x = da.from_zarr(src)
    z = zarr.create_array(dst, shape=x.shape, chunks=x.chunksize, dtype=mf.bfloat16,
                          overwrite=True)
    da.store(x.map_blocks(_normalise_block, dtype=mf.bfloat16), z, lock=False)
    return z


def search(path, query, k):
    """The k rows of the (normalised) table most similar to `query`: (rows, scores)."""
    x = da.from_zarr(path)
    q = np.asarray(query, dtype=np.float32)
    q = q / np.linalg.norm(q)
    scores = x.astype(np.float32) @ q            # float32 scores, one block at a time
    top = da.argtopk(scores, k)
    idx = top.compute()
    return idx, scores[idx].compute()


def run(rows, dim, chunk_rows, k, client, workdir, seed=0):
    table_path = os.path.join(workdir, "table.zarr")
    unit_path = os.path.join(workdir, "unit.zarr")
    nbytes = rows * dim * 2
    out = {"rows": rows, "dim": dim, "chunk_rows": chunk_rows, "k": k,
           "table_mib": nbytes / 2**20,
           "workers": len(client.scheduler_info()["workers"]),
           "worker_memory_limit_mib": [w["memory_limit"] / 2**20
                                       for w in client.scheduler_info()["workers"].values()]}
    t0 = time.perf_counter()
    build_table(table_path, rows, dim, chunk_rows, seed)
    t1 = time.perf_counter()
    normalise(table_path, unit_path)
    t2 = time.perf_counter()
    # a query near one stored row: that row must come first
    target = rows // 3
    row = zarr.open_array(unit_path, mode="r")[target].astype(np.float32)
    noise = np.random.default_rng(seed + 1).standard_normal(dim).astype(np.float32)
    query = row + 0.05 * noise / np.linalg.norm(noise)
    idx, scores = search(unit_path, query, k)
    t3 = time.perf_counter()
    out.update({
        "target_row": target, "top_rows": [int(i) for i in idx],
        "top_scores": [float(s) for s in scores],
        "seconds": {"write": t1 - t0, "normalise": t2 - t1, "search": t3 - t2},
        "search_rows_per_s": rows / (t3 - t2),
        "search_gib_per_s": nbytes / (t3 - t2) / 2**30,
        "normalise_gib_per_s": nbytes / (t2 - t1) / 2**30,
        "worker_peak_rss_mib": sorted(client.run(_peak_rss_mib).values()),
    })
    return out


def main(argv=None, client=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1 << 21)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--chunk-rows", type=int, default=1 << 15)
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="384MiB", help="per worker")
    p.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    args = p.parse_args(argv)
    own = client is None
    if own:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               memory_limit=args.memory_limit, dashboard_address=None)
        client = Client(cluster)
    try:
        with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
            out = run(args.rows, args.dim, args.chunk_rows, args.k, client, workdir)
    finally:
        if own:
            client.close()
            cluster.close()
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
