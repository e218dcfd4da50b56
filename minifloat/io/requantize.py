"""Float weights into the quantized layouts of the model hubs, tensor by
tensor, as each layout's reference quantizer computes them.

    q = quantizer("compressed-tensors-fp8", dtype="BF16")
    if should_quantize(name, shape, "compressed-tensors-fp8"):
        specs += q.specs(name, shape, read_rows)      # for safetensors.write
    quantization_config("compressed-tensors-fp8", ignore=["lm_head"])

``read_rows(r0, r1)`` returns rows r0:r1 of the float weight as float32
(values exactly those of the source dtype ``dtype``): a 2-D weight [N, K]
gives [r1 - r0, K]; a gpt-oss expert tensor [E, K, N] gives experts r0:r1,
[r1 - r0, K, N].  ``stored(name, shape)`` names the stored tensors
(stored name, safetensors dtype code, shape); ``chunks(name, shape,
read_rows)`` gives each stored tensor's bytes as a lazy iterable, so
``minifloat.io.safetensors.write`` streams them: codes are computed a band
of rows at a time (about a million values; DeepSeek's 128-row block bands),
scales -- small -- are kept in memory.  Whichever stored tensor is written
first, the rows are read at most twice: once for the amax of every block
(and the tensor's amax, where a layout has a global scale), once for the
codes.

The references follow, layout by layout.  Where a reference computes in the
weight's own dtype (compressed-tensors: its observers pass the weight as
the model holds it, bfloat16 or float16, to ``calculate_qparams`` and
``quantize``), the same roundings are made here: the operation in float32,
then rounded to that dtype, as torch's CPU kernels compute a bfloat16 or
float16 operation.

  deepseek-fp8   m.weight F8_E4M3 [N, K] + m.weight_scale_inv F32
                 [ceil(N/128), ceil(K/128)].  transformers
                 integrations/finegrained_fp8.py Fp8Quantize._quantize_one
                 (the quantizer that writes this layout): in float32, per
                 128x128 block s = 448 / amax (1 for an all-zero block;
                 computed as torch does a number over a tensor:
                 float32(1 / amax) * 448),
                 weight_scale_inv = 1 / s, q = e4m3(clamp(w * s, +-448)).
                 Edge blocks of a ragged N or K take the amax of the
                 elements they have (as compressed-tensors' block strategy
                 pads with zeros, which never change an amax); transformers
                 itself leaves a ragged weight unquantized.
  compressed-tensors-fp8   m.weight F8_E4M3 + m.weight_scale [N, 1] in the
                 weight's dtype (compressed-tensors
                 quantization/lifecycle/initialize.py gives scales the
                 observed dtype).  Preset FP8_DYNAMIC (channel strategy):
                 quantization/utils/helpers.py calculate_qparams: s =
                 amax / 448 in the weight's dtype, 0 replaced by that
                 dtype's eps; lifecycle/forward_helpers.py _quantize: q =
                 e4m3(clamp(w / s, +-448)) with w / s in the weight's dtype.
  compressed-tensors-w4a16   m.weight_packed I32 [N, K/8] + m.weight_scale
                 [N, K/128] (weight's dtype) + m.weight_shape I64 [2].
                 Preset W4A16 (int4, group 128, symmetric): s = amax / 7.5
                 in the weight's dtype (bit range 15 / 2), 0 -> eps; q =
                 round-half-even(clamp(w / s, -8, 7)); packed as
                 compressors/pack_quantized/helpers.py pack_to_int32: q + 8,
                 eight a word, element 8j + t at bits 4t of word j.  K must
                 be a multiple of 128 (_process_group refuses others).
  compressed-tensors-nvfp4   m.weight_packed U8 [N, K/2] + m.weight_scale
                 F8_E4M3 [N, K/16] + m.weight_global_scale F32 [1].  Preset
                 NVFP4's weights (TENSOR_GROUP, 16): generate_gparam: g =
                 448 * 6 / max(amax, tiny) in the weight's dtype (torch's
                 reciprocal, then the product; inf or NaN -> 1), then
                 float32; calculate_qparams: s = e4m3(clamp(g *
                 (amax_b / 6 in the weight's dtype), +-448)), 0 -> 0.125
                 (e4m3's eps); compressors/nvfp4 quantize_and_pack_fp4: q =
                 e2m1(clamp(w / (float32(s) / g), +-6)) rounded to nearest
                 even (quantization/utils/fp4_utils.py cast_to_fp4), packed
                 two a byte, element 2j in the low nibble.
  modelopt-nvfp4  m.weight U8 [N, K/2] + m.weight_scale F8_E4M3 [N, K/16]
                 + m.weight_scale_2 F32 [].  ModelOpt
                 modelopt/torch/quantization/qtensor/nvfp4_tensor.py
                 NVFP4QTensor: get_weights_scaling_factor_2: s2 =
                 float32(amax) / (6 * 448); get_weights_scaling_factor: s =
                 e4m3(max(amax_b / (6 * s2), 2**-9)), 1 where amax_b / (6 *
                 s2) is 0; quantize: q = _cast_fp4(w / (float32(s) * s2)):
                 sign bit from w / (...) < 0, magnitude rounded to nearest
                 even at the ties 0.25 .. 5 (its searchsorted bounds plus
                 one at 0.75, 1.75, 3.5) and saturated at 6; packed low
                 nibble first.  (An all-zero weight gives s2 = 0 and NaN
                 block scales there too.)
  gpt-oss-mxfp4  experts [E, K, N] (transformers' bf16 gpt-oss layout of
                 mlp.experts.gate_up_proj / down_proj) -> NAME_blocks U8
                 [E, N, K/32, 16] + NAME_scales U8 [E, N, K/32]: per expert
                 the transposed [N, K] quantized along K.  transformers
                 integrations/mxfp4.py quantize_to_mxfp4 calls
                 triton_kernels' downcast_to_mxfp_torch (numerics_details/
                 mxfp.py, DequantScaleRoundingMode.ROUND_UP): X = 2 **
                 ceil(log2(float32(amax / 6))), elements w * (1 / X) rounded
                 to nearest even and saturated at 6 -- minifloat's
                 ``blocks.quantize(.., "mxfp4", scale_rounding="rceil")``,
                 the same scale and elements (not the OCP spec's
                 floor(log2 amax) - 2, which clips up to a quarter of the
                 block's largest values).
"""
import fnmatch
import re

