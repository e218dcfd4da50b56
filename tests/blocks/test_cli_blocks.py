"""`minifloat inspect --target <block format>` and `minifloat convert --to
<block format>`, end to end through the console script: --json compared with
float64 statistics computed here from minifloat.quantize of the whole tensor,
convert's output read back with minifloat.safetensors + BlockScaled.from_dict
(bit for bit against quantizing the whole tensor) and with safetensors.torch."""
import json
import math

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst
from minifloat.io import checkpoint
from minifloat.blocks import BLOCK_FORMATS, BlockScaled


from _cli import run  # the console script, shared by the CLI tests


PRECISION = {"mxfp8_e4m3": 4, "mxfp8_e5m2": 3, "mxfp6_e2m3": 4, "mxfp6_e3m2": 3, "mxfp4": 2,
             "mxint8": 7, "nvfp4": 2}


def block64(x, fmt):
    """overflow / flush-to-zero / precision-loss shares (of the finite values)
    and relative RMS error of quantize(x) -> dequantize, in float64; the
    tensor quantized whole, along its last axis."""
    q = mf.quantize(np.asarray(x, np.float32), fmt)
    x = np.asarray(x, np.float64).reshape(-1)
    y = q.dequantize().astype(np.float64).reshape(-1)
    fin = np.isfinite(x)
    x, y = x[fin], y[fin]
    ok = np.isfinite(y)
    xs, ys = x[ok], y[ok]
    ftz = ((ys == 0) & (xs != 0)).sum()
    keep = (ys != 0) & (xs != 0)
    lossy = (np.abs(ys - xs)[keep] > 2.0 ** (-PRECISION[fmt] / 2) * np.abs(xs[keep])).sum()
    err2, ref2 = ((ys - xs) ** 2).sum(), (xs ** 2).sum()
    n = x.size
    return {"overflow": (~ok).sum() / n, "flush_to_zero": ftz / n, "precision_loss": lossy / n,
            "rel_rms_error": math.sqrt(err2 / ref2)}, (n, (~ok).sum(), ftz, lossy, err2, ref2)


def close(a, b, rel=1e-9):
    return a == pytest.approx(b, rel=rel, abs=1e-300)


def _tensors():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((50, 70)) * 3
    x[0, :5] = [1000.0, -1e-7, 3e-3, 0.0, 1e-30]
    x[3, 40] = np.inf                  # its block becomes NaN: the other 31 values "overflow"
    x[7, 3] = np.nan
    t = {"w32": x.astype(np.float32), "w64": x, "wbf": x.astype(np.float32).astype(mf.bfloat16),
         "w16": (x / 10).astype(np.float16),
         "w4": np.clip(x[:6, :37], -6, 6).astype(np.float32).astype(mf.float4_e2m1fn),
         "w6": np.clip(x[:4, :33], -7, 7).astype(np.float32).astype(mf.float6_e3m2fn),
         "norm": (1 + 0.1 * rng.standard_normal(45)).astype(np.float32),
         "scalar": np.float32(0.125).reshape(()),
         "i32": np.arange(-50, 50, dtype=np.int32),
         "empty": np.zeros((0, 3), mf.bfloat16)}
    return t


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("blk") / "model.safetensors"
    t = _tensors()
    mst.save(p, t, metadata={"format": "pt"})
    return p, t


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """tensors larger than inspect's chunk (2^18 values): a 1-D one (runs of
    whole blocks of one row) and a 2-D one (several chunks of whole rows)"""
    rng = np.random.default_rng(8)
    t = {"long": (rng.standard_normal(300_001) * np.exp(rng.standard_normal(300_001))).astype(
             np.float32),
         "rows": (rng.standard_normal((2100, 130)) * 0.02).astype(np.float32).astype(mf.bfloat16)}
    p = tmp_path_factory.mktemp("blkbig") / "big.safetensors"
    mst.save(p, t)
    return p, t


def _check_inspect(f, t, fmt):
    rows = {r["name"]: r for r in f["tensors"]}
    tot = np.zeros(6)
    for name, x in t.items():
        r = rows[name]
        if x.dtype.kind in "iu" or x.ndim == 0:
            assert r["target"] is None, name          # integers, and 0-d (no axis for blocks)
            continue
        if x.size == 0:
            assert r["target"]["overflow"] is None and r["target"]["rel_rms_error"] is None
            continue
        want, parts = block64(x, fmt)
        tot += parts
        assert r["target"]["format"] == fmt
        for k, v in want.items():
            assert close(r["target"][k], v), (fmt, name, k, r["target"][k], v)
        fin = np.asarray(x, np.float64)[np.isfinite(np.asarray(x, np.float64))]
        assert close(r["mean"], fin.mean()) and close(r["std"], fin.std())
    g = f["totals"]["target"]
    n, over, ftz, lossy, err2, ref2 = tot
    assert g["format"] == fmt
    assert close(g["overflow"], over / n) and close(g["flush_to_zero"], ftz / n)
    assert close(g["precision_loss"], lossy / n)
    assert close(g["rel_rms_error"], math.sqrt(err2 / ref2))


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "mxint8", "mxfp6_e2m3"])
def test_inspect_target_block_json(small_file, fmt):
    p, t = small_file
    rep = json.loads(run("inspect", p, "--json", "--target", fmt).stdout)
    assert rep["target"] == fmt
    (f,) = rep["files"]
    _check_inspect(f, t, fmt)
    rows = {r["name"]: r for r in f["tensors"]}
    # the block holding the inf is NaN: its 31 finite values count as overflow
    assert rows["w32"]["target"]["overflow"] > 0 and rows["w32"]["nan"] == 1


