"""Model folders: inspect, convert, load and open take a folder (its index,
or its one .safetensors file); convert of a folder or an index writes a new
folder (shards of the same names, the index, config.json rewritten, the
other files copied), atomically; a quantized weight whose scale sits in
another shard is decoded; load(dequantize=True) gives the unquantized
model's tensors.  The end-to-end checks build tiny models with transformers
and load the converted folder with from_pretrained."""
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst
from minifloat.io import checkpoint, layouts

from _cli import run

ml = pytest.importorskip("ml_dtypes")

CONFIG = {"architectures": ["X"], "dtype": "bfloat16",
          "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                  "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}


def _fp8_block(rng, n, k):
    codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38                          # no NaN codes
    s = (rng.random((-(-n // 128), -(-k // 128))) * 1e-2 + 1e-4).astype(np.float32)
    return codes, s


def _dequant(codes, s):
    q = codes.view(ml.float8_e4m3fn).astype(np.float32)
    big = np.repeat(np.repeat(s, 128, 0), 128, 1)[:q.shape[0], :q.shape[1]]
    return q * big


def _deepseek_folder(folder, rng):
    """Two shards and an index; layer 1's scale sits in the other shard than
    its codes; config, tokenizer, generation config, a subfolder."""
    folder.mkdir()
    c0, s0 = _fp8_block(rng, 200, 300)
    c1, s1 = _fp8_block(rng, 130, 140)
    emb = rng.standard_normal((16, 8)).astype(np.float32)
    bias = rng.standard_normal(7).astype(np.float32)
    sh1 = {"l.0.proj.weight": c0.view(mf.float8_e4m3fn), "l.0.proj.weight_scale_inv": s0,
           "l.1.proj.weight": c1.view(mf.float8_e4m3fn), "embed.weight": emb.astype(mf.bfloat16)}
    sh2 = {"l.1.proj.weight_scale_inv": s1, "router.e_score_correction_bias": bias,
           "pos": np.arange(4, dtype=np.int64)}
    mst.save(folder / "model-00001-of-00002.safetensors", sh1, metadata={"format": "pt"})
    mst.save(folder / "model-00002-of-00002.safetensors", sh2, metadata={"format": "pt"})
    wm = {**{n: "model-00001-of-00002.safetensors" for n in sh1},
          **{n: "model-00002-of-00002.safetensors" for n in sh2}}
    mst.save_index(folder / "model.safetensors.index.json", wm, {"total_size": 1})
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "tokenizer.json").write_bytes(b'{"tok": [1, 2, 3]}\n')
    (folder / "generation_config.json").write_text('{"do_sample": false}')
    (folder / "original").mkdir()
    (folder / "original" / "consolidated.bin").write_bytes(b"x" * 10)
    return {"l.0.proj.weight": _dequant(c0, s0), "l.1.proj.weight": _dequant(c1, s1),
            "embed.weight": emb.astype(mf.bfloat16), "router.e_score_correction_bias": bias,
            "pos": np.arange(4, dtype=np.int64)}


def _bf16_bits(x):
    return np.asarray(x, np.float32).astype(mf.bfloat16).view(np.uint16)


def test_convert_folder_dequantizes(tmp_path):
    src = tmp_path / "ds"
    want = _deepseek_folder(src, np.random.default_rng(3))
    out = tmp_path / "ds-bf16"
    res = run("convert", src, out, "--to", "bfloat16")
    assert "wrote" in res.stdout
    files = sorted(os.listdir(out))
    assert files == ["config.json", "generation_config.json", "model-00001-of-00002.safetensors",
                     "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                     "tokenizer.json"]                          # no subfolder, no temp folder
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["dtype"] == "bfloat16"
    assert cfg["architectures"] == ["X"]
    assert (out / "tokenizer.json").read_bytes() == (src / "tokenizer.json").read_bytes()
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(want)
    # each logical tensor in its codes' shard
    assert index["weight_map"]["l.1.proj.weight"] == "model-00001-of-00002.safetensors"
    with mst.open(out) as f:                                    # the folder opens too
        assert sorted(f.keys()) == sorted(want)
        assert index["metadata"]["total_size"] == sum(f.info(n).end - f.info(n).begin
                                                      for n in f.keys())
        for n in ("l.0.proj.weight", "l.1.proj.weight"):
            assert f.info(n).dtype == "BF16"
            np.testing.assert_array_equal(np.asarray(f.get_tensor(n)).view(np.uint16),
                                          _bf16_bits(want[n]))
        # every other tensor as stored: the F32 bias stays F32, bit for bit
        assert f.info("router.e_score_correction_bias").dtype == "F32"
        np.testing.assert_array_equal(f.get_tensor("router.e_score_correction_bias"),
                                      want["router.e_score_correction_bias"])
        np.testing.assert_array_equal(f.get_tensor("pos"), want["pos"])
    with mst.open(out / "model-00002-of-00002.safetensors") as f:
        assert f.metadata() == {"format": "pt"}                 # each shard's metadata kept


def test_convert_index_and_inspect_folder(tmp_path):
    src = tmp_path / "ds"
    want = _deepseek_folder(src, np.random.default_rng(4))
    out = tmp_path / "o"
    run("convert", src / "model.safetensors.index.json", out, "--to", "float32")
    got = mst.load(out)
    np.testing.assert_array_equal(got["l.1.proj.weight"], want["l.1.proj.weight"])
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    rep = json.loads(run("inspect", src, "--json").stdout)
    rows = {r["name"]: r for r in rep["files"][0]["tensors"]}
    assert rows["l.1.proj.weight"]["decoded"] and rows["l.1.proj.weight"]["layout"] == \
        "fp8 block 128x128"
    assert rows["l.1.proj.weight"]["max"] == pytest.approx(float(want["l.1.proj.weight"].max()))
    assert "l.1.proj.weight_scale_inv" not in rows
    # the shard alone still cannot be converted: its scale is elsewhere
    bad = run("convert", src / "model-00002-of-00002.safetensors", tmp_path / "x.safetensors",
              "--to", "bfloat16", check=False)
    assert bad.returncode == 2 and "not supported yet" in bad.stderr


def test_load_dequantize(tmp_path):
    src = tmp_path / "ds"
    want = _deepseek_folder(src, np.random.default_rng(5))
    got = mst.load(src, dequantize=True)
    assert sorted(got) == sorted(want)
    for n, v in want.items():
        assert got[n].dtype == (np.float32 if n.endswith("proj.weight") else v.dtype)
        np.testing.assert_array_equal(np.asarray(got[n]).view(np.uint8),
                                      np.asarray(v).view(np.uint8))
    stored = mst.load(src)                                      # the plain load: stored tensors
    assert "l.0.proj.weight_scale_inv" in stored and stored["l.0.proj.weight"].dtype == \
        mf.float8_e4m3fn
    with mst.open(src, dequantize=True) as f:
        assert "l.1.proj.weight" in f.keys() and "l.1.proj.weight_scale_inv" not in f.keys()
        with pytest.raises(KeyError, match="part of 'l.1.proj.weight'"):
            f.get_tensor("l.1.proj.weight_scale_inv")
        with pytest.raises(ValueError, match="read whole"):
            f.get_slice("l.1.proj.weight")
        np.testing.assert_array_equal(f.get_slice("pos")[1:3], [1, 2])
    rows = {r["name"]: r for r in layouts.logical_tensors(src)}
    assert rows["l.1.proj.weight"]["layout"] == "fp8_block"
    assert rows["l.1.proj.weight"]["stored"] == ["l.1.proj.weight", "l.1.proj.weight_scale_inv"]
    assert rows["l.1.proj.weight"]["shape"] == (130, 140)
    assert rows["pos"]["layout"] is None and rows["pos"]["stored"] == ["pos"]


def test_load_dequantize_refuses_undecoded(tmp_path):
    p = tmp_path / "m.safetensors"
    # compressed-tensors' FP8 block grid: recognised, not decoded
    mst.save(p, {"m.weight": np.zeros((200, 300), mf.float8_e4m3fn),
                 "m.weight_scale": np.ones((2, 3), np.float32)})
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors"}}))
    with pytest.raises(ValueError, match="does not decode"):
        mst.load(p, dequantize=True)


def test_convert_folder_refuses_existing_output(tmp_path):
    src = tmp_path / "ds"
    _deepseek_folder(src, np.random.default_rng(6))
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    res = run("convert", src, out, "--to", "bfloat16", check=False)
    assert res.returncode == 2 and str(out) in res.stderr and "not an empty folder" in res.stderr
    assert os.listdir(out) == ["keep.txt"]
    res = run("convert", src, src, "--to", "bfloat16", check=False)
    assert res.returncode == 2
    empty = tmp_path / "e"
    empty.mkdir()
    run("convert", src, empty, "--to", "bfloat16")                # an empty folder is fine
    assert "config.json" in os.listdir(empty)


def test_folder_errors(tmp_path):
    two = tmp_path / "two"
    two.mkdir()
    for n in ("a", "b"):
        mst.save(two / f"{n}.safetensors", {"x": np.ones(2, np.float32)})
    res = run("inspect", two, check=False)
    assert res.returncode == 2 and "2 .safetensors files and no" in res.stderr and str(two) in \
        res.stderr
    none = tmp_path / "none"
    none.mkdir()
    res = run("convert", none, tmp_path / "o", "--to", "bfloat16", check=False)
    assert res.returncode == 2 and "no .safetensors file" in res.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("how", ["interrupt", "sigterm"])
def test_convert_folder_interrupted_leaves_nothing(tmp_path, how):
    """Ctrl-C or SIGTERM in the middle of the second shard: no output folder,
    no temporary folder or file left."""
    src = tmp_path / "ds"
    _deepseek_folder(src, np.random.default_rng(7))
    out = tmp_path / "o"
    sig = "SIGINT" if how == "interrupt" else "SIGTERM"
    res = _convert_signalled(src, out, sig)
    assert res.returncode == (130 if how == "interrupt" else 143), res.stderr
    assert ("interrupted" if how == "interrupt" else "terminated") in res.stderr
    assert sorted(os.listdir(tmp_path)) == ["ds"]


# --------------------------------------------------------------------------- from_pretrained

def _tiny(model_cls, config, seed=0):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seed)
    return model_cls(config).to(torch.bfloat16).eval()


def _same_model(cls, out, ref_dir, ref_sd, ids):
    """from_pretrained(out) loads with no missing or unexpected key and is
    the model of ref_dir holding the reference weights `ref_sd`: the same
    state dict bit for bit and the same logits.  (The reference is loaded
    the same way: built by hand, a non-persistent buffer such as rotary
    inv_freq would differ in dtype.)"""
    import torch
    loaded, info = cls.from_pretrained(out, output_loading_info=True, dtype=torch.bfloat16)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    model = cls.from_pretrained(ref_dir, dtype=torch.bfloat16)
    model.load_state_dict(ref_sd, strict=False)
    a_sd, b_sd = loaded.state_dict(), model.state_dict()
    assert sorted(a_sd) == sorted(b_sd)
    bad = [k for k in a_sd if not torch.equal(a_sd[k], b_sd[k])]
    assert not bad, bad
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_llama_deepseek_fp8_from_pretrained(tmp_path):
    """A tiny LlamaForCausalLM, its Linear weights stored in DeepSeek's FP8
    block layout; the converted folder loads with from_pretrained (no missing
    or unexpected keys) and gives the logits of the model holding
    transformers-independent reference weights float32(q) * s in bf16."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=160, intermediate_size=288,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=40)
    model = _tiny(transformers.LlamaForCausalLM, cfg)
    ref_dir, q_dir, out = tmp_path / "ref", tmp_path / "q", tmp_path / "out"
    model.save_pretrained(ref_dir)
    tensors = mst.load(ref_dir)
    qt, ref_sd = {}, {}
    for n, w in tensors.items():
        w32 = np.asarray(w, np.float32)
        if n.endswith("proj.weight"):                      # the Linear weights
            nr, nc = w32.shape
            s = np.zeros((-(-nr // 128), -(-nc // 128)), np.float32)
            for i in range(s.shape[0]):
                for j in range(s.shape[1]):
                    blk = w32[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                    s[i, j] = max(float(np.abs(blk).max()), 1e-12) / 448
            big = np.repeat(np.repeat(s, 128, 0), 128, 1)[:nr, :nc]
            q = (w32 / big).astype(mf.float8_e4m3fn)
            qt[n], qt[n + "_scale_inv"] = q, s
            ref_sd[n] = torch.from_numpy(q.astype(np.float32) * big).to(torch.bfloat16)
        else:
            qt[n] = w
    q_dir.mkdir()
    mst.save(q_dir / "model.safetensors", qt)
    c = json.loads((ref_dir / "config.json").read_text())
    c["quantization_config"] = CONFIG["quantization_config"]
    (q_dir / "config.json").write_text(json.dumps(c))
    run("convert", q_dir, out, "--to", "bfloat16")
    _same_model(transformers.LlamaForCausalLM, out, ref_dir, ref_sd,
                torch.arange(12).reshape(1, 12) % 64)


def test_gpt_oss_mxfp4_from_pretrained(tmp_path):
    """A tiny GptOssForCausalLM whose experts are stored as gpt-oss MXFP4
    (blocks + scales, the transpose of the bf16 layout); the converted folder
    loads with from_pretrained and gives the logits of the model holding
    transformers' own convert_moe_packed_tensors weights."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
    cfg = transformers.GptOssConfig(vocab_size=64, hidden_size=64, intermediate_size=64,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=16, num_local_experts=4,
                                    num_experts_per_tok=2, layer_types=["full_attention"] * 2)
    model = _tiny(transformers.GptOssForCausalLM, cfg)
    ref_dir, q_dir, out = tmp_path / "ref", tmp_path / "q", tmp_path / "out"
    model.save_pretrained(ref_dir)
    tensors = mst.load(ref_dir)
    qt, ref_sd = {}, {}
    for n, w in tensors.items():
        if n.endswith(("experts.gate_up_proj", "experts.down_proj")):
            wt = np.ascontiguousarray(np.swapaxes(np.asarray(w, np.float32), 1, 2))  # [E, N, K]
            b = mf.blocks.quantize(wt, "mxfp4")
            e, nn, k = wt.shape
            blocks = np.ascontiguousarray(b.data).view(np.uint8).reshape(e, nn, k // 32, 16)
            scales = np.ascontiguousarray(b.scales).view(np.uint8).reshape(e, nn, k // 32)
            qt[n + "_blocks"], qt[n + "_scales"] = blocks, scales
            ref_sd[n] = mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks),
                                                         torch.from_numpy(scales))
        else:
            qt[n] = w
    q_dir.mkdir()
    mst.save(q_dir / "model.safetensors", qt)
    c = json.loads((ref_dir / "config.json").read_text())
    c["quantization_config"] = {"quant_method": "mxfp4"}
    (q_dir / "config.json").write_text(json.dumps(c))
    run("convert", q_dir, out, "--to", "bfloat16")
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    _same_model(transformers.GptOssForCausalLM, out, ref_dir, ref_sd,
                torch.arange(10).reshape(1, 10) % 64)


def _convert_signalled(src, out, sig):
    """`minifloat convert SRC OUT --to bfloat16` in a child that sends
    itself signal `sig` (a name) while writing its third copied tensor."""
    code = f"""
import os, signal, sys
# Python's own Ctrl-C handler, also when the tests were started from a shell
# that ignores SIGINT for background jobs (the child would inherit SIG_IGN)
signal.signal(signal.SIGINT, signal.default_int_handler)
from minifloat.io import checkpoint
from minifloat import cli
orig = checkpoint._copy_chunks
calls = []
def slow(data, progress, chunk=1 << 24):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.{sig})
    yield from orig(data, progress, chunk)
checkpoint._copy_chunks = slow
sys.exit(cli.main(["convert", {str(src)!r}, {str(out)!r}, "--to", "bfloat16"]))
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def _killed_midway(tmp_path, src, out):
    """convert killed outright (SIGKILL: no handler runs) while writing."""
    res = _convert_signalled(src, out, "SIGKILL")
    assert res.returncode == -signal.SIGKILL, res.stderr


def test_kill_9_single_file_leaves_nothing(tmp_path):
    """The output file has no name until complete (O_TMPFILE): SIGKILL in the
    middle of a file convert leaves nothing in the folder."""
    p = tmp_path / "m.safetensors"
    rng = np.random.default_rng(8)
    mst.save(p, {f"t{i}": rng.standard_normal(64).astype(np.float32) for i in range(3)} |
             {"ids": np.arange(5), "mask": np.ones(4, bool), "pos": np.arange(3, dtype=np.int32)})
    _killed_midway(tmp_path, p, tmp_path / "o.safetensors")
    assert sorted(os.listdir(tmp_path)) == ["m.safetensors"]


def test_kill_9_folder_leftover_removed_next_time(tmp_path):
    """A folder cannot be nameless: SIGKILL leaves the hidden temporary
    folder, which the next convert to the same output removes (its process
    is gone); then the output appears complete."""
    src = tmp_path / "ds"
    _deepseek_folder(src, np.random.default_rng(9))
    out = tmp_path / "o"
    _killed_midway(tmp_path, src, out)
    left = [n for n in os.listdir(tmp_path) if n not in ("ds",)]
    assert len(left) == 1 and left[0].startswith(".o.") and left[0].endswith(".tmp")
    run("convert", src, out, "--to", "bfloat16")
    assert sorted(os.listdir(tmp_path)) == ["ds", "o"]


def _files(folder):
    return {n: (folder / n).read_bytes() for n in sorted(os.listdir(folder))}


def test_jobs_and_dask_scheduler_give_the_same_folder(tmp_path):
    """--jobs 2 (threads) and --scheduler (a dask.distributed LocalCluster
    of worker processes) write byte for byte the folder one job writes."""
    src = tmp_path / "ds"
    _deepseek_folder(src, np.random.default_rng(10))
    run("convert", src, tmp_path / "one", "--to", "bfloat16")
    run("convert", src, tmp_path / "two", "--to", "bfloat16", "--jobs", "2")
    want = _files(tmp_path / "one")
    assert _files(tmp_path / "two") == want
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        run("convert", src, tmp_path / "dask", "--to", "bfloat16", "--scheduler",
            cluster.scheduler_address)
        rows, _ = checkpoint.convert_folder(src, tmp_path / "api", "bfloat16",
                                            scheduler=cluster.scheduler_address)
    assert _files(tmp_path / "dask") == want and _files(tmp_path / "api") == want
    rows1, _ = checkpoint.convert_folder(src, tmp_path / "api1", "bfloat16")
    # the same rows, in shard order (the error sums may differ in the last
    # bits: a dask worker runs NumPy's float64 dot with one BLAS thread)
    assert [r["name"] for r in rows] == [r["name"] for r in rows1]
    for a, b in zip(rows, rows1):
        assert {k: v for k, v in a.items() if k != "rel_rms_error"} == \
            {k: v for k, v in b.items() if k != "rel_rms_error"}
        assert (a["rel_rms_error"] is None) == (b["rel_rms_error"] is None)
        if a["rel_rms_error"] is not None:
            assert a["rel_rms_error"] == pytest.approx(b["rel_rms_error"], rel=1e-9)
    bad = run("convert", src / "model-00001-of-00002.safetensors", tmp_path / "x.safetensors",
              "--to", "bfloat16", "--jobs", "2", check=False)
    assert bad.returncode == 2 and "--jobs" in bad.stderr


def test_progress_bars_on_a_terminal(tmp_path):
    """On a terminal, convert of a folder shows an overall bar and one per
    shard (tqdm); with output to a pipe, none."""
    pytest.importorskip("tqdm")          # a dependency; a --no-deps install may lack it
    import pty
    src = tmp_path / "big"
    src.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        mst.save(src / f"model-0000{i + 1}-of-00002.safetensors",
                 {f"w{i}": rng.standard_normal(9 << 20).astype(np.float32)})
    mst.save_index(src / "model.safetensors.index.json",
                   {"w0": "model-00001-of-00002.safetensors",
                    "w1": "model-00002-of-00002.safetensors"})
    import fcntl
    import struct
    import termios
    main, sub = pty.openpty()
    # a terminal of 120 columns (a pty starts at 0 x 0, where tqdm draws nothing)
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    out = subprocess.run([sys.executable, "-m", "minifloat", "convert", str(src),
                          str(tmp_path / "o"), "--to", "bfloat16"],
                         stdout=subprocess.PIPE, stderr=sub, timeout=300)
    os.close(sub)
    err = b""
    while True:
        try:
            chunk = os.read(main, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(main)
    assert out.returncode == 0
    text = err.decode("utf-8", "replace")
    assert "big" in text and "model-00001-of-00002.safetensors" in text
    assert "model-00002-of-00002.safetensors" in text and "B/s" in text
    res = run("convert", src, tmp_path / "p", "--to", "bfloat16")
    assert "B/s" not in res.stderr


def _shard_data(path):
    with mst.open(path) as f:
        return sum(f.info(n).end - f.info(n).begin for n in f.keys())


def test_max_shard_size_splits_anew(tmp_path):
    """--max-shard-size: the output is split anew in the input's tensor
    order, each shard at most SIZE of tensor data (a larger tensor alone),
    named as save_pretrained names them, with the index; the tensors are the
    bytes the same convert writes without it."""
    src = tmp_path / "ds"
    _deepseek_folder(src, np.random.default_rng(11))
    run("convert", src, tmp_path / "same", "--to", "bfloat16")
    want = mst.load(tmp_path / "same")
    size = 40_000                 # l.0.proj.weight as bf16 is 120,000 bytes: alone
    res = run("convert", src, tmp_path / "split", "--to", "bfloat16", "--max-shard-size",
              str(size))
    assert "wrote" in res.stdout
    out = tmp_path / "split"
    shards = sorted(n for n in os.listdir(out) if n.endswith(".safetensors"))
    n = len(shards)
    assert n >= 3 and shards == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == shards
    assert index["metadata"]["total_size"] == sum(_shard_data(out / s) for s in shards)
    for s in shards:
        with mst.open(out / s) as f:
            assert f.metadata() == {"format": "pt"}
            assert len(f.keys()) == 1 or _shard_data(out / s) <= size, s
    got = mst.load(out)
    assert list(got) == list(want)                              # the input's order
    for k in want:
        assert got[k].dtype == want[k].dtype
        np.testing.assert_array_equal(np.asarray(got[k]).view(np.uint8),
                                      np.asarray(want[k]).view(np.uint8))
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg
    # units: "5GB" is 10^9 bytes, "2GiB" 2^30; everything in one shard: no index
    run("convert", src, tmp_path / "one", "--to", "bfloat16", "--max-shard-size", "5GB")
    assert sorted(n for n in os.listdir(tmp_path / "one") if "safetensors" in n) == \
        ["model.safetensors"]
    assert checkpoint.parse_size("2GiB") == 2 ** 31 and checkpoint.parse_size("5gb") == 5 * 10 ** 9
    assert checkpoint.parse_size("500MB") == 5 * 10 ** 8 and checkpoint.parse_size(1024) == 1024


def test_max_shard_size_layout_target_keeps_scales_with_weights(tmp_path):
    """bf16 -> deepseek-fp8 split anew: a weight's scale_inv in its shard;
    from a single file the output is a folder with the file's config only."""
    folder = tmp_path / "m"
    folder.mkdir()
    rng = np.random.default_rng(12)
    ts = {f"model.layers.{i}.mlp.up_proj.weight":
          rng.standard_normal((256, 256)).astype(mf.bfloat16) for i in range(3)}
    ts["model.norm.weight"] = np.ones(256, mf.bfloat16)
    mst.save(folder / "model.safetensors", ts)
    (folder / "config.json").write_text(json.dumps({"architectures": ["X"]}))
    (folder / "notes.txt").write_text("not the model's")
    out = tmp_path / "fp8"
    run("convert", folder / "model.safetensors", out, "--to", "deepseek-fp8",
        "--max-shard-size", "70KB")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    wm = index["weight_map"]
    for i in range(3):
        w = f"model.layers.{i}.mlp.up_proj.weight"
        assert wm[w] == wm[w + "_scale_inv"]
    assert len(set(wm.values())) == 3
    assert sorted(os.listdir(out)) == ["config.json", "model-00001-of-00003.safetensors",
                                       "model-00002-of-00003.safetensors",
                                       "model-00003-of-00003.safetensors",
                                       "model.safetensors.index.json"]
    assert json.loads((out / "config.json").read_text())["quantization_config"][
        "quant_method"] == "fp8"
    ref = tmp_path / "ref.safetensors"
    run("convert", folder / "model.safetensors", ref, "--to", "deepseek-fp8")
    want, got = mst.load(ref), mst.load(out)
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]).view(np.uint8),
                                      np.asarray(want[k]).view(np.uint8))


