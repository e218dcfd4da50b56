"""Block-scaled formats: OCP Microscaling (MXFP8 E4M3/E5M2, MXFP6 E2M3/E3M2,
MXFP4, MXINT8) and NVIDIA's NVFP4.

``minifloat.quantize(x, fmt, axis=-1)`` cuts `axis` into blocks (32 elements
for MX, 16 for NVFP4), gives every block a scale and rounds the elements to
the element format; it returns a :class:`BlockScaled`, which holds the codes,
the scales (and NVFP4's float32 tensor scale) and turns back into float32
with ``.dequantize()`` or ``np.asarray``.  ``block_matmul(a, b)`` (``a @ b``)
multiplies two of them in float32.  The rules, and where each comes from,
are in docs/formats.md ("Block-scaled formats").  The loops are C
(src/kernels/blocks/serial.c: the serial oracle, separate passes, the elements by
the cast kernels; blocks/avx2.c: one pass, eight blocks at a time), tested
bit-exact against each other; the matmul runs minifloat's bfloat16 GEMM.
"""
import json
import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from . import _core

__all__ = ["quantize", "block_matmul", "BlockScaled", "BLOCK_FORMATS"]

_KIND_MX, _KIND_MXINT8, _KIND_NV = 0, 1, 2
_SCALE_MODES = {"floor": 0, "ceil": 1, "even": 2, "rceil": 3}
_FORMAT_ROWS = _core.formats()
_FORMAT_IDS = {f["name"]: i for i, f in enumerate(_FORMAT_ROWS)}


@dataclass(frozen=True)
class _Spec:
    name: str
    kind: int
    element: str          # element format name ("int8" for MXINT8)
    block: int
    scale: str            # scale format name

    @property
    def element_dtype(self):
        return np.dtype(np.int8) if self.element == "int8" else np.dtype(_FORMAT_ROWS[
            _FORMAT_IDS[self.element]]["dtype"])

    @property
    def scale_dtype(self):
        return np.dtype(_FORMAT_ROWS[_FORMAT_IDS[self.scale]]["dtype"])

    @property
    def packed(self):
        """float4 codes are stored two a byte (element 2j in the low nibble)"""
        return self.element == "float4_e2m1fn"

    @property
    def elem_id(self):
        return _FORMAT_IDS.get(self.element, -1)


#: the block-scaled formats quantize() knows, by name
BLOCK_FORMATS = {s.name: s for s in [
    _Spec("mxfp8_e4m3", _KIND_MX, "float8_e4m3fn", 32, "float8_e8m0fnu"),
    _Spec("mxfp8_e5m2", _KIND_MX, "float8_e5m2", 32, "float8_e8m0fnu"),
    _Spec("mxfp6_e2m3", _KIND_MX, "float6_e2m3fn", 32, "float8_e8m0fnu"),
    _Spec("mxfp6_e3m2", _KIND_MX, "float6_e3m2fn", 32, "float8_e8m0fnu"),
    _Spec("mxfp4", _KIND_MX, "float4_e2m1fn", 32, "float8_e8m0fnu"),
    _Spec("mxint8", _KIND_MXINT8, "int8", 32, "float8_e8m0fnu"),
    _Spec("nvfp4", _KIND_NV, "float4_e2m1fn", 16, "float8_e4m3fn"),
]}


def rules_markdown():
    """The "Block-scaled formats" section of docs/formats.md (generated with
    the rest of it by `minifloat formats --markdown`)."""
    lines = ["## Block-scaled formats", "",
             "`minifloat.quantize(x, fmt, axis=-1)` (minifloat/blocks.py, kernels in "
             "src/kernels/blocks/).", "",
             "| format | element | elements per block | scale | tensor scale | bits per element |",
             "|---|---|---|---|---|---|"]
    for sp in BLOCK_FORMATS.values():
        ebits = 8 if sp.element == "int8" else int(_FORMAT_ROWS[sp.elem_id]["bits"])
        stored = 4 if sp.packed else 8
        bpe = stored + 8 / sp.block
        lines.append(f"| {sp.name} | {sp.element} | {sp.block} | {sp.scale} | "
                     f"{'float32' if sp.kind == _KIND_NV else '-'} | {bpe:g} "
                     f"({ebits}-bit codes{', one a byte' if stored == 8 and ebits < 8 else ''}) |")
    lines += ["", _RULES.strip(), ""]
    return "\n".join(lines)