def test_inspect_target_block_big_tensors(big_file):
    p, t = big_file
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        rep = json.loads(run("inspect", p, "--json", "--target", fmt).stdout)
        _check_inspect(rep["files"][0], t, fmt)


def test_inspect_target_block_text(small_file):
    p, _ = small_file
    out = run("inspect", p, "--target", "nvfp4").stdout
    assert "as nvfp4:" in out and "relative RMS error" in out


def _check_converted(out_p, t, fmt, converted):
    f = mst.open(out_p)
    meta = f.metadata()
    assert meta["format"] == "pt"
    info = json.loads(meta["minifloat.block_scaled"])
    back = mst.load(out_p)
    spec = BLOCK_FORMATS[fmt]
    for name, x in t.items():
        if name not in converted:
            assert f.info(name).dtype == mst.code_of(x.dtype)
            np.testing.assert_array_equal(np.asarray(back[name]).reshape(-1).view(np.uint8),
                                          np.ascontiguousarray(x).reshape(-1).view(np.uint8))
            continue
        assert info[name]["format"] == fmt and info[name]["shape"] == list(x.shape)
        assert f.info(name + "_scale").dtype == ("F8_E4M3" if fmt == "nvfp4" else "F8_E8M0")
        assert f.info(name).dtype == ("F4" if spec.packed else mst.code_of(spec.element_dtype))
        assert ((name + "_scale_2") in back) == (fmt == "nvfp4")
        q = BlockScaled.from_dict(back, meta, name)
        ref = mf.quantize(np.asarray(x, np.float32), fmt)
        assert q.shape == x.shape
        np.testing.assert_array_equal(q.dequantize().view(np.uint32),
                                      ref.dequantize().view(np.uint32))
    return meta


@pytest.mark.parametrize("fmt", list(BLOCK_FORMATS))
def test_convert_block_round_trip(small_file, tmp_path, fmt):
    p, t = small_file
    out_p = tmp_path / f"{fmt}.safetensors"
    rep = json.loads(run("convert", p, out_p, "--to", fmt, "--json").stdout)
    rows = {r["name"]: r for r in rep["tensors"]}
    converted = {n for n, x in t.items() if x.dtype.kind not in "iu" and x.ndim >= 1}
    assert {n for n, r in rows.items() if r["rel_rms_error"] is not None} == converted
    err2 = ref2 = 0.0
    for name in converted:
        assert rows[name]["to"] == fmt
        if t[name].size:
            want, parts = block64(t[name], fmt)
            assert close(rows[name]["rel_rms_error"], want["rel_rms_error"])
            err2 += parts[4]
            ref2 += parts[5]
    assert close(rep["rel_rms_error"], math.sqrt(err2 / ref2))
    assert rows["scalar"]["rel_rms_error"] is None and rows["scalar"]["to"] == "F32"
    meta = _check_converted(out_p, t, fmt, converted)
    if fmt.startswith("mxfp6"):
        return                                   # torch has no float6 dtype
    torch = pytest.importorskip("torch")
    storch = pytest.importorskip("safetensors.torch")
    tt = storch.load_file(str(out_p))
    want = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2,
            "mxfp4": torch.float4_e2m1fn_x2, "nvfp4": torch.float4_e2m1fn_x2,
            "mxint8": torch.int8}[fmt]
    assert tt["w32"].dtype == want and tt["w32"].shape[0] == 50
    assert tt["w32_scale"].dtype == (torch.float8_e4m3fn if fmt == "nvfp4"
                                     else torch.float8_e8m0fnu)
    q = BlockScaled.from_dict(tt, meta, "w32")
    np.testing.assert_array_equal(q.dequantize().view(np.uint32),
                                  mf.quantize(t["w32"], fmt).dequantize().view(np.uint32))


