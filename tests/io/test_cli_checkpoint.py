"""`minifloat inspect` and `minifloat convert`, end to end: the real console
script on files written by torch, --json compared with float64 statistics
computed here independently, convert's output read back with safetensors.torch."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst


from _cli import run  # the console script, shared by the CLI tests
from _refs import torch_e4m3fn_saturates


def stats64(x):
    """The statistics inspect reports, computed directly in float64."""
    x = np.asarray(x, np.float64).reshape(-1)
    f = x[np.isfinite(x)]
    return {"min": f.min(), "max": f.max(), "mean": f.mean(), "std": f.std(),
            "nan": int(np.isnan(x).sum()), "inf": int(np.isinf(x).sum())}


def target64(x, ml_type, mant_bits):
    """overflow / flush-to-zero / precision-loss shares and relative RMS error
    of a cast, with ml_dtypes doing the cast and float64 the arithmetic."""
    x = np.asarray(x, np.float64).reshape(-1)
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(ml_type).astype(np.float64)
    ok = np.isfinite(y)
    over = (~ok).sum()
    xs, ys = x[ok], y[ok]
    ftz = ((ys == 0) & (xs != 0)).sum()
    keep = (ys != 0) & (xs != 0)
    lossy = (np.abs(ys - xs)[keep] > 2.0 ** (-(mant_bits + 1) / 2) * np.abs(xs[keep])).sum()
    rms = math.sqrt(((ys - xs) ** 2).sum() / (xs ** 2).sum())
    n = x.size
    return {"overflow": over / n, "flush_to_zero": ftz / n, "precision_loss": lossy / n,
            "rel_rms_error": rms}


def close(a, b, rel=1e-9):
    return a == pytest.approx(b, rel=rel, abs=1e-300)


@pytest.fixture(scope="module")
def torch_file(tmp_path_factory):
    torch = pytest.importorskip("torch")
    storch = pytest.importorskip("safetensors.torch")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 70, generator=g, dtype=torch.float64) * 3
    x[0, :5] = torch.tensor([1000.0, -1e-7, 3e-3, 0.0, 1e-30], dtype=torch.float64)
    t = {"w64": x, "w32": x.float(), "w16": (x / 10).half(), "wbf": x.bfloat16(),
         "w8": x.clamp(-400, 400).to(torch.float8_e4m3fn),
         "w5": x.to(torch.float8_e5m2),
         "nan32": torch.tensor([1.0, float("nan"), float("inf"), -2.0, float("-inf")]),
         "i32": torch.arange(-50, 50, dtype=torch.int32), "u8": torch.arange(200, dtype=torch.uint8),
         "flags": torch.arange(10) % 3 == 0, "c": torch.randn(7, generator=g, dtype=torch.complex64),
         "scales": torch.full((4,), 0.25).to(torch.float8_e8m0fnu),
         "empty": torch.zeros(0, 3, dtype=torch.bfloat16)}
    p = tmp_path_factory.mktemp("ckpt") / "model.safetensors"
    storch.save_file(t, str(p), metadata={"format": "pt"})
    return p, t


def test_inspect_demo_and_version():
    out = run("inspect")
    assert "demo" in out.stdout and "embed_tokens.weight" in out.stdout and "BF16" in out.stdout
    out = run("inspect", "--json", "--target", "float8_e4m3fn")
    rep = json.loads(out.stdout)
    (f,) = rep["files"]
    assert f["totals"]["tensors"] == len(f["tensors"]) >= 5
    assert f["totals"]["target"]["overflow"] > 0 and f["totals"]["target"]["flush_to_zero"] > 0
    assert run("--version").stdout.strip() == f"minifloat {mf.__version__}"
    info, formats = run("info").stdout, run("formats").stdout
    assert info != formats and "integrations" in info and "smallest normal" in formats


def test_inspect_json_matches_float64(torch_file):
    torch = pytest.importorskip("torch")
    ml = pytest.importorskip("ml_dtypes")
    p, t = torch_file
    rep = json.loads(run("inspect", p, "--json", "--target", "float8_e4m3fn").stdout)
    (f,) = rep["files"]
    assert f["metadata"] == {"format": "pt"}
    rows = {r["name"]: r for r in f["tensors"]}
    assert set(rows) == set(t)
    for name, x in t.items():
        r = rows[name]
        assert r["shape"] == list(x.shape) and r["elements"] == x.numel()
        if x.numel() == 0:
            assert r["min"] is None and r["std"] is None
            continue
        xd = x.to(torch.complex128).abs() if x.is_complex() else x.double()
        s = stats64(xd.numpy())
        for k in ("nan", "inf"):
            assert r[k] == s[k], (name, k)
        for k in ("min", "max", "mean", "std"):
            assert close(r[k], s[k]), (name, k, r[k], s[k])
        if x.dtype.is_floating_point and x.dtype != torch.float8_e8m0fnu:
            want = target64(xd.numpy(), ml.float8_e4m3fn, 3)
            for k, v in want.items():
                assert close(r["target"][k], v, 1e-9), (name, k, r["target"][k], v)
        else:
            assert r["target"] is None            # never cast: integers, bool, complex, scales
    assert rows["w32"]["target"]["overflow"] > 0 and rows["w32"]["target"]["flush_to_zero"] > 0
    assert f["totals"]["bytes"] == p.stat().st_size - 8 - int.from_bytes(p.read_bytes()[:8], "little")


def test_inspect_text_and_plot(torch_file, tmp_path):
    p, _ = torch_file
    out = run("inspect", p, "--target", "float6_e2m3fn")
    assert "wbf" in out.stdout and "total: 13 tensors" in out.stdout and "as float6_e2m3fn" in out.stdout
    pytest.importorskip("matplotlib")
    png = tmp_path / "h.png"
    run("inspect", p, "--plot", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_sharded(tmp_path):
    mst.save(tmp_path / "a.safetensors", {"x": np.arange(4, dtype=np.float32)})
    mst.save(tmp_path / "b.safetensors", {"y": np.ones(3, mf.bfloat16)})
    mst.save_index(tmp_path / "model.safetensors.index.json", {"x": "a.safetensors", "y": "b.safetensors"})
    rep = json.loads(run("inspect", tmp_path / "model.safetensors.index.json", "--json").stdout)
    rows = {r["name"]: r for r in rep["files"][0]["tensors"]}
    assert rows["x"]["max"] == 3 and rows["y"]["mean"] == 1 and rep["files"][0]["totals"]["tensors"] == 2


@pytest.mark.parametrize("args, msg", [
    (["inspect", "/nonexistent/x.safetensors"], "No such file"),
    (["inspect", "--target", "float9"], "unknown --target"),
    (["convert", "a", "b", "--to", "int4"], "--to must be"),
])
def test_errors_are_one_line(args, msg):
    out = run(*args, check=False)
    assert out.returncode == 2 and msg in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_malformed_file_is_one_line(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\x10\0\0\0\0\0\0\0{\"a\": {}}       ")
    out = run("inspect", p, check=False)
    assert out.returncode == 2 and str(p) in out.stderr and "'a'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_convert(torch_file, tmp_path):
    torch = pytest.importorskip("torch")
    storch = pytest.importorskip("safetensors.torch")
    p, t = torch_file
    out_p = tmp_path / "fp8.safetensors"
    out = run("convert", p, out_p, "--to", "float8_e4m3fn", "--saturate", "--json")
    rep = json.loads(out.stdout)
    back = storch.load_file(str(out_p))
    rows = {r["name"]: r for r in rep["tensors"]}
    err2 = ref2 = 0.0
    for name, x in t.items():
        y = back[name]
        cast = x.dtype.is_floating_point and x.dtype != torch.float8_e8m0fnu
        if not cast:                          # integers, bool, complex, scales: copied
            assert y.dtype == x.dtype and torch.equal(y.view(torch.uint8) if y.dtype != torch.bool
                                                      else y, x.view(torch.uint8) if x.dtype != torch.bool
                                                      else x)
            assert rows[name]["rel_rms_error"] is None
            continue
        assert y.dtype == torch.float8_e4m3fn and y.shape == x.shape
        # torch's own saturating cast of the same values, bit for bit
        xs = x.double().clamp(-448, 448) if x.dtype != torch.float64 else x.clamp(-448, 448)
        if x.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float8_e5m2,
                       torch.float8_e4m3fn):
            xs = x.float().clamp(-448, 448)
        ok = torch.isfinite(x.double())
        want = xs.to(torch.float8_e4m3fn)
        assert torch.equal(y.view(torch.uint8)[ok], want.view(torch.uint8)[ok]), name
        xd, yd = x.double()[ok], y.double()[ok]
        e2, r2 = float(((yd - xd) ** 2).sum()), float((xd ** 2).sum())
        if r2:
            assert close(rows[name]["rel_rms_error"], math.sqrt(e2 / r2), 1e-9), name
        err2, ref2 = err2 + e2, ref2 + r2
    assert close(rep["rel_rms_error"], math.sqrt(err2 / ref2), 1e-9)
    # --only: just the matching tensors; text output
    out = run("convert", p, out_p, "--to", "bfloat16", "--only", "w3*")
    assert "overall relative RMS error" in out.stdout
    back = storch.load_file(str(out_p))
    assert back["w32"].dtype == torch.bfloat16 and back["w64"].dtype == torch.float64
    assert torch.equal(back["w32"], t["w32"].bfloat16())
    # stochastic rounding with a seed is reproducible; refuses to overwrite its input
    a, b = tmp_path / "s1.safetensors", tmp_path / "s2.safetensors"
    for q in (a, b):
        run("convert", p, q, "--to", "float4_e2m1fn", "--rounding", "stochastic", "--seed", "7",
            "--only", "w[36]*")
    assert a.read_bytes() == b.read_bytes()
    assert storch.load_file(str(a))["w32"].dtype == torch.float4_e2m1fn_x2
    before = p.read_bytes()
    out = run("convert", p, p, "--to", "bfloat16", check=False)
    assert out.returncode == 2 and "refusing to overwrite" in out.stderr and p.read_bytes() == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
@pytest.mark.parametrize("name", ["pipe.safetensors", "model.safetensors.index.json"])
@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, name, command):
    # open() of a FIFO blocks until a writer comes: a user who passes one by
    # mistake must get an error at once, not a hang
    fifo = tmp_path / name
    os.mkfifo(fifo)
    args = [command, fifo] + ([tmp_path / "out.safetensors", "--to", "float8_e4m3fn"]
                              if command == "convert" else [])
    out = run(*args, check=False, timeout=60)
    assert out.returncode == 2
    assert f"{fifo}: a FIFO, not a regular file" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "out.safetensors").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_load_refuses_a_fifo_and_a_device(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    code = ("import minifloat as mf\n"
            "for p in [%r, '/dev/null']:\n"
            "    try:\n"
            "        mf.io.safetensors.load(p)\n"
            "    except ValueError as e:\n"
            "        print(e)\n") % str(fifo)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{fifo}: a FIFO, not a regular file")
    if os.path.exists("/dev/null"):
        assert lines[1].startswith("/dev/null: a character device, not a regular file")
    with pytest.raises(ValueError, match="a FIFO"):     # a folder: its one checkpoint file
        mf.io.safetensors.load(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no .safetensors file"):
        mf.io.safetensors.load(empty)


# --------------------------------------------------------------------------- overflow

@pytest.mark.parametrize("to,tdt", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"),
                                    ("float8_e4m3fnuz", "float8_e4m3fnuz"),
                                    ("float8_e5m2fnuz", "float8_e5m2fnuz"), ("float16", "float16")])
def test_convert_default_follows_torch(tmp_path, to, tdt):
    """convert's default overflow rule is torch's .to(): float8_e4m3fn
    saturates (inf included), float8_e5m2 and float16 overflow to inf, the
    fnuz formats to NaN; bit for bit torch's codes, for a tensor large enough
    to take the fused kernel path, with the overflowing values in one chunk
    only.  The counts say how many values went where.  Before 2.12 torch's
    float8_e4m3fn gave NaN on overflow: against such a torch the test runs
    --no-saturate, which must then match it."""
    torch = pytest.importorskip("torch")
    sat = to == "float8_e4m3fn" and torch_e4m3fn_saturates(torch)
    opts = ["--no-saturate"] if to == "float8_e4m3fn" and not sat else []
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(3 << 20) * 3).astype(np.float32)
    x[5:9] = [1e6, -7e4, np.inf, -np.inf]
    x[10] = np.nan
    x[11:14] = [1e-30, -1e-30, 0.0]
    xb = x.astype(mf.bfloat16)
    p = tmp_path / "x.safetensors"
    mst.save(p, {"w": xb})
    out = tmp_path / "o.safetensors"
    res = run("convert", p, out, "--to", to, "--json", *opts)
    (row,) = json.loads(res.stdout)["tensors"]
    got = np.asarray(mst.load(out)["w"])
    t = torch.from_numpy(xb.view(np.int16)).view(torch.bfloat16).to(getattr(torch, tdt))
    want = t.view(torch.int16 if to == "float16" else torch.uint8).numpy()
    gf, wf = got.astype(np.float32), t.float().numpy()
    # the same codes, NaN for NaN (the NaN code differs: minifloat, as ml_dtypes,
    # keeps the NaN's top payload bits, 0x7E for e5m2; torch writes 0x7F)
    assert np.array_equal(np.isnan(gf), np.isnan(wf))
    np.testing.assert_array_equal(got.view(want.dtype)[~np.isnan(gf)], want[~np.isnan(wf)])
    big = float(mf.finfo(got.dtype).max)
    xf = xb.astype(np.float32)
    beyond = int(np.count_nonzero(np.abs(xf) > big))          # the infs included
    fin_beyond = int(np.count_nonzero(np.isfinite(xf) & (np.abs(xf) > big)))
    if sat:
        assert row["saturated"] == beyond and row["to_nonfinite"] == 0
    else:
        assert row["saturated"] == 0 and row["to_nonfinite"] == fin_beyond
        assert ("became inf or NaN" in res.stderr) == (fin_beyond > 0)
    assert row["flush_to_zero"] == int(np.count_nonzero(
        (got.astype(np.float32) == 0) & (xf != 0) & np.isfinite(xf)))


def test_convert_no_saturate_and_saturate(tmp_path):
    x = np.array([1e6, 500., np.inf, -np.inf, np.nan, 1e-10, 1.0, 0.0] * 1000,
                 np.float32).astype(mf.bfloat16)
    p = tmp_path / "x.safetensors"
    mst.save(p, {"w": x})
    out = tmp_path / "o.safetensors"
    r = json.loads(run("convert", p, out, "--to", "float8_e4m3fn", "--no-saturate",
                       "--json").stdout)["tensors"][0]
    y = np.asarray(mst.load(out)["w"])[:8].astype(np.float32)
    assert np.isnan(y[:5]).all() and (y[5:] == [0, 1, 0]).all()        # ml_dtypes' rule
    assert (r["to_nonfinite"], r["saturated"], r["flush_to_zero"]) == (2000, 0, 1000)
    r = json.loads(run("convert", p, out, "--to", "float16", "--saturate",
                       "--json").stdout)["tensors"][0]
    y = np.asarray(mst.load(out)["w"])[:5].astype(np.float32)
    assert list(y[:4]) == [65504, 500, 65504, -65504] and np.isnan(y[4])
    assert (r["to_nonfinite"], r["saturated"]) == (0, 3000)
    bad = run("convert", p, out, "--to", "mxfp4", "--no-saturate", check=False)
    assert bad.returncode == 2 and "saturate" in bad.stderr