_RULES = """
Each rule, and where it comes from:

- **Blocks** (OCP Microscaling Formats (MX) Specification v1.0, its definition of an MX
  block and its table of concrete formats): k = 32 consecutive elements
  along `axis` share one scale X; the value of element i is X * P_i. NVFP4 (NVIDIA, as
  TransformerEngine and ModelOpt implement it) uses k = 16 and an E4M3 scale.
- **MX scale** (the MX v1.0 conversion algorithm from a vector of floats): shared_exp =
  floor(log2(max_i |V_i|)) - emax_elem, where emax_elem is the exponent of the element
  format's largest power of two (E4M3 8, E5M2 15, E2M3 2, E3M2 4, E2M1 2, MXINT8 0);
  X = 2^shared_exp, clamped to E8M0's range [2^-127, 2^127]. floor(log2) is exact (taken
  from the float32 bits, subnormals included). `scale_rounding` chooses the alternatives
  torchao offers (`ScaleCalculationMode`): `"floor"` (the spec, default); `"ceil"`:
  ceil(log2 amax) - emax_elem; `"even"`: amax's significand first rounded half-up to the
  element's mantissa bits (MXINT8: 6), then floor; `"rceil"`: 2^ceil(log2(amax /
  max_elem)) with the quotient computed in float32 (NVIDIA's cuBLAS MXFP8 recipe). In
  every mode the result is clamped to [2^-127, 2^127] and an all-zero block gets 2^-127
  (code 0x00), as log2(0) = -inf clamps there.
- **Elements** (the same algorithm: V_i / X is quantized to the element format, normal
  numbers beyond the largest normal clamped to it; rounding to nearest even is the
  spec's recommended rounding): V_i / X (exact: X is a power of two) is rounded to nearest, ties to even, and saturated to the element's largest finite
  value (E4M3 448, E5M2 57344, E2M3 7.5, E3M2 28, E2M1 6): never inf or NaN. MXINT8
  (the spec's MXINT8 element: 8-bit two's complement with an implicit scale of 2^-6):
  round(V_i / X *
  64) to nearest even, clamped to [-127, 127] (the symmetric range; -128 is never
  produced). Negative zero keeps its sign in the float elements.
- **Non-finite input**: a block holding an inf or a NaN gets the NaN scale (E8M0 0xFF;
  NVFP4: E4M3 0x7F) and element codes +0, so the whole block dequantizes to NaN (the MX
  spec: when X is NaN every value of the block is NaN, whatever the P_i). The other blocks are
  unaffected. (torchao turns only a NaN amax into the NaN scale; an inf amax gives it a
  finite scale and saturated elements.)
- **NVFP4 two-level scale** (TransformerEngine, transformer_engine/common/cast/nvfp4/
  core_nvfp4.cuh): tensor encode scale S_enc = 448 * 6 / amax in float32, with amax the
  largest finite |x| (or `global_amax=`), FLT_MAX at most, and 1 when amax is 0; block
  scale S_dec_b = e4m3(block_amax * (S_enc * (1/6))), rounded to nearest even and
  saturated at 448; elements x * min(1 / (S_dec_b * S_dec), FLT_MAX) in float32 (S_dec =
  1 / S_enc), rounded to nearest even and saturated at 6. `tensor_scale` is S_dec: value
  = code * S_dec_b * S_dec, computed as (code * S_dec_b) * S_dec (the product of a 2-bit
  and a 4-bit significand is exact; one rounding).
- **Dequantization** is code * X in float32 (exact for MX unless the result is below
  float32's normal range).
- **Padding**: a blocked axis whose length is not a multiple of k is padded with +0 to the
  next multiple; the padding takes no part in any amax (so never changes a scale), its
  codes are +0, and `dequantize()`/`shape` drop it.
- **Storage**: MXFP8 and MXFP6 codes one per byte (FP6 is *not* packed 4-in-3: a
  float6_e2m3fn / float6_e3m2fn array); FP4 codes two per byte, element 2j in the low
  nibble (torch's float4_e2m1fn_x2, safetensors' F4, DLPack code 17 with 2 lanes);
  MXINT8 int8. The blocked axis is stored last (`data`, `scales`) whatever `axis` is.
- **Input**: converted to float32 first.
- **Checkpoints**: `BlockScaled.to_dict(name)` / `from_dict` (tensors NAME, NAME_scale,
  NVFP4's NAME_scale_2, metadata `minifloat.block_scaled`); `minifloat convert IN OUT
  --to FORMAT` writes a whole safetensors checkpoint in that layout and `minifloat inspect
  --target FORMAT` reports the error each tensor would take (blocked along its last axis;
  docs/safetensors.md).
- **Matmul** (`minifloat.block_matmul(a, b)`, or `a @ b`): a is (..., K) quantized along
  K (`axis=-1`), b is (K, N) quantized along K too: `quantize(w, fmt, axis=0)`, or
  `quantize(w_nk, fmt).T` for a weight stored (N, K) as `torch.nn.Linear` keeps it (no
  copy: the same data and scales). Any two formats mix. Both operands are dequantized
  *exactly* into bfloat16 (an MX value is a code of at most 4 significant bits, MXINT8 7,
  times a power of two; an NVFP4 value without its tensor scale is an E2M1 code times an
  E4M3 scale, 2 x 4 bits), K's padding dropped, and multiplied by minifloat's bfloat16
  GEMM with float32 accumulation, so the result is bit-for-bit `np.matmul(A, B,
  dtype=np.float32)` of those bfloat16 arrays, at every kernel level and thread count.
  That GEMM's chain is VDPBF16PS's (src/kernels/gemm/serial.c): k taken in pairs, the
  odd index first, each step one float32 rounding, values and results below 2^-126
  flushed to zero. NVFP4's tensor scales multiply each result once:
  float32(acc x (float64(S_dec,a) x S_dec,b)). A block with the NaN scale makes its
  row of a (column of b) NaN; NaN results are +qNaN. The result is a float32 ndarray of
  shape a.shape[:-1] + b.shape[1:]; the bfloat16 copies take 2(M + N)K bytes while the
  call runs.
"""

