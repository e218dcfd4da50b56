"""dask arrays of minifloat formats on a real distributed cluster (two worker
processes): elementwise work, float32-accurate reductions, matmul/einsum,
cumsum, rechunk (tasks and p2p), npy stacks, zarr, xarray, and the worked
example (examples/embedding_search.py) at a small size."""
import importlib.util
import json
import logging
import pathlib

import numpy as np
import pytest

import minifloat as mf

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr", minversion="3.1")
mfd = pytest.importorskip("minifloat.io.dask")

BF16 = np.dtype(mf.bfloat16)
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "embedding_search.py"


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def codes(a):
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(codes(a), codes(b))


def small_ints(shape, lo, hi, seed=0):
    return np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(np.float32).astype(BF16)


def test_runs_on_worker_processes(client):
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()
    a = small_ints((64, 48), -100, 100).astype(np.float32) / np.float32(7)
    a = a.astype(BF16)
    x = da.from_array(a, chunks=(16, 16))
    same((x * 2 + 1).compute(), a * 2 + 1)
    same(np.exp(x).compute(), np.exp(a))


def test_reductions_keep_float32_partials(client):
    # integers: every partial sum is exact in float32, so "round once" has one
    # answer; block sums (|s| up to 8*1000) are not all bfloat16 numbers, so
    # rounding each block's sum (what x.sum() does) can give another
    a = small_ints((8000,), -8, 8, seed=1)
    x = da.from_array(a, chunks=1000)
    exact = np.float64(a.astype(np.float64).sum())
    per_block = np.sum(np.array([np.sum(a[i:i + 1000]) for i in range(0, 8000, 1000)]))
    assert np.sum(a) == np.asarray(exact).astype(BF16)            # one machine: rounded once
    assert per_block != np.sum(a)                                 # the data tells them apart
    s = mfd.sum(x).compute()
    assert s.dtype == BF16 and codes(np.asarray(s)) == codes(np.asarray(np.sum(a)))
    m = mfd.mean(x).compute()
    assert m.dtype == BF16
    assert m == np.asarray(np.float32(exact) / np.float32(a.size)).astype(BF16)
    # var/std: float32 all the way, within one bfloat16 rounding of float64's answer
    for fn, ref in ((mfd.var, np.var), (mfd.std, np.std)):
        got = fn(x).compute()
        want = ref(a.astype(np.float64))
        assert got.dtype == BF16
        assert abs(float(got) - want) <= float(np.spacing(np.asarray(want).astype(BF16)))
    # along an axis, as np.sum on one machine
    b = small_ints((96, 40), -8, 8, seed=2)
    y = da.from_array(b, chunks=(16, 20))
    same(mfd.sum(y, axis=0).compute(), np.sum(b, axis=0))
    same(mfd.nansum(y, axis=1).compute(), np.sum(b, axis=1))
    # other dtypes pass through to dask
    assert mfd.sum(da.ones(10, chunks=5, dtype=np.int16)).compute() == 10


def test_matmul_einsum_cumsum_across_chunks(client):
    # values in [-8, 8], contraction 48: float32 is exact, bfloat16 partials are not
    a, b = small_ints((64, 48), -8, 8, seed=3), small_ints((48, 32), -8, 8, seed=4)
    x, y = da.from_array(a, chunks=(16, 16)), da.from_array(b, chunks=(16, 16))
    same(mfd.matmul(x, y).compute(), a @ b)
    same(mfd.einsum("ij,jk->ik", x, y).compute(), a @ b)
    same(mfd.einsum("ij,ij->i", x, x).compute(), np.einsum("ij,ij->i", a, a))
    # dask's own X @ Y and einsum run across chunks; with small values (every
    # block's partial exact in bfloat16) they agree with NumPy exactly
    c, d = small_ints((64, 48), -1, 1, seed=5), small_ints((48, 32), -1, 1, seed=6)
    u, v = da.from_array(c, chunks=(16, 16)), da.from_array(d, chunks=(16, 16))
    same((u @ v).compute(), c @ d)
    same(da.einsum("ij,jk->ik", u, v).compute(), c @ d)
    same(u.cumsum(axis=0).compute(), np.cumsum(c, axis=0))
    same(u.cumsum(axis=1).compute(), np.cumsum(c, axis=1))