def test_convert_block_big_and_only(big_file, tmp_path):
    p, t = big_file
    out_p = tmp_path / "o.safetensors"
    out = run("convert", p, out_p, "--to", "nvfp4", "--only", "lo*").stdout
    assert "nvfp4 (F4 + F8_E4M3 + F32)" in out and "copied" in out
    back = mst.load(out_p)
    meta = mst.open(out_p).metadata()
    q = BlockScaled.from_dict(back, meta, "long")
    np.testing.assert_array_equal(q.dequantize().view(np.uint32),
                                  mf.quantize(t["long"], "nvfp4").dequantize().view(np.uint32))
    assert back["rows"].dtype == mf.bfloat16 and "rows_scale" not in back


def test_chunk_boundaries_in_process(small_file, tmp_path, monkeypatch):
    """tiny chunks: rows split into runs of blocks, sub-byte sources read
    from odd offsets; the results are those of one chunk per tensor"""
    p, t = small_file
    for fmt in ("mxfp6_e3m2", "nvfp4"):
        whole = checkpoint.inspect_file(p, fmt)
        rows, overall = checkpoint.convert_file(p, tmp_path / "a.safetensors", fmt)
        monkeypatch.setattr(checkpoint, "CHUNK", 40)
        small = checkpoint.inspect_file(p, fmt)
        rows2, overall2 = checkpoint.convert_file(p, tmp_path / "b.safetensors", fmt)
        monkeypatch.undo()
        for a, b in zip(whole["tensors"], small["tensors"]):
            assert a["target"] == b["target"] or all(
                close(a["target"][k], b["target"][k], 1e-12) for k in a["target"] if k != "format")
        assert rows == rows2 or all(
            r1["rel_rms_error"] == pytest.approx(r2["rel_rms_error"], rel=1e-12)
            for r1, r2 in zip(rows, rows2) if r1["rel_rms_error"] is not None)
        assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()


@pytest.mark.parametrize("args, msg", [
    (["--to", "mxfp4", "--saturate"], "leave out --saturate"),
    (["--to", "nvfp4", "--rounding", "stochastic"], "leave out --rounding stochastic"),
    (["--to", "mxfp5"], "--to must be"),
])
def test_convert_block_errors(small_file, tmp_path, args, msg):
    p, _ = small_file
    out = run("convert", p, tmp_path / "o.safetensors", *args, check=False)
    assert out.returncode == 2 and msg in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "o.safetensors").exists()


def test_convert_block_name_clash_and_overwrite(tmp_path):
    p = tmp_path / "c.safetensors"
    mst.save(p, {"w": np.ones((2, 32), np.float32), "w_scale": np.ones(2, np.float32),
                 "v": np.ones((2, 32), np.float32)})
    for only in ([], ["--only", "w"]):     # a copied w_scale clashes too
        out = run("convert", p, tmp_path / "o.safetensors", "--to", "mxfp4", *only, check=False)
        assert out.returncode == 2 and "'w_scale'" in out.stderr and "--only" in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "o.safetensors").exists()
    run("convert", p, tmp_path / "o.safetensors", "--to", "mxfp4", "--only", "v")
    assert set(mst.load(tmp_path / "o.safetensors")) == {"w", "w_scale", "v", "v_scale"}
    before = p.read_bytes()
    out = run("convert", p, p, "--to", "mxfp4", "--only", "v", check=False)
    assert out.returncode == 2 and "refusing to overwrite" in out.stderr
    assert p.read_bytes() == before


def test_inspect_block_plot_refused(small_file, tmp_path):
    p, _ = small_file
    out = run("inspect", p, "--target", "mxfp4", "--plot", tmp_path / "h.png", check=False)
    assert out.returncode == 2 and "--plot" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_stats_kernel_float32_with_round_trip():
    """_core._stats with float32 x and its round trip y given (the block
    targets' route) counts as the float64 route does on the same values"""
    from minifloat import _core
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 96)) * np.exp(4 * rng.standard_normal((64, 96)))).astype(
        np.float32)
    x[2, 5], x[9, 70] = np.inf, np.nan
    x[4, :40] = 0
    for fmt in ("mxfp4", "nvfp4", "mxint8"):
        y = mf.quantize(x, fmt).dequantize().reshape(-1)
        a32, a64 = np.zeros(14), np.zeros(14)
        for a in (a32, a64):
            a[4], a[5] = math.inf, -math.inf
        _core._stats(a32, x.reshape(-1), "bfloat16", 0.5, y)
        _core._stats(a64, x.reshape(-1).astype(np.float64), "bfloat16", 0.5, y.astype(np.float64))
        np.testing.assert_array_equal(a32[:6], a64[:6])          # counts, min, max
        np.testing.assert_array_equal(a32[8:12], a64[8:12])      # over, zeros, gt
        np.testing.assert_allclose(a32[6:8], a64[6:8], rtol=1e-12)
        np.testing.assert_allclose(a32[12:], a64[12:], rtol=1e-12)
    with pytest.raises(ValueError, match="float32"):
        _core._stats(np.zeros(14), x.reshape(-1), "bfloat16", 0.5, np.zeros(3, np.float32))