import numpy as np

from .. import _core, blocks as _blocks

__all__ = ["LAYOUTS", "quantizer", "should_quantize", "quantization_config", "config_file",
           "Quantizer"]

#: the target layouts, by the name `minifloat convert --to` takes
LAYOUTS = ("deepseek-fp8", "compressed-tensors-fp8", "compressed-tensors-w4a16",
           "compressed-tensors-nvfp4", "modelopt-nvfp4", "gpt-oss-mxfp4")

_FORMATS = {f["name"]: f["dtype"] for f in _core.formats()}
_E4M3 = np.dtype(_FORMATS["float8_e4m3fn"])
_E2M1 = np.dtype(_FORMATS["float4_e2m1fn"])
#: source dtype code -> the NumPy dtype its arithmetic rounds to
_SOURCE = {"BF16": np.dtype(_FORMATS["bfloat16"]), "F16": np.dtype(np.float16),
           "F32": np.dtype(np.float32)}
#: about this many float32 values per band of rows
_BAND_VALUES = 1 << 20
_F32 = np.float32

#: what each layout needs of the reduction axis K (a multiple of it)
_K_MULTIPLE = {"deepseek-fp8": 1, "compressed-tensors-fp8": 1, "compressed-tensors-w4a16": 128,
               "compressed-tensors-nvfp4": 16, "modelopt-nvfp4": 16, "gpt-oss-mxfp4": 32}

#: modules every layout leaves in the source dtype: embeddings, the output
#: head, norms, MoE routers and gates (their outputs pick experts: the
#: references' recipes never quantize them)
_KEEP = re.compile(r"(^|\.)(embed_tokens|embed|embeddings|wte|wpe|lm_head|router|gate|"
                   r"shared_expert_gate|[a-z_]*norm[a-z_]*)(\.|$)")
_GPT_OSS_EXPERTS = re.compile(r"(^|\.)mlp\.experts\.(gate_up_proj|down_proj)$")