def test_max_shard_size_errors(tmp_path):
    src = tmp_path / "ds"
    _deepseek_folder(src, np.random.default_rng(13))
    bad = run("convert", src, tmp_path / "o", "--to", "bfloat16", "--max-shard-size", "5 apples",
              check=False)
    assert bad.returncode == 2 and "'5 apples'" in bad.stderr and "5GB" in bad.stderr
    assert not (tmp_path / "o").exists()
    bad = run("convert", src, tmp_path / "o", "--to", "bfloat16", "--max-shard-size", "0",
              check=False)
    assert bad.returncode == 2 and "at least one byte" in bad.stderr
    plain = tmp_path / "plain.safetensors"
    mst.save(plain, {"w": np.ones((4, 64), np.float32)})
    bad = run("convert", plain, tmp_path / "o", "--to", "mxfp8_e4m3", "--max-shard-size", "1MB",
              check=False)
    assert bad.returncode == 2 and "--max-shard-size" in bad.stderr
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_jobs_on_shards_of_many_chunks(tmp_path):
    """--jobs 2 with shards whose weights span many chunks, so that the two
    threads convert at the same time: the same bytes as one job (each
    thread has its own scratch buffers)."""
    src = tmp_path / "big"
    src.mkdir()
    rng = np.random.default_rng(14)
    wm = {}
    for i in (1, 2):
        codes, s = _fp8_block(rng, 1024, 1536)
        sh = f"model-0000{i}-of-00002.safetensors"
        mst.save(src / sh, {f"l.{i}.w.weight": codes.view(mf.float8_e4m3fn),
                            f"l.{i}.w.weight_scale_inv": s,
                            f"l.{i}.norm": rng.standard_normal(1 << 19).astype(np.float32)})
        wm.update({f"l.{i}.w.weight": sh, f"l.{i}.w.weight_scale_inv": sh, f"l.{i}.norm": sh})
    mst.save_index(src / "model.safetensors.index.json", wm, {})
    (src / "config.json").write_text(json.dumps(CONFIG))
    for _ in range(2):
        for j in ("1", "2"):
            out = tmp_path / f"o{j}"
            shutil.rmtree(out, ignore_errors=True)
            checkpoint.convert_folder(src, out, "bfloat16", jobs=int(j))
        assert _files(tmp_path / "o2") == _files(tmp_path / "o1")
    # and back to a layout, from the bf16 model
    for j in ("1", "2"):
        checkpoint.convert_folder(tmp_path / "o1", tmp_path / f"q{j}", "deepseek-fp8",
                                  jobs=int(j))
    assert _files(tmp_path / "q2") == _files(tmp_path / "q1")