_META_KEY = "minifloat.block_scaled"


def _spec_of(fmt):
    if isinstance(fmt, str) and fmt.lower() in BLOCK_FORMATS:
        return BLOCK_FORMATS[fmt.lower()]
    raise ValueError(f"unknown block-scaled format {fmt!r}; use one of "
                     f"{', '.join(BLOCK_FORMATS)}")


def _nvfp4_encode_scale(global_amax):
    """TransformerEngine's S_enc = 448 * 6 / amax in float32 (1 when amax is
    0 or the quotient underflows; FLT_MAX when it overflows)."""
    amax = np.float32(global_amax)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = np.float32(448.0 * 6.0) / amax
    s = np.minimum(s, np.finfo(np.float32).max)
    if amax == 0 or s == 0 or not np.isfinite(s):
        return np.float32(1.0)
    return np.float32(s)


def quantize(x, fmt, *, axis=-1, scale_rounding="floor", global_amax=None):
    """Quantize `x` into the block-scaled format `fmt`.

    fmt:            "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2",
                    "mxfp4", "mxint8" (32-element blocks, E8M0 scales; OCP MX
                    v1.0) or "nvfp4" (16-element blocks of float4_e2m1fn,
                    float8_e4m3fn scales, a float32 tensor scale).
    axis:           the axis cut into blocks (the reduction axis of a matmul:
                    -1 for activations and for (out, in) weights).  A length
                    that is not a multiple of the block is padded with zeros,
                    which never reach a result.
    scale_rounding: how an MX block's power-of-two scale is chosen from the
                    block's amax: "floor" (the spec's 2^(floor(log2 amax) -
                    emax_elem)), "ceil", "even", "rceil" (torchao's names);
                    see docs/formats.md.  NVFP4 has one rule (TransformerEngine's).
    global_amax:    NVFP4 only: the amax the tensor scale is computed from
                    (default: the largest finite |x|), e.g. a calibrated one.

    `x` (an array, or a tensor with __dlpack__: torch, JAX) is converted to
    float32 first (as torchao and TransformerEngine quantize float32 or
    bfloat16 data).
    """
    spec = _spec_of(fmt)
    if scale_rounding not in _SCALE_MODES:
        raise ValueError(f"scale_rounding must be one of {', '.join(map(repr, _SCALE_MODES))}; "
                         f"got {scale_rounding!r}")
    if spec.kind == _KIND_NV and scale_rounding != "floor":
        raise ValueError("nvfp4 scales follow one rule (TransformerEngine's); scale_rounding "
                         "applies to the MX formats only")
    if global_amax is not None and spec.kind != _KIND_NV:
        raise ValueError("global_amax applies to nvfp4 only")
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
        x = _as_numpy(x)           # torch/JAX tensors, bfloat16 included, no copy
    x = np.asarray(x)
    if x.dtype.kind == "c":
        raise TypeError("quantize takes real numbers; got a complex array")
    if x.ndim == 0:
        raise ValueError("quantize needs at least one axis to cut into blocks; got a 0-d array")
    ax = _normalize_axis(axis, x.ndim)
    xm = np.ascontiguousarray(x if ax == x.ndim - 1 else np.moveaxis(x, ax, -1),
                              dtype=np.float32)
    lead = xm.shape[:-1]
    k = xm.shape[-1]
    rows = math.prod(lead)
    x2 = xm.reshape(rows, k)
    B = spec.block
    nb = -(-k // B)
    kp = nb * B
    codes = np.empty((rows, kp // 2 if spec.packed else kp), np.uint8)
    scales = np.empty((rows, nb), np.uint8)
    s_enc = np.float32(1.0)
    tensor_scale = None
    if spec.kind == _KIND_NV:
        amax = _core._finite_amax(x2) if global_amax is None else float(global_amax)
        s_enc = _nvfp4_encode_scale(amax)
        tensor_scale = np.float32(np.float32(1.0) / s_enc)   # TransformerEngine's S_dec
    if rows and k:
        _core._block_quantize(x2, codes, scales, spec.kind, spec.elem_id, B,
                              _SCALE_MODES[scale_rounding], float(s_enc))
    data = codes.reshape(lead + codes.shape[1:])
    if not spec.packed:
        data = data.view(spec.element_dtype)
    return BlockScaled(spec.name, data, scales.reshape(lead + (nb,)).view(spec.scale_dtype),
                       x.shape, ax, tensor_scale)


def block_matmul(a, b):
    """The float32 product ``a @ b`` of two block-scaled tensors (also
    ``a @ b`` on :class:`BlockScaled`), each blocked along the contracted
    axis K:

    a:  shape (..., K), quantized with ``axis=-1`` (activations; any number
        of leading axes),
    b:  shape (K, N) quantized with ``axis=0`` -- ``quantize(w, fmt,
        axis=0)`` -- or (K,); a weight stored (N, K) as PyTorch's Linear
        keeps it, quantized along its last axis, is ``w_q.T`` (no copy).

    Any two formats mix (their block sizes may differ); padding on K never
    enters the product.  Both are dequantized exactly into bfloat16 (an MX
    value has at most 7 significant bits, an NVFP4 value without its tensor
    scale 6) and multiplied by minifloat's bfloat16 GEMM with float32
    accumulation: bit-for-bit ``np.matmul(A, B, dtype=np.float32)`` of those
    bfloat16 arrays, the same at every kernel level and thread count.  For
    NVFP4 operands the tensor scales are applied to each result, once:
    ``float32(acc * (float64(ts_a) * ts_b))``.  A block with the NaN scale
    makes its row of a (column of b) NaN.  Returns a float32 ndarray of
    shape a.shape[:-1] + b.shape[1:].
    """
    if not isinstance(a, BlockScaled) or not isinstance(b, BlockScaled):
        raise TypeError("block_matmul multiplies two BlockScaled tensors (minifloat.quantize); "
                        f"got {type(a).__name__} and {type(b).__name__}: quantize both, or "
                        "multiply q.dequantize() with the array")
    if a.axis != a.ndim - 1:
        raise ValueError(f"block_matmul: a must be blocked along its last axis (K); it is "
                         f"blocked along axis {a.axis} of shape {a.shape}: quantize it with "
                         "axis=-1")
    if b.ndim > 2 or b.axis != 0:
        raise ValueError(f"block_matmul: b must be (K, N) or (K,) blocked along axis 0 (K); "
                         f"got shape {b.shape} blocked along axis {b.axis}: quantize it with "
                         "quantize(w, fmt, axis=0), or pass w_q.T for a (N, K) weight "
                         "quantized along its last axis")
    K = a.shape[-1]
    if b.shape[0] != K:
        raise ValueError(f"block_matmul: a's last axis has {K} elements but b's first has "
                         f"{b.shape[0]} (shapes {a.shape} and {b.shape})")
    lead = a.shape[:-1]
    M = math.prod(lead)
    N = b.shape[1] if b.ndim == 2 else 1
    out = np.empty((M, N), np.float32)
    if M and N:
        sa, sb = a._spec, b._spec
        ac = np.ascontiguousarray(a.data).view(np.uint8).reshape(M, -1)
        asc = np.ascontiguousarray(a.scales).view(np.uint8).reshape(M, -1)
        bc = np.ascontiguousarray(b.data).view(np.uint8).reshape(N, -1)
        bsc = np.ascontiguousarray(b.scales).view(np.uint8).reshape(N, -1)
        ts_a = 1.0 if a.tensor_scale is None else float(a.tensor_scale)
        ts_b = 1.0 if b.tensor_scale is None else float(b.tensor_scale)
        _core._block_matmul(ac, asc, sa.kind, sa.elem_id, sa.block, ts_a,
                            bc, bsc, sb.kind, sb.elem_id, sb.block, ts_b, K, out)
    return out.reshape(lead + b.shape[1:])


def _normalize_axis(axis, ndim):
    return int(normalize_axis_index(axis, ndim))


class BlockScaled:
    """A tensor in a block-scaled format (made by :func:`minifloat.quantize`).

    Attributes (all plain NumPy):
      format        the format's name ("mxfp4", ...)
      shape, ndim   the logical shape (that of the array quantized)
      axis          the blocked axis (non-negative)
      block_size    elements per block (32, NVFP4 16)
      data          the element codes, in blocked layout: the blocked axis
                    moved last and padded to a multiple of block_size.  dtype:
                    the element format (float8_e4m3fn, float8_e5m2,
                    float6_e2m3fn / float6_e3m2fn one code a byte, int8 for
                    MXINT8), or for float4 uint8 holding two codes a byte,
                    element 2j in the low nibble (torch's float4_e2m1fn_x2,
                    safetensors' F4).
      scales        one scale per block, the same leading shape as data:
                    float8_e8m0fnu (MX) or float8_e4m3fn (NVFP4).
      tensor_scale  NVFP4's float32 decode scale (value = code * scale *
                    tensor_scale), else None.
    """

    __array_priority__ = 10

    def __init__(self, format, data, scales, shape, axis, tensor_scale=None):
        spec = _spec_of(format)
        self._spec = spec
        self.format = spec.name
        self.data = data
        self.scales = scales
        self.shape = tuple(int(n) for n in shape)
        self.axis = int(axis)
        self.tensor_scale = None if tensor_scale is None else np.float32(tensor_scale)
        self._check()

    def _check(self):
        spec = self._spec
        if not (0 <= self.axis < max(len(self.shape), 1)) or len(self.shape) == 0:
            raise ValueError(f"axis {self.axis} out of range for shape {self.shape}")
        k = self.shape[self.axis]
        lead = self.shape[:self.axis] + self.shape[self.axis + 1:]
        nb = -(-k // spec.block)
        kp = nb * spec.block
        want_data = lead + ((kp // 2) if spec.packed else kp,)
        want_dt = np.dtype(np.uint8) if spec.packed else spec.element_dtype
        if self.data.shape != want_data or self.data.dtype != want_dt:
            raise ValueError(f"{self.format} data for shape {self.shape}, axis {self.axis} must be "
                             f"{want_dt} of shape {want_data}; got {self.data.dtype} of shape "
                             f"{self.data.shape}")
        if self.scales.shape != lead + (nb,) or self.scales.dtype != spec.scale_dtype:
            raise ValueError(f"{self.format} scales for shape {self.shape}, axis {self.axis} must "
                             f"be {spec.scale_dtype} of shape {lead + (nb,)}; got "
                             f"{self.scales.dtype} of shape {self.scales.shape}")
        if (self.tensor_scale is None) != (spec.kind != _KIND_NV):
            raise ValueError("nvfp4 needs a float32 tensor_scale; the MX formats take none")

    # ---- array-like surface
    @property
    def block_size(self):
        return self._spec.block

    @property
    def element_dtype(self):
        """the element format (float4_e2m1fn for packed float4 data)"""
        return self._spec.element_dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def dtype(self):
        """what dequantize() and np.asarray give: float32"""
        return np.dtype(np.float32)

    @property
    def nbytes(self):
        """bytes of the codes (padding included), the scales and the tensor scale"""
        return int(self.data.nbytes + self.scales.nbytes + (4 if self.tensor_scale is not None
                                                              else 0))

    @property
    def bits_per_element(self):
        return 8.0 * self.nbytes / self.size if self.size else float("nan")

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        ts = "" if self.tensor_scale is None else f", tensor_scale={float(self.tensor_scale)!r}"
        return (f"BlockScaled({self.format!r}, shape={self.shape}, axis={self.axis}, "
                f"block_size={self.block_size}, nbytes={self.nbytes}{ts})")

    def dequantize(self, dtype=np.float32):
        """The values as an ndarray of `dtype` (computed in float32: code x
        scale, exact for MX; NVFP4: (code x scale) x tensor_scale, one
        rounding).  A block with a NaN scale is all NaN."""
        spec = self._spec
        k = self.shape[self.axis]
        lead = self.data.shape[:-1]
        rows = math.prod(lead)
        out = np.empty((rows, k), np.float32)
        if rows and k:
            codes = np.ascontiguousarray(self.data).view(np.uint8).reshape(rows, -1)
            scales = np.ascontiguousarray(self.scales).view(np.uint8).reshape(rows, -1)
            s_dec = 1.0 if self.tensor_scale is None else float(self.tensor_scale)
            _core._block_dequantize(codes, scales, out, spec.kind, spec.elem_id, spec.block, s_dec)
        out = out.reshape(lead + (k,))
        if self.axis != len(lead):
            out = np.ascontiguousarray(np.moveaxis(out, -1, self.axis))
        if np.dtype(dtype) != np.float32:
            return out.astype(dtype)
        return out

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("a BlockScaled tensor cannot be viewed as an ndarray without "
                             "dequantizing (a copy); use copy=None or .dequantize()")
        return self.dequantize(np.float32 if dtype is None else dtype)

    def __getitem__(self, key):
        """Index the axes that are not blocked (integers, slices, ..., None
        not allowed); the blocked axis must be taken whole."""
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = next(i for i, k in enumerate(key) if k is Ellipsis)
            fill = self.ndim - (len(key) - 1)
            key = key[:i] + (slice(None),) * fill + key[i + 1:]
        if len(key) > self.ndim:
            raise IndexError(f"too many indices for a {self.ndim}-d BlockScaled tensor")
        key = key + (slice(None),) * (self.ndim - len(key))
        for k in key:
            if k is None or not (isinstance(k, (slice, int, np.integer))):
                raise IndexError("BlockScaled supports integers and slices on the axes that are "
                                 f"not blocked; got {k!r}")
        if key[self.axis] != slice(None):
            raise IndexError(f"axis {self.axis} is cut into blocks and must be taken whole (:); "
                             "dequantize() first to index it")
        lead_key = key[:self.axis] + key[self.axis + 1:]
        data = self.data[lead_key + (slice(None),)]
        scales = self.scales[lead_key + (slice(None),)]
        new_axis = self.axis - sum(1 for k in key[:self.axis] if not isinstance(k, slice))
        shape = list(data.shape[:-1])
        shape.insert(new_axis, self.shape[self.axis])
        return BlockScaled(self.format, data, scales, tuple(shape), new_axis, self.tensor_scale)

    @property
    def T(self):
        """The transpose of a 2-D tensor (a 1-D one is its own): the same
        data and scales, no copy -- the blocked axis moves with it.  A
        weight w of shape (N, K) quantized along K (axis=-1) gives
        ``quantize(w, fmt).T``, (K, N) blocked along axis 0, the right
        operand of :func:`block_matmul`."""
        if self.ndim == 1:
            return self
        if self.ndim != 2:
            raise ValueError(f"BlockScaled.T is for 1-D and 2-D tensors; this one has shape "
                             f"{self.shape}")
        return BlockScaled(self.format, self.data, self.scales, self.shape[::-1],
                           1 - self.axis, self.tensor_scale)

    def __matmul__(self, other):
        # a TypeError for anything else (not NotImplemented: NumPy would
        # then dequantize this tensor through __array__, silently)
        return block_matmul(self, other)

    def __rmatmul__(self, other):
        raise TypeError(f"{type(other).__name__} @ BlockScaled: block_matmul multiplies two "
                        "BlockScaled tensors; quantize the other operand too, or use "
                        "q.dequantize()")

    # ---- error report
    def sqnr(self, x):
        """Signal to quantization-noise ratio in dB against the original `x`:
        10 log10(sum x^2 / sum (x - dequantized)^2), in float64 (inf when
        exact; NaN where x or the result is not finite)."""
        return self.error_report(x)["sqnr_db"]

    def error_report(self, x):
        """dict: sqnr_db, max_abs_error, mean_abs_error, rms_error,
        rel_rms_error, nonfinite (count of non-finite results), bits_per_element."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.shape:
            raise ValueError(f"x has shape {x.shape}; this tensor has shape {self.shape}")
        y = self.dequantize().astype(np.float64)
        fin = np.isfinite(x) & np.isfinite(y)
        d = (x - y)[fin]
        xs = x[fin]
        sig = float(np.sum(xs * xs))
        noise = float(np.sum(d * d))
        n = max(int(d.size), 1)
        if noise == 0:
            sqnr = float("inf") if d.size else float("nan")
        else:
            sqnr = float(10.0 * np.log10(sig / noise)) if sig > 0 else float("-inf")
        return {
            "format": self.format,
            "sqnr_db": sqnr,
            "max_abs_error": float(np.max(np.abs(d))) if d.size else 0.0,
            "mean_abs_error": float(np.sum(np.abs(d)) / n),
            "rms_error": float(np.sqrt(noise / n)),
            "rel_rms_error": float(np.sqrt(noise / sig)) if sig > 0 else float("nan"),
            "nonfinite": int(np.sum(~np.isfinite(y))),
            "bits_per_element": self.bits_per_element,
        }

    # ---- checkpoints
    def to_dict(self, name="weight"):
        """(tensors, metadata) as a safetensors checkpoint carries them:
        tensors {name: data, name + "_scale": scales} (+ name + "_scale_2":
        the float32 tensor scale, 0-d, for NVFP4: ModelOpt's names), metadata
        {"minifloat.block_scaled": JSON {name: {format, shape, axis, ...}}}.
        float4 data is uint8, two codes a byte (store it as safetensors F4 /
        torch.float4_e2m1fn_x2 or U8); the arrays are views of this tensor's."""
        tensors = {name: self.data, name + "_scale": self.scales}
        if self.tensor_scale is not None:
            tensors[name + "_scale_2"] = np.asarray(self.tensor_scale, np.float32).reshape(())
        info = _checkpoint_info(self._spec, name, self.shape, self.axis)
        return tensors, {_META_KEY: json.dumps({name: info}, sort_keys=True)}

    @classmethod
    def from_dict(cls, tensors, metadata=None, name="weight", *, format=None, shape=None,
                  axis=None):
        """Rebuild from a checkpoint's tensors (NumPy arrays, or torch tensors
        and anything else minifloat.asnumpy reads, torch.float4_e2m1fn_x2
        included; 8-bit codes and scales may also come as uint8 bits).
        The format, shape and axis come from `metadata` (what to_dict wrote)
        or the keywords (for checkpoints written by other tools: format is
        then required; shape defaults to the data's with the blocked axis
        last and unpadded)."""
        info = {}
        if metadata and _META_KEY in metadata:
            info = json.loads(metadata[_META_KEY]).get(name, {})
        fmt = format or info.get("format")
        if fmt is None:
            raise ValueError(f"no block-scaled metadata for {name!r}: pass format=")
        spec = _spec_of(fmt)
        data = _as_numpy(tensors[name])
        scales = _as_numpy(tensors[info.get("scale", name + "_scale")])
        ts_name = info.get("tensor_scale", name + "_scale_2")
        ts = None
        if spec.kind == _KIND_NV:
            ts = np.float32(np.asarray(_as_numpy(tensors[ts_name]), np.float32).reshape(-1)[0])
        if scales.dtype != spec.scale_dtype:
            if scales.dtype.itemsize != 1:
                raise ValueError(f"{name}_scale must hold {spec.scale_dtype} codes; got "
                                 f"{scales.dtype}")
            scales = scales.view(spec.scale_dtype)
        if spec.packed and data.dtype == spec.element_dtype:
            # one float4 code a byte (e.g. minifloat.asnumpy of a torch
            # float4_e2m1fn_x2 tensor: a trailing axis of the 2 lanes): pack
            if data.ndim == scales.ndim + 1 and data.shape[-1] == 2:
                data = data.reshape(data.shape[:-2] + (-1,))
            c = np.ascontiguousarray(data).view(np.uint8) & 0xF
            data = (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)
        if spec.packed or spec.element == "int8":
            want = np.uint8 if spec.packed else np.int8
            if data.dtype != want:
                if data.dtype.itemsize != 1:
                    raise ValueError(f"{name} must hold bytes; got {data.dtype}")
                data = data.view(want)
        elif data.dtype != spec.element_dtype:
            if data.dtype.itemsize != 1:
                raise ValueError(f"{name} must hold {spec.element_dtype} codes; got {data.dtype}")
            data = data.view(spec.element_dtype)
        if axis is None:
            axis = info.get("axis")
        if shape is None:
            shape = info.get("shape")
        if shape is None:
            k = data.shape[-1] * (2 if spec.packed else 1)
            shape = data.shape[:-1] + (k,)
            axis = len(shape) - 1 if axis is None else axis
        if axis is None:
            axis = len(shape) - 1
        return cls(spec.name, data, scales, tuple(shape), _normalize_axis(axis, len(shape)), ts)

    # ---- DLPack
    def dlpack_parts(self):
        """{"data", "scales"[, "tensor_scale"]}: objects with __dlpack__ for
        the parts, no copies.  float4 data goes out as DLPack's
        kDLFloat4_e2m1fn (code 17), bits 4, lanes 2: one byte holding two
        codes, element 2j in the low nibble, as torch.float4_e2m1fn_x2."""
        from .exchange import DLPackExporter
        parts = {}
        if self._spec.packed:
            parts["data"] = _Float4x2Exporter(np.ascontiguousarray(self.data))
        else:
            parts["data"] = DLPackExporter(self.data)
        parts["scales"] = DLPackExporter(self.scales)
        if self.tensor_scale is not None:
            parts["tensor_scale"] = np.asarray(self.tensor_scale, np.float32).reshape(())
        return parts


def _checkpoint_info(spec, name, shape, axis):
    """The metadata entry of one block-scaled tensor `name` (to_dict's, and
    `minifloat convert --to <block format>`'s): format, shape, axis,
    block_size, element, the scale tensor's name (and the tensor scale's)."""
    info = {"format": spec.name, "shape": [int(n) for n in shape], "axis": int(axis),
            "block_size": spec.block, "element": spec.element, "scale": name + "_scale"}
    if spec.kind == _KIND_NV:
        info["tensor_scale"] = name + "_scale_2"
    return info


class _Float4x2Exporter:
    """__dlpack__ of a uint8 array as (kDLFloat4_e2m1fn, 4 bits, 2 lanes)."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _core._dlpack_export_fp4x2(self.array, stream, max_version, dl_device, copy)


def _as_numpy(a):
    if isinstance(a, np.ndarray):
        return a
    from .exchange import asnumpy
    return asnumpy(a)