def _layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"unknown target layout {layout!r}; use one of {', '.join(LAYOUTS)}")
    return layout


def _ignored(module, name, patterns):
    for p in patterns or ():
        if p.startswith("re:"):
            if re.match(p[3:], module) or re.match(p[3:], name):
                return True
        elif fnmatch.fnmatchcase(module, p) or fnmatch.fnmatchcase(name, p) or module == p \
                or module.endswith("." + p):
            return True
    return False


def should_quantize(name, shape, layout, ignore_patterns=()):
    """Whether tensor `name` of `shape` is written in `layout`: a Linear
    weight (2-D ``*.weight``; for gpt-oss-mxfp4 only the 3-D expert tensors
    ``mlp.experts.gate_up_proj`` / ``down_proj``) whose reduction axis K is
    a multiple of what the layout needs, not an embedding, norm, router,
    gate or lm_head, and not matched by `ignore_patterns` (module names,
    shell patterns, or ``re:REGEX`` as compressed-tensors' ``ignore``)."""
    _layout(layout)
    shape = tuple(int(d) for d in shape)
    if layout == "gpt-oss-mxfp4":
        if len(shape) != 3 or not _GPT_OSS_EXPERTS.search(name):
            return False
        module, k = name, shape[1]
    else:
        if len(shape) != 2 or not name.endswith(".weight"):
            return False
        module, k = name[:-len(".weight")], shape[1]
        if _KEEP.search(module):
            return False
    if 0 in shape or k % _K_MULTIPLE[layout]:
        return False
    return not _ignored(module, name, ignore_patterns)


# --------------------------------------------------------------------------- configs

#: compressed-tensors' version whose config and layout these follow
_CT_VERSION = "0.20.0"

_CT_WEIGHTS = {
    "compressed-tensors-fp8": ("float-quantized",
                               {"num_bits": 8, "type": "float", "symmetric": True,
                                "group_size": None, "strategy": "channel", "dynamic": False},
                               {"num_bits": 8, "type": "float", "symmetric": True,
                                "group_size": None, "strategy": "token", "dynamic": True}),
    "compressed-tensors-w4a16": ("pack-quantized",
                                 {"num_bits": 4, "type": "int", "symmetric": True,
                                  "group_size": 128, "strategy": "group", "dynamic": False},
                                 None),
    "compressed-tensors-nvfp4": ("nvfp4-pack-quantized",
                                 {"num_bits": 4, "type": "float", "symmetric": True,
                                  "group_size": 16, "strategy": "tensor_group",
                                  "dynamic": False, "scale_dtype": "torch.float8_e4m3fn"},
                                 None),
}

_GPT_OSS_NOT_CONVERTED = ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                          "model.embed_tokens", "lm_head"]


def config_file(layout):
    """Where quantization_config(layout) goes: "config.json" (as its
    ``quantization_config``) or, for ModelOpt, "hf_quant_config.json" (the
    whole file)."""
    return "hf_quant_config.json" if _layout(layout) == "modelopt-nvfp4" else "config.json"


def quantization_config(layout, ignore=None):
    """The quantization config the layout's loaders read: config.json's
    ``quantization_config`` (DeepSeek / transformers FineGrainedFP8,
    compressed-tensors as ``ModelCompressor.update_config`` writes it for
    the preset -- FP8_DYNAMIC, W4A16, NVFP4A16: NVFP4's weights without
    its calibrated input scales --, gpt-oss mxfp4), or for modelopt-nvfp4
    the ``hf_quant_config.json`` dict.  `ignore`: the modules left
    unquantized (names or patterns; None: the layout's usual list)."""
    _layout(layout)
    ign = list(ignore) if ignore is not None else None
    if layout == "deepseek-fp8":
        d = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
             "weight_block_size": [128, 128]}
        if ign:
            d["modules_to_not_convert"] = ign
        return d
    if layout == "gpt-oss-mxfp4":
        return {"quant_method": "mxfp4",
                "modules_to_not_convert": ign if ign is not None else list(_GPT_OSS_NOT_CONVERTED)}
    if layout == "modelopt-nvfp4":
        # loaders (vLLM, TensorRT-LLM) recognise the file by the producer's
        # name; the version says who wrote it rather than claim a ModelOpt
        # release that never ran
        from .. import __version__
        return {"producer": {"name": "modelopt", "version": f"minifloat-{__version__}"},
                "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                                 "group_size": 16,
                                 "exclude_modules": ign if ign is not None else ["lm_head"]}}
    fmt, weights, inputs = _CT_WEIGHTS[layout]
    return {"config_groups": {"group_0": {"targets": ["Linear"], "weights": dict(weights),
                                          "input_activations": dict(inputs) if inputs else None,
                                          "output_activations": None, "format": None}},
            "format": fmt, "global_compression_ratio": None,
            "ignore": ign if ign is not None else ["lm_head"],
            "kv_cache_scheme": None, "moe_sparsity_config": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed",
            "sparsity_config": {}, "transform_config": {}, "version": _CT_VERSION}