@pytest.mark.parametrize("name", ["bfloat16", "float4_e2m1fn"])
def test_rechunk_both_methods(client, name):
    dt = np.dtype(getattr(mf, name))
    a = np.arange(64 * 48, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    if dt.itemsize == 1:
        a &= 0x0F
    a = a.view(dt).reshape(64, 48)
    x = da.from_array(a, chunks=(16, 16))
    same(x.rechunk((64, 8), method="tasks").compute(), a)
    # distributed's P2P takes memoryview(shard), which NumPy cannot give for a
    # user dtype: minifloat.dask.rechunk moves the codes
    r = mfd.rechunk(x, (64, 8), method="p2p")
    assert r.dtype == dt and r.chunks == ((64,), (8,) * 6)
    same(r.compute(), a)


def test_npy_stack(client, tmp_path):
    a = small_ints((64, 8), -100, 100)
    x = da.from_array(a, chunks=(16, 8))
    da.to_npy_stack(tmp_path / "s", x, axis=0)
    same(da.from_npy_stack(tmp_path / "s").compute(), a)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "uint4"])
def test_to_zarr_from_zarr_with_shards(client, tmp_path, name):
    dt = np.dtype(getattr(mf, name))
    bits = next(f["bits"] for f in mf._core.formats() if f["name"] == name)
    a = (np.arange(128 * 16, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
         & ((1 << bits) - 1)).view(dt).reshape(128, 16)
    x = da.from_array(a, chunks=(32, 16))
    z = zarr.create_array(tmp_path / "a.zarr", shape=a.shape, chunks=(8, 16), shards=(32, 16),
                          dtype=dt)
    da.to_zarr(x, z)                              # one dask block per shard
    back = da.from_zarr(tmp_path / "a.zarr")
    assert back.dtype == dt
    same(back.compute(), a)
    da.to_zarr(x, tmp_path / "b.zarr")            # dask creates the store
    same(da.from_zarr(tmp_path / "b.zarr").compute(), a)


def test_xarray_reductions_and_to_zarr(client, tmp_path):
    xr = pytest.importorskip("xarray")
    a = small_ints((64, 48), -1, 1, seed=7)
    arr = xr.DataArray(da.from_array(a, chunks=(16, 16)), dims=("x", "y"), name="v")
    same(arr.sum("x").compute().values, np.sum(a, axis=0))
    same(arr.mean("y").compute().values, np.mean(a, axis=1))
    assert abs(float(arr.std().compute()) - np.std(a.astype(np.float64))) < 2**-7
    # xarray's CF encoder gives float variables a NaN _FillValue and encodes it
    # by dtype.kind ('V' here): say there is none, and give zarr's fill value
    enc = {"v": {"_FillValue": None, "fill_value": np.nan}}
    arr.to_dataset().to_zarr(tmp_path / "x.zarr", mode="w", encoding=enc, consolidated=False)
    meta = json.loads((tmp_path / "x.zarr" / "v" / "zarr.json").read_text())
    assert meta["data_type"] == "bfloat16" and meta["fill_value"] == "NaN"
    back = xr.open_zarr(tmp_path / "x.zarr", consolidated=False)["v"]
    assert back.dtype == BF16
    same(back.compute().values, a)


def test_embedding_search_example(client, tmp_path):
    spec = importlib.util.spec_from_file_location("embedding_search", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    out = ex.run(rows=6000, dim=32, chunk_rows=1000, k=5, client=client, workdir=str(tmp_path))
    assert out["top_rows"][0] == out["target_row"]
    # the same search in NumPy on the whole (small) normalised table
    unit = zarr.open_array(tmp_path / "unit.zarr", mode="r")[...]
    assert unit.dtype == BF16
    table = zarr.open_array(tmp_path / "table.zarr", mode="r")[...]
    same(unit, ex._normalise_block(table))
    norms = np.linalg.norm(unit.astype(np.float64), axis=1)
    assert np.all(np.abs(norms - 1) < 2**-7)
    row = unit[out["target_row"]].astype(np.float32)
    noise = np.random.default_rng(1).standard_normal(32).astype(np.float32)
    q = row + 0.05 * noise / np.linalg.norm(noise)
    q = q / np.linalg.norm(q)
    scores = unit.astype(np.float32) @ q
    assert sorted(out["top_rows"]) == sorted(np.argsort(-scores)[:5].tolist())
    assert out["worker_peak_rss_mib"] and out["search_rows_per_s"] > 0