# --------------------------------------------------------------------------- arithmetic

def _rounder(dtype):
    """a -> a rounded to the source dtype (float32 back): what a torch
    operation on tensors of that dtype returns."""
    dt = _SOURCE[dtype]
    if dt == np.float32:
        return lambda a: a
    return lambda a: a.astype(dt).astype(_F32)


def _eps(dtype):
    """torch.finfo(dtype).eps: compressed-tensors' replacement of a zero scale."""
    return {"BF16": _F32(2.0 ** -7), "F16": _F32(2.0 ** -10), "F32": _F32(2.0 ** -23)}[dtype]


def _e4m3(a):
    """RNE to float8_e4m3fn (values already clamped to +-448 where the
    reference clamps), as uint8 codes."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(a, _F32).astype(_E4M3).view(np.uint8)


def _e2m1_codes(y):
    """Codes of y clamped to +-6 and rounded to nearest even in e2m1, the
    sign bit set where y < 0 (a -0.0 quotient gives +0, as both
    compressed-tensors' cast_to_fp4 with pack_fp4_to_uint8 and ModelOpt's
    _cast_fp4 give it)."""
    with np.errstate(invalid="ignore"):
        y = np.clip(y, _F32(-6.0), _F32(6.0)) + _F32(0.0)
    return y.astype(_E2M1).view(np.uint8)


def _pack_nibbles(codes):
    """[r, 2m] 4-bit codes -> [r, m] bytes, element 2j in the low nibble."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def _block_amax(x, block):
    """max |x| over each `block` consecutive elements of each row (K a
    multiple of block)."""
    r, k = x.shape
    return np.abs(x).reshape(r, k // block, block).max(axis=2)


def _bands(n, rows):
    for r0 in range(0, n, rows):
        yield r0, min(n, r0 + rows)


# --------------------------------------------------------------------------- quantizers

_NVFP4 = ("compressed-tensors-nvfp4", "modelopt-nvfp4")


class _Job:
    """One weight being written: its scales (computed once, kept), its
    code bands (computed when the codes tensor is written)."""

    def __init__(self, q, name, shape, read_rows):
        self.q, self.name, self.shape, self.read_rows = q, name, tuple(shape), read_rows
        self.scales = None          # stored name -> array, once computed
        self.tensor_scale = None    # NVFP4: the float32 tensor scale (scale_2 / global)

    def ensure_scales(self):
        if self.scales is None:
            self.scales = self.q._scales(self)
        return self.scales

    def scale_chunks(self, stored):
        for a in self.q._scale_chunks(self, stored):
            yield memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))


class Quantizer:
    """The quantizer of one target layout for weights of source dtype
    `dtype` (a safetensors code: "BF16", "F16", "F32")."""

    def __init__(self, layout, dtype="BF16"):
        self.layout = _layout(layout)
        if dtype not in _SOURCE:
            raise ValueError(f"source dtype must be one of {', '.join(_SOURCE)}; got {dtype!r}")
        self.dtype = dtype
        self._rnd = _rounder(dtype)

    def __repr__(self):
        return f"Quantizer({self.layout!r}, dtype={self.dtype!r})"

    # ---- what is stored
    def stored(self, name, shape):
        """[(stored name, safetensors dtype code, shape)] for weight `name`
        of logical `shape`, the codes first."""
        shape = tuple(int(d) for d in shape)
        lay = self.layout
        if lay == "gpt-oss-mxfp4":
            e, k, n = shape
            return [(name + "_blocks", "U8", (e, n, k // 32, 16)),
                    (name + "_scales", "U8", (e, n, k // 32))]
        n, k = shape
        mod = name[:-len(".weight")] if name.endswith(".weight") else name
        if lay == "deepseek-fp8":
            return [(name, "F8_E4M3", (n, k)),
                    (mod + ".weight_scale_inv", "F32", (-(-n // 128), -(-k // 128)))]
        if lay == "compressed-tensors-fp8":
            return [(name, "F8_E4M3", (n, k)), (mod + ".weight_scale", self.dtype, (n, 1))]
        if lay == "compressed-tensors-w4a16":
            return [(mod + ".weight_packed", "I32", (n, -(-k // 8))),
                    (mod + ".weight_scale", self.dtype, (n, -(-k // 128))),
                    (mod + ".weight_shape", "I64", (2,))]
        if lay == "compressed-tensors-nvfp4":
            return [(mod + ".weight_packed", "U8", (n, k // 2)),
                    (mod + ".weight_scale", "F8_E4M3", (n, k // 16)),
                    (mod + ".weight_global_scale", "F32", (1,))]
        return [(name, "U8", (n, k // 2)), (mod + ".weight_scale", "F8_E4M3", (n, k // 16)),
                (mod + ".weight_scale_2", "F32", ())]

    def chunks(self, name, shape, read_rows):
        """stored name -> lazy iterable of the stored bytes (see the module
        docstring for read_rows)."""
        st = self.stored(name, shape)
        job = _Job(self, name, shape, read_rows)
        out = {st[0][0]: self._codes(job, st[0][0])}
        for s, _, _ in st[1:]:
            out[s] = job.scale_chunks(s)
        return out

    def specs(self, name, shape, read_rows):
        """(stored name, code, shape, chunks) for each stored tensor: what
        ``minifloat.io.safetensors.write`` takes."""
        ch = self.chunks(name, shape, read_rows)
        return [(s, code, shp, ch[s]) for s, code, shp in self.stored(name, shape)]

    # ---- bands
    def _rows_per_band(self, k):
        rows = max(1, _BAND_VALUES // max(1, k))
        if self.layout == "deepseek-fp8":
            rows = max(128, rows // 128 * 128)
        return rows

    def _band_iter(self, job):
        n, k = job.shape
        for r0, r1 in _bands(n, self._rows_per_band(k)):
            x = np.asarray(job.read_rows(r0, r1), _F32)
            if x.shape != (r1 - r0, k):
                raise ValueError(f"{job.name}: read_rows({r0}, {r1}) gave shape {x.shape}, "
                                 f"expected {(r1 - r0, k)}")
            yield r0, r1, x

    # ---- the stored scale tensors, each when the writer asks for it
    def _scale_chunks(self, job, stored):
        """The arrays of scale tensor `stored` of `job`, in order.  The
        writer writes a shard's tensors in safetensors' order (by dtype: the
        F32 and I64 ones, then the F8 block scales, the codes last), so a
        scale asked for first must not make every weight of the shard keep
        its scales until its codes: weight_shape is known from the shape;
        NVFP4's tensor scale is one pass (the weight's amax) that keeps one
        number, and its block scales are made band by band, again by the
        codes pass (three reads of the weight, memory of one band).  The
        other layouts' scales are a row or a block row per 128 rows: kept."""
        st = self.stored(job.name, job.shape)
        if self.layout == "compressed-tensors-w4a16" and stored == st[2][0]:
            yield np.array(job.shape, np.int64)
        elif self.layout in _NVFP4 and stored == st[2][0]:
            yield self._nv_tensor_scale(job)[0]
        elif self.layout in _NVFP4:
            for _, _, x in self._band_iter(job):
                yield self._nv_block_scales(job, _block_amax(x, 16))[0]
        else:
            yield job.ensure_scales()[stored]

    def _nv_tensor_scale(self, job):
        """(stored tensor scale, float32 scalar): ModelOpt's weight_scale_2 =
        amax / (6 * 448), or compressed-tensors' weight_global_scale =
        generate_gparam's 448 * 6 / amax (in the weight's dtype), amax over
        the whole weight -- one pass, nothing kept but the number."""
        if job.tensor_scale is None:
            t = _F32(0)
            for _, _, x in self._band_iter(job):
                if x.size:
                    t = np.max([t, np.abs(x).max()])          # NaN propagates, as amax.max()
            t = _F32(t)
            if self.layout == "compressed-tensors-nvfp4":
                rnd = self._rnd
                tiny = {"BF16": np.finfo(np.float32).tiny, "F16": np.finfo(np.float16).tiny,
                        "F32": np.finfo(np.float32).tiny}[self.dtype]
                # `448 * 6 / t` is t.reciprocal() * 2688 in torch, each in the dtype
                with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                    r = rnd(np.array([_F32(1.0) / max(t, _F32(tiny))], _F32))
                    g = rnd((r * _F32(448.0 * 6.0)).astype(_F32))
                g = np.where(np.isfinite(g), g, _F32(1.0)).astype(_F32)
                job.tensor_scale = (g, _F32(g[0]))
            else:
                with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    s2 = _F32(_F32(t) / _F32(6.0 * 448.0))
                job.tensor_scale = (np.array(s2, _F32), s2)
        return job.tensor_scale

    def _nv_block_scales(self, job, amax):
        """(e4m3 block scales, the float32 divisors of the values) of a band's
        block amaxes, given the tensor scale: each reference's arithmetic,
        element by element."""
        ts = self._nv_tensor_scale(job)[1]
        if self.layout == "compressed-tensors-nvfp4":
            rnd = self._rnd
            with np.errstate(over="ignore", invalid="ignore"):
                sc = (ts * rnd(amax / _F32(6.0))).astype(_F32)
                sc = np.clip(sc, _F32(-448.0), _F32(448.0)).astype(_E4M3).astype(_F32)
            sc = np.where(sc == 0, _F32(0.125), sc).astype(_F32)
            return sc.astype(_E4M3), (sc / ts).astype(_F32)     # _quantize: scale / global
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            pbs = (amax / _F32(_F32(6.0) * ts)).astype(_F32)
            pbs = np.where(pbs == 0, _F32(1.0), pbs)
            pbs = np.maximum(pbs, _F32(2.0 ** -9))             # clamp_(min=2**-9); NaN stays
            sc = pbs.astype(_E4M3)
            return sc, (sc.astype(_F32) * ts).astype(_F32)

    # ---- pass 1: scales
    def _scales(self, job):
        lay = self.layout
        st = self.stored(job.name, job.shape)
        if lay == "gpt-oss-mxfp4":
            for _ in self._mx_pass(job, want_codes=False):
                pass
            return job.scales
        n, k = job.shape
        rnd = self._rnd
        if lay == "deepseek-fp8":
            amax = np.zeros(st[1][2], _F32)
            starts = np.arange(0, k, 128)
            for r0, r1, x in self._band_iter(job):
                for b0 in range(r0, r1, 128):
                    col = np.abs(x[b0 - r0:min(r1, b0 + 128) - r0]).max(axis=0)
                    amax[b0 // 128] = np.maximum.reduceat(col, starts)
            # torch computes `448.0 / t` (a Python number over a tensor) as
            # t.reciprocal() * 448.0: two float32 roundings, kept here
            with np.errstate(divide="ignore", over="ignore"):
                r = (_F32(1.0) / np.where(amax > 0, amax, _F32(1))).astype(_F32)
                s = np.where(amax > 0, r * _F32(448.0), _F32(1)).astype(_F32)
                inv = (_F32(1.0) / s).astype(_F32)
            job.fwd = s.astype(_F32)
            return {st[1][0]: inv}
        if lay in _NVFP4:
            raise AssertionError(f"{lay}: its scales are made by _stored_scale and the codes")
        block = {"compressed-tensors-fp8": k, "compressed-tensors-w4a16": 128}[lay]
        amax = np.empty((n, k // block), _F32)
        for r0, r1, x in self._band_iter(job):
            amax[r0:r1] = _block_amax(x, block)
        if lay in ("compressed-tensors-fp8", "compressed-tensors-w4a16"):
            # calculate_qparams: max_val_pos / (bit_range / 2) in the weight's dtype
            s = rnd(amax / _F32(448.0 if lay == "compressed-tensors-fp8" else 7.5))
            s = np.where(s == 0, _eps(self.dtype), s).astype(_F32)
            job.fwd = s
            out = {st[1][0]: s.astype(_SOURCE[self.dtype])}
            if lay == "compressed-tensors-w4a16":
                out[st[2][0]] = np.array([n, k], np.int64)
            return out
        raise AssertionError(f"{lay}: block scales come from the codes pass")

    # ---- pass 2: codes
    def _codes(self, job, stored):
        if self.layout == "gpt-oss-mxfp4":
            yield from self._mx_pass(job, want_codes=True)
            return
        lay, rnd = self.layout, self._rnd
        n, k = job.shape
        if lay not in _NVFP4:
            job.ensure_scales()
            fwd = job.fwd
        for r0, r1, x in self._band_iter(job):
            r = r1 - r0
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                if lay == "deepseek-fp8":
                    y = np.empty_like(x)
                    cb = np.arange(k) // 128
                    for b0 in range(r0, r1, 128):
                        b1 = min(r1, b0 + 128)
                        np.multiply(x[b0 - r0:b1 - r0], fwd[b0 // 128][cb],
                                    out=y[b0 - r0:b1 - r0])
                    c = _e4m3(np.clip(y, _F32(-448.0), _F32(448.0)))
                elif lay == "compressed-tensors-fp8":
                    c = _e4m3(np.clip(rnd(x / fwd[r0:r1]), _F32(-448.0), _F32(448.0)))
                elif lay == "compressed-tensors-w4a16":
                    y = rnd(x.reshape(r, k // 128, 128) / fwd[r0:r1, :, None])
                    qv = np.rint(np.clip(y, _F32(-8.0), _F32(7.0))).astype(np.int64) + 8
                    qv = qv.reshape(r, k // 8, 8) << (np.arange(8, dtype=np.int64) * 4)
                    c = qv.sum(axis=2).astype(np.uint32).view(np.int32)
                else:       # the nvfp4 layouts: w / (per-block float32 scale)
                    _, div = self._nv_block_scales(job, _block_amax(x, 16))
                    y = (x.reshape(r, k // 16, 16) / div[:, :, None]).reshape(r, k)
                    c = _pack_nibbles(_e2m1_codes(y))
            if r1 == n:
                job.fwd = fwd = None      # the divisors are done with; the stored scales stay
            yield memoryview(np.ascontiguousarray(c).reshape(-1).view(np.uint8))

    def _mx_pass(self, job, want_codes):
        """gpt-oss: one expert at a time, [K, N] -> [N, K] quantized along
        K.  Yields the codes when want_codes; keeps the scales in
        job.scales (unless they are there already)."""
        e, k, n = job.shape
        st = self.stored(job.name, job.shape)
        keep = job.scales is None
        scales = np.empty((e, n, k // 32), np.uint8) if keep else None
        for x0 in range(e):
            xe = np.asarray(job.read_rows(x0, x0 + 1), _F32)
            if xe.shape != (1, k, n):
                raise ValueError(f"{job.name}: read_rows({x0}, {x0 + 1}) gave shape "
                                 f"{xe.shape}, expected {(1, k, n)}")
            bs = _blocks.quantize(np.ascontiguousarray(xe[0].T), "mxfp4",
                                  scale_rounding="rceil")
            if keep:
                scales[x0] = bs.scales.view(np.uint8)
            if want_codes:
                yield memoryview(np.ascontiguousarray(bs.data).view(np.uint8).reshape(-1))
        if keep and job.scales is None:
            job.scales = {st[1][0]: scales}


def quantizer(layout, dtype="BF16"):
    """The Quantizer of target `layout` (one of LAYOUTS) for weights whose
    source dtype is `dtype` ("BF16", "F16" or "F32": the references that
    compute in the weight's dtype round there)."""
    return Quantizer(layout, dtype)
