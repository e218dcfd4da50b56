"""What `minifloat inspect` and `minifloat convert` do, as functions.

    inspect_file(path, target=None)   statistics per tensor (and what a cast
                                       to `target` would cost), streaming
    convert_file(src, dst, to, ...)    cast the floating-point tensors of a
                                       checkpoint, streaming, atomically
    convert_folder(src, dst, to, ...)  the same for a model folder or an
                                       index: a new folder (shards, index,
                                       config files)
    write_demo(folder)                 the small demo checkpoint

Everything streams tensor by tensor in chunks of CHUNK values, so memory stays
bounded whatever the checkpoint's size (the file is memory-mapped; its pages
are the operating system's cache, not this process's memory).
"""
import errno
import fnmatch
import json
import math
import os
import re
import shutil
import tempfile
import threading

import numpy as np

from .. import _core
from . import layouts as _layouts, requantize as _requantize, safetensors as st
from .. import blocks as _blocks
from ..casting import cast as _cast, pack as _pack, unpack as _unpack

CHUNK = 1 << 18          # values per chunk: 2 MiB of float64, stays in cache
#: values per chunk on the kernel route (_core._stats: no float64 copies; its
#: threads split a chunk, so chunks must be large enough to share)
KCHUNK = 1 << 20

_FORMATS = {f["name"]: f for f in _core.formats()}
# floating-point codes; F8_E8M0 holds block scales (powers of two), never cast
FLOAT_CODES = {c for c in st.DTYPES if c.startswith(("F", "BF")) and c != "F8_E8M0"}
#: the formats --target may name (every minifloat float format, and NumPy's)
TARGETS = [n for n, f in _FORMATS.items() if f["kind"] == "float"] + ["float16", "float32"]


#: the block-scaled formats --target and --to also take (minifloat.blocks)
BLOCK_TARGETS = list(_blocks.BLOCK_FORMATS)
#: the hub layouts --to writes a model's Linear weights in (minifloat.io.requantize)
LAYOUT_TARGETS = list(_requantize.LAYOUTS)


def _target_dtype(name):
    if name in _FORMATS and _FORMATS[name]["kind"] == "float":
        return _FORMATS[name]["dtype"]
    if name in ("float16", "float32"):
        return np.dtype(name)
    raise ValueError(f"unknown target format {name!r}; one of: {', '.join(TARGETS)}")


#: the formats convert's --to may name: those safetensors can store
#: (float16 and float32 too: what a quantized checkpoint decodes to)
CONVERT_TARGETS = [n for n in TARGETS if st.code_of(_target_dtype(n))]


def _precision_bits(name):
    """Significand bits (with the implicit one) of a float format; of a block
    format, its element's (MXINT8: 7, the bits of a code's magnitude)."""
    if name in _blocks.BLOCK_FORMATS:
        el = _blocks.BLOCK_FORMATS[name].element
        return 7 if el == "int8" else _FORMATS[el]["mant_bits"] + 1
    if name in _FORMATS:
        return _FORMATS[name]["mant_bits"] + 1
    return {"float16": 11, "float32": 24}[name]


def _limits(name):
    from .._finfo import finfo

    fi = finfo(_target_dtype(name))
    return float(fi.smallest_subnormal), float(fi.smallest_normal), float(fi.max)


# --------------------------------------------------------------------------- chunks

def _chunks(f, name, chunk=CHUNK):
    """The tensor's values, flat, in chunks of `chunk` values (views of the
    mapping for byte-sized dtypes; sub-byte ones unpacked chunk by chunk)."""
    info = f.info(name)
    bits = st._BITS[info.dtype]
    if bits >= 8:
        flat = f.get_tensor(name).reshape(-1)
        for i in range(0, flat.size, chunk):
            yield flat[i:i + chunk]
        return
    data, _ = f._raw(name)
    n = math.prod(info.shape)
    step = chunk - chunk % 8                     # 8 values fill whole bytes at 4 and 6 bits
    for i in range(0, n, step):
        m = min(step, n - i)
        b0, b1 = i * bits // 8, (i * bits + m * bits + 7) // 8
        yield _unpack(data[b0:b1], st.DTYPES[info.dtype], (m,))


def _flat_reader(f, name):
    """read(i0, i1): the tensor's values i0..i1 (flat, C order) as an array:
    a view of the mapping for byte-sized dtypes; sub-byte ones unpacked from
    the enclosing whole bytes (8 values fill whole bytes at 4 and 6 bits)."""
    info = f.info(name)
    bits = st._BITS[info.dtype]
    if bits >= 8:
        flat = f.get_tensor(name).reshape(-1)
        return lambda i0, i1: flat[i0:i1]
    data, _ = f._raw(name)
    dt = st.DTYPES[info.dtype]

    def read(i0, i1):
        a0 = i0 - i0 % 8
        b0, b1 = a0 * bits // 8, (i1 * bits + 7) // 8
        return _unpack(data[b0:b1], dt, (i1 - a0,))[i0 - a0:]
    return read


def _block_cuts(n, k, block, chunk):
    """Where _block_chunks cuts n values (rows of k): (i0, i1, rows) for each
    chunk, rows -1 for whole rows, 1 for a run of one row."""
    if k <= chunk:
        step = (chunk // k) * k
        for i in range(0, n, step):
            yield i, min(n, i + step), -1
        return
    piece = max(block, chunk - chunk % block)
    for r in range(0, n, k):
        for j in range(0, k, piece):
            yield r + j, r + min(k, j + piece), 1


def _block_chunks(f, name, block, chunk=None):
    """The tensor's values as 2-D chunks a block format can quantize on their
    own with the result it gives the whole tensor (blocked along the last
    axis): whole rows of the tensor flattened to (rows, last axis), about
    `chunk` values each; a row longer than `chunk` in runs of whole blocks
    (its last run ending with the row's possibly short last block)."""
    chunk = CHUNK if chunk is None else chunk
    shape = f.info(name).shape
    k = shape[-1]
    n = math.prod(shape)
    if n == 0:
        return
    read = _flat_reader(f, name)
    for i0, i1, rows in _block_cuts(n, k, block, chunk):
        yield read(i0, i1).reshape(rows, -1 if rows == 1 else k)


def _block_spans(f, name, block, chunk=None, span=None):
    """The tensor's values as flat runs of whole rows of the flattened
    (rows, last axis) tensor, about `span` values each, cut where
    _block_chunks(f, name, block, chunk) cuts a chunk (so the fused kernel,
    told `chunk`, restarts its windows where that route's chunks start);
    yields (values, k)."""
    chunk = CHUNK if chunk is None else chunk
    span = KCHUNK if span is None else span
    shape = f.info(name).shape
    k = shape[-1]
    n = math.prod(shape)
    if n == 0:
        return
    read = _flat_reader(f, name)
    unit = (chunk // k) * k if k <= chunk else k
    step = unit * max(1, span // unit)
    for i in range(0, n, step):
        yield read(i, min(n, i + step)), k


def _block_chunks_of(x, k, block, chunk):
    """_block_chunks of whole rows `x` (flat, rows of k values) in memory."""
    for i0, i1, rows in _block_cuts(x.size, k, block, chunk):
        yield x[i0:i1].reshape(rows, -1 if rows == 1 else k)


def _finite_amax(f, name, block):
    """The largest finite |x| of a tensor as float32 values (what quantize
    computes for NVFP4's tensor scale), chunk by chunk."""
    amax = 0.0
    for c in _block_chunks(f, name, block, KCHUNK):
        if _kernel_source(c.dtype) and c.dtype != np.float64 or c.dtype == np.float16:
            # float32, float16 and the float formats: read as they are (no
            # float32 copy; the kernel decodes a tile at a time, exactly)
            amax = max(amax, float(_core._finite_amax(np.require(c, requirements="CA"))))
            continue
        x = _as_real(c, "amax")
        if x.dtype != np.float32:
            with np.errstate(over="ignore"):
                x = x.astype(np.float32)          # as quantize converts it
        amax = max(amax, float(_core._finite_amax(x)))
    return amax


#: scratch arrays, one set per thread: convert --jobs runs shards on threads
_scratch = threading.local()


def _buf(key, dtype, n):
    """A reused scratch array of this thread's (fresh allocations each chunk
    cost page faults)."""
    bufs = getattr(_scratch, "bufs", None)
    if bufs is None:
        bufs = _scratch.bufs = {}
    b = bufs.get(key)
    if b is None or b.size < n or b.dtype != dtype:
        b = bufs[key] = np.empty(max(n, CHUNK), dtype)
    return b[:n]


def _as_real(c, key=None):
    """The values of chunk `c` as float32 (exact, for formats up to 32 bits)
    or float64; complex: |x|.  With `key`, into a reused scratch buffer."""
    if c.dtype.kind == "c":
        return np.abs(c.astype(np.complex128))   # complex: statistics of |x|
    dt = np.float64 if c.dtype == np.float64 or c.dtype.kind in "iub" else np.float32
    with np.errstate(invalid="ignore"):    # exact widening; Arm flags signalling NaNs
        if key is None:
            return c.astype(dt)
        out = _buf(key, dt, c.size)
        np.copyto(out, c.reshape(-1), casting="unsafe")
    return out


# --------------------------------------------------------------------------- statistics

#: _core._stats's accumulator slots
(_A_N, _A_NAN, _A_INF, _A_FINITE, _A_MIN, _A_MAX, _A_MEAN, _A_M2, _A_OVER, _A_ZY, _A_ZX, _A_GT,
 _A_ERR2, _A_REF2) = range(14)


def _kernel_source(dt):
    """The chunk dtypes _core._stats reads itself: a float format decoded by
    the kernels, float32 and float64 (NumPy's own float16 -> float32 cast is
    faster than the codec's)."""
    return dt in (np.float32, np.float64) or (dt.name in _FORMATS
                                              and _FORMATS[dt.name]["kind"] == "float"
                                              and dt == _FORMATS[dt.name]["dtype"])


class Stats:
    """Running statistics of one tensor (or a file's totals of the target
    columns).  min/max/mean/std are over the finite values; NaN and inf are
    counted.  Mean and variance merge block by block (Chan et al.).

    The work is one call of the fused kernel _core._stats per chunk
    (src/kernels/stats/common.c: decode to float32 blocks of 2048 values, then
    counts, min, max, float64 sum and centred sum of squares per block, and
    with a target the cast and its error, in the same pass); complex tensors
    (|x|) and histograms (--plot) take the NumPy route, _add_numpy."""

    def __init__(self, target=None, bins=None):
        self.n = self.nan = self.inf = self.finite = 0
        self.min = math.inf
        self.max = -math.inf
        self.mean = 0.0
        self.m2 = 0.0
        self.target = target
        self.block = target in _blocks.BLOCK_FORMATS
        if target is not None:
            self.tdtype = None if self.block else _target_dtype(target)
            self.lossy_rel = 2.0 ** (-_precision_bits(target) / 2)
        self.over = self.ftz = self.lossy = 0
        self.err2 = self.ref2 = 0.0
        self.bins = bins
        self.hist = None if bins is None else np.zeros(len(bins) - 1, np.int64)
        self._acc = None

    def add(self, chunk):
        dt = chunk.dtype
        if self.hist is not None or dt.kind == "c":
            return self._add_numpy(chunk)
        if dt == np.float16:
            c32 = _buf("x16", np.float32, chunk.size)
            with np.errstate(invalid="ignore"):     # signalling NaNs (Arm's FCVT flags them)
                np.copyto(c32, chunk.reshape(-1))
            chunk = c32
        elif not _kernel_source(dt):
            chunk = chunk.astype(np.float64)         # integers and bool: as before, in float64
        x = np.require(chunk.reshape(-1), requirements="CA")
        y = None
        if self.target is not None and x.dtype == np.float64:
            y = _buf("y", np.float64, x.size)
            with np.errstate(over="ignore", invalid="ignore"):
                np.copyto(y, x.astype(self.tdtype), casting="unsafe")
        self._run(x, self.target, y)

    def _block_target(self, global_amax, k, chunk):
        """_core._stats's block target tuple, or None where the fused route
        does not apply (NVFP4 without the tensor's amax)."""
        spec = _blocks.BLOCK_FORMATS[self.target]
        s_enc = s_dec = 1.0
        if spec.kind == _blocks._KIND_NV:
            if global_amax is None:
                return None
            enc = _blocks._nvfp4_encode_scale(global_amax)
            s_enc, s_dec = float(enc), float(np.float32(np.float32(1.0) / enc))
        return (spec.kind, spec.elem_id, spec.block, _blocks._SCALE_MODES["floor"], s_enc,
                s_dec, k, chunk)

    def add_block_rows(self, x, k, global_amax=None, chunk=None):
        """Add whole rows (flat, of k values) of a tensor against the
        block-scaled target, in one pass of the fused kernel: the result of
        add_block on each chunk _block_chunks(..., chunk) would cut from
        them, bit for bit (the rows must start at such a chunk)."""
        chunk = CHUNK if chunk is None else chunk
        dt = x.dtype
        t = self._block_target(global_amax, k, chunk)
        if t is None or not (dt == np.float16 or _kernel_source(dt)) or dt == np.float64:
            for c in _block_chunks_of(x, k, self.block_size(), chunk):
                self.add_block(c, global_amax)
            return
        self._run(np.require(x.reshape(-1), requirements="CA"), t, None)

    def block_size(self):
        return _blocks.BLOCK_FORMATS[self.target].block

    def add_block(self, chunk, global_amax=None, quantized=False):
        """Add a chunk of whole blocks of a tensor (a 2-D array: whole rows of
        the flattened tensor, or a run of whole blocks of one row, the row's
        last block possibly short) against the block-scaled target: quantized
        as minifloat.quantize quantizes the whole tensor (NVFP4: with the
        tensor's `global_amax`), dequantized, and compared in float64 by the
        same kernel and definitions as an element target's cast.  float32,
        float16 and float-format chunks take the fused kernel (one pass:
        _core._stats with a block target) and None is returned; with
        `quantized` (convert, which writes the codes), the chunk is quantized
        and dequantized as arrays and its BlockScaled returned."""
        dt = chunk.dtype
        if not quantized and (dt == np.float16 or _kernel_source(dt)) and dt != np.float64:
            k = chunk.shape[-1] if chunk.ndim else 1
            t = self._block_target(global_amax, k, 0)
            if t is not None and chunk.size:
                self._run(np.require(chunk.reshape(-1), requirements="CA"), t, None)
                return None
        if chunk.dtype == np.float64:
            x = _buf("bx", np.float64, chunk.size)
            np.copyto(x, chunk.reshape(-1))
            q = _blocks.quantize(chunk, self.target, global_amax=global_amax)
            y = _buf("by", np.float64, chunk.size)
            np.copyto(y, q.dequantize().reshape(-1))
        else:
            # formats up to 32 bits are exact in float32: the kernel's float32
            # route with y given (SIMD; |y - x| is exact in float32, y being 0
            # or within a factor 2 of x, as for an element cast)
            x = _buf("bx32", np.float32, chunk.size)
            np.copyto(x, chunk.reshape(-1), casting="unsafe")
            q = _blocks.quantize(x.reshape(chunk.shape), self.target, global_amax=global_amax)
            y = q.dequantize().reshape(-1)
        # with y given, the kernel takes the round trip as it is; the target
        # name only has to be a float format's
        self._run(x, "bfloat16", y)
        return q

    def _run(self, x, target, y):
        if self._acc is None:
            self._acc = np.zeros(14)
            self._acc[_A_MIN], self._acc[_A_MAX] = math.inf, -math.inf
        _core._stats(self._acc, x, target, self.lossy_rel if self.target else 1.0, y)
        a = self._acc
        self.n, self.nan, self.inf, self.finite = (int(v) for v in a[_A_N:_A_FINITE + 1])
        self.min, self.max, self.mean, self.m2 = (float(v) for v in a[_A_MIN:_A_M2 + 1])
        if self.target is not None:
            zy, zx = int(a[_A_ZY]), int(a[_A_ZX])
            self.over = int(a[_A_OVER])
            # flushed: cast(x) == 0 != x (a format with a zero casts 0 to 0)
            self.ftz = zy - zx if zy else 0
            # lost more than half the precision: |cast(x) - x| > r|x|, which
            # also holds for each flushed value, counted as flushed only
            self.lossy = int(a[_A_GT]) - self.ftz
            self.err2, self.ref2 = float(a[_A_ERR2]), float(a[_A_REF2])

    def _add_numpy(self, chunk):
        x = _as_real(chunk, "x")   # float32 (exact) for formats up to 32 bits, else float64
        self.n += x.size
        if not x.size:
            return
        mn, mx = x.min(), x.max()             # NaN propagates: finite min and max, all finite
        if np.isfinite(mn) and np.isfinite(mx):
            xf = x
        else:
            fin = np.isfinite(x)
            nan = int(np.count_nonzero(np.isnan(x)))
            self.nan += nan
            self.inf += x.size - nan - int(np.count_nonzero(fin))
            xf = x[fin]
            if not xf.size:
                return
            mn, mx = xf.min(), xf.max()
        k = xf.size
        x64 = _buf("x64", np.float64, k)
        np.copyto(x64, xf)
        cmean = float(np.sum(x64)) / k
        d = np.subtract(x64, cmean, out=_buf("d", np.float64, k))
        cm2 = float(np.dot(d, d))
        n0 = self.finite
        tot = n0 + k
        delta = cmean - self.mean
        self.mean += delta * k / tot
        self.m2 += cm2 + delta * delta * n0 * k / tot
        self.finite = tot
        self.min = min(self.min, float(mn))
        self.max = max(self.max, float(mx))
        if self.hist is not None:
            nz = np.abs(x64[x64 != 0])
            self.hist += np.histogram(np.log2(nz), self.bins)[0]
        if self.target is not None and chunk.dtype.kind != "c":
            self._add_target(xf, x64)

    def _add_target(self, xf, x64):
        # xf holds the source values exactly (float32 or float64), so one
        # rounding to the target; float32 -> target -> float32 are fast casts
        k = xf.size
        yt = _buf("yt", self.tdtype, k)
        y = _buf("y", xf.dtype, k)
        with np.errstate(over="ignore", invalid="ignore"):
            np.copyto(yt, xf, casting="unsafe")
            np.copyto(y, yt, casting="unsafe")
        ymin, ymax = y.min(), y.max()
        xs, xs64 = xf, x64
        if not (np.isfinite(ymin) and np.isfinite(ymax)):
            yfin = np.isfinite(y)
            self.over += int(k - np.count_nonzero(yfin))
            y, xs, xs64 = y[yfin], xf[yfin], x64[yfin]
        self.ref2 += float(np.dot(xs64, xs64))
        zeros = int(np.count_nonzero(y == 0))
        # flushed: cast(x) == 0 != x (a format with a zero casts 0 to 0)
        ftz = zeros - int(np.count_nonzero(xs == 0)) if zeros else 0
        self.ftz += ftz
        e = np.subtract(y, xs, out=y)          # exact: y is 0 or within a factor 2 of x
        e64 = _buf("d", np.float64, e.size)
        np.copyto(e64, e)
        self.err2 += float(np.dot(e64, e64))
        # lost more than half the precision: |e| > r|x| (in float64, no rounding
        # on the way); that also holds for each flushed value (|e| = |x|),
        # counted as flushed only.  (Boolean selection of the values below the
        # smallest normal was slower than these whole-array passes.)
        ax = np.abs(xs64, out=_buf("ax", np.float64, e.size))
        ax *= self.lossy_rel
        np.abs(e64, out=e64)
        self.lossy += int(np.count_nonzero(np.greater(e64, ax, out=_buf("gt", np.bool_, e.size)))) - ftz

    def merge_target(self, other):
        """Add another tensor's target columns into these (file totals)."""
        self.n += other.n
        self.finite += other.finite
        self.over += other.over
        self.ftz += other.ftz
        self.lossy += other.lossy
        self.err2 += other.err2
        self.ref2 += other.ref2

    @property
    def std(self):
        return math.sqrt(self.m2 / self.finite) if self.finite else math.nan

    def target_dict(self):
        share = (lambda c: c / self.finite) if self.finite else (lambda c: None)
        return {"format": self.target,
                "overflow": share(self.over),
                "flush_to_zero": share(self.ftz),
                "precision_loss": share(self.lossy),
                "rel_rms_error": (math.sqrt(self.err2 / self.ref2) if self.ref2 > 0
                                  else (0.0 if self.finite else None))}

    def as_dict(self):
        ok = self.finite > 0
        d = {"min": self.min if ok else None, "max": self.max if ok else None,
             "mean": self.mean if ok else None, "std": self.std if ok else None,
             "nan": self.nan, "inf": self.inf}
        if self.target is not None:
            d["target"] = self.target_dict()
        return d


def inspect_file(path, target=None, progress=None, bins=None):
    """Statistics of every tensor of a safetensors file (or index), streaming.

    Returns a dict: path, metadata, tensors (a list of dicts: name, dtype (the
    safetensors code), numpy_dtype, shape, elements, bytes, min, max, mean,
    std, nan, inf and, with `target`, target: overflow, flush_to_zero,
    precision_loss (shares of the finite values) and rel_rms_error) and totals.
    `progress(nbytes)` is called as bytes are read.  With `bins` (edges in
    log2|x|), each tensor also has "hist" (counts; not in JSON output).
    """
    block = target in _blocks.BLOCK_FORMATS
    if target is not None and not block:
        _target_dtype(target)
    if block and bins is not None:
        raise ValueError("histograms (--plot) show an element format's range; a block-scaled "
                         "format scales each block: plot with an element --target")
    out = {"path": os.fspath(path), "tensors": []}
    with st.open(path) as f:
        out["metadata"] = f.metadata()
        total = Stats(target)
        nbytes = elements = 0
        lay = _layouts.scan(f, path)
        for kind, name in lay.rows(f.keys()):
            if kind == "logical":
                row, s = _inspect_logical(f, name, target, bins, progress)
                out["tensors"].append(row)
                nbytes += row["bytes"]
                elements += row["elements"] or 0
                if s is not None and s.target is not None:
                    total.merge_target(s)
                continue
            info = f.info(name)
            is_float = info.dtype in FLOAT_CODES          # the casts convert would do
            if block and not info.shape:
                is_float = False                           # 0-d: no axis to cut into blocks
            s = Stats(target if is_float else None, bins)
            size = info.end - info.begin
            npdt = np.dtype(st.DTYPES[info.dtype])
            if block and is_float:
                spec = _blocks.BLOCK_FORMATS[target]
                amax = _finite_amax(f, name, spec.block) if spec.kind == _blocks._KIND_NV else None
                for c, k in _block_spans(f, name, spec.block):
                    s.add_block_rows(c, k, amax)
                    if progress is not None:
                        progress(c.size * st._BITS[info.dtype] // 8)
            else:
                big = bins is None and (_kernel_source(npdt) or npdt == np.float16)
                for c in _chunks(f, name, KCHUNK if big else CHUNK):
                    s.add(c)
                    if progress is not None:
                        progress(c.size * st._BITS[info.dtype] // 8)
            n = math.prod(info.shape)
            row = {"name": name, "dtype": info.dtype, "numpy_dtype": str(st.DTYPES[info.dtype]),
                   "shape": list(info.shape), "elements": n, "bytes": size}
            row.update(s.as_dict())
            if target is not None and not is_float:
                row["target"] = None                       # integers and bool are never cast
            if s.hist is not None:
                row["hist"] = s.hist
            out["tensors"].append(row)
            nbytes += size
            elements += n
            if target is not None and is_float:
                total.merge_target(s)
        out["totals"] = {"tensors": len(out["tensors"]), "elements": elements, "bytes": nbytes}
        if target is not None:
            out["totals"]["target"] = total.target_dict()
    return out


def _inspect_logical(f, g, target, bins, progress):
    """inspect's row of a quantized logical tensor `g` (and its Stats, or
    None where its values are not decoded): the statistics of the decoded
    values, never of the codes."""
    parts = [f.info(n) for n in g.tensors.values()]
    codes = f.info(g.codes)
    size = sum(i.end - i.begin for i in parts)
    shape = g.shape if g.shape is not None else codes.shape
    row = {"name": g.name, "dtype": codes.dtype, "numpy_dtype": str(st.DTYPES[codes.dtype]),
           "shape": list(shape), "elements": math.prod(shape) if g.shape is not None else None,
           "bytes": size, "layout": g.description, "layout_id": g.layout,
           "stored": list(g.tensors.values()), "decoded": g.decoded,
           "bf16_bytes": 2 * math.prod(shape) if g.shape is not None else None}
    if not g.decoded:
        row.update({"min": None, "max": None, "mean": None, "std": None, "nan": None,
                    "inf": None})
        if target is not None:
            row["target"] = None
        if progress is not None:
            progress(size)
        return row, None
    block = target in _blocks.BLOCK_FORMATS
    s = Stats(target, bins)
    if block:
        spec = _blocks.BLOCK_FORMATS[target]
        amax = None
        if spec.kind == _blocks._KIND_NV:
            amax = 0.0
            for c in _layouts.chunks(f, g, KCHUNK):
                amax = max(amax, float(_core._finite_amax(c.reshape(-1))))
        for c in _layouts.chunks(f, g, KCHUNK):
            s.add_block(c, amax)
    else:
        for c in _layouts.chunks(f, g, KCHUNK if bins is None else CHUNK):
            s.add(c)
    if progress is not None:
        progress(size)
    row.update(s.as_dict())
    if s.hist is not None:
        row["hist"] = s.hist
    return row, s


# --------------------------------------------------------------------------- convert

#: the targets torch's .to() saturates (torch 2.12 and later, 2.13 pinned by
#: the tests: float8_e4m3fn clamps to
#: +-448, inf included; float8_e5m2 and float16 overflow to inf, the fnuz
#: formats to NaN -- as ml_dtypes does for every format)
TORCH_SATURATES = ("float8_e4m3fn",)


def saturates(to, saturate):
    """Whether convert clamps out-of-range values of target `to`: `saturate`
    True or False as given, None (the default) as torch's .to() does."""
    return to in TORCH_SATURATES if saturate is None else bool(saturate)


def _target(to, saturate, rounding):
    """Check convert's target and options: (numpy dtype, safetensors code),
    both None for a block format or a layout."""
    if to in LAYOUT_TARGETS:
        if rounding != "nearest" or saturate is not None:
            raise ValueError(f"--to {to}: the layout's quantizer rounds and saturates as its "
                             f"reference does; leave out "
                             f"{'--[no-]saturate' if saturate is not None else '--rounding ' + rounding}")
        return None, None
    if to not in CONVERT_TARGETS + BLOCK_TARGETS:
        raise ValueError(f"--to must be a format safetensors stores: "
                         f"{', '.join(CONVERT_TARGETS + BLOCK_TARGETS)}; got {to!r}")
    if to in _blocks.BLOCK_FORMATS:
        if rounding != "nearest":
            raise ValueError(f"{to} rounds to nearest even only (docs/formats.md); "
                             f"--rounding {rounding} is for element formats")
        if saturate is not None:
            raise ValueError(f"{to} always saturates its elements (never inf or NaN from a "
                             f"finite block); leave out --saturate / --no-saturate")
        return None, None
    tdt = _target_dtype(to)
    if rounding != "nearest" and to not in _FORMATS:
        raise ValueError(f"--to {to} rounds to nearest even only; --rounding {rounding} "
                         f"is for minifloat's formats")
    return tdt, st.code_of(tdt)


def convert_file(src, dst, to, *, saturate=None, rounding="nearest", only=None, seed=None,
                 progress=None, fsync=False, ignore=()):
    """Cast the floating-point tensors of safetensors file `src` to format
    `to` and write `dst` (atomically), streaming chunk by chunk.  Integer and
    bool tensors, and with `only` (a glob on names, e.g. "*.weight") the
    tensors it does not match, are copied unchanged.  A quantized weight (a
    decoded layout, minifloat.io.layouts) is written dequantized under its
    unquantized name, and the file's other tensors as stored.  ``fsync``: see
    `minifloat.safetensors.write`.  Returns a list of dicts
    (name, from, to, rel_rms_error or None where copied) and the overall
    relative RMS error.  A model folder or an index: see convert_folder."""
    tdt, tcode = _target(to, saturate, rounding)
    saturate = saturates(to, saturate) if tdt is not None else False
    src, dst = os.fspath(src), os.fspath(dst)
    if os.path.isdir(src) or str(src).endswith(".json"):
        raise ValueError(f"{src}: convert_file takes one .safetensors file; a model folder or "
                         f"an index is converted to a folder (convert_folder)")
    if os.path.abspath(src) == os.path.abspath(dst) or (
            os.path.exists(dst) and os.path.samefile(src, dst)):
        raise ValueError(f"refusing to overwrite the input {src}; give another output file")
    with st.open(src) as f:
        lay = _layouts.scan(f, src)
        names = list(f.keys())
    _check_quantized(src, lay, to)
    _check_only(src, only, names, lay)
    rows = []
    tot = {"err2": 0.0, "ref2": 0.0}
    if to in _blocks.BLOCK_FORMATS:
        _convert_blocks(src, dst, to, only, rows, tot, progress, fsync)
    elif to in LAYOUT_TARGETS:
        with st.open(src) as f:
            specs = _layout_specs(f, names, to, ignore, only, rows, progress)
            st.write(dst, specs, f.metadata() or None, fsync=fsync)
    else:
        with st.open(src) as f:
            specs = _cast_specs(src, f, names, lay, to, tdt, tcode, saturate, rounding, only,
                                seed, rows, tot, progress)
            st.write(dst, specs, f.metadata() or None, fsync=fsync)
    overall = math.sqrt(tot["err2"] / tot["ref2"]) if tot["ref2"] > 0 else 0.0
    return rows, overall


def _check_only(src, only, names, lay):
    if only is not None and not any(fnmatch.fnmatchcase(n, only)
                                    for n in list(names) + list(lay.groups)):
        raise ValueError(f"{src}: --only {only!r} matches no tensor")


def _cast_specs(src, f, names, lay, to, tdt, tcode, saturate, rounding, only, seed, rows, tot,
                progress):
    """st.write's specs for the tensors `names` of open checkpoint `f` (one
    shard's, or a file's): a quantized logical tensor at its codes' place
    (its scales may sit in another shard), dequantized and cast; every other
    float tensor cast (in a checkpoint without quantized tensors) or copied.
    Appends a row per written tensor to `rows`."""
    base_seed = None if seed is None else int(seed)
    specs = []
    for name in names:
        g = lay.first(name)
        if g is not None:
            if name != g.codes:
                continue                      # written with its codes
            if only is not None and not fnmatch.fnmatchcase(g.name, only):
                for n in g.tensors.values():     # left quantized: copied as stored
                    rows.append({"name": n, "from": f.info(n).dtype, "to": f.info(n).dtype,
                                 "rel_rms_error": None})
                    specs.append((n, f.info(n).dtype, f.info(n).shape,
                                  _copy_chunks(f._raw(n)[0], progress)))
                continue
            row = {"name": g.name, "from": f.info(g.codes).dtype, "to": tcode,
                   "rel_rms_error": None, "layout": g.description,
                   "stored": list(g.tensors.values())}
            rows.append(row)
            specs.append((g.name, tcode, g.shape,
                          _dequant_cast_chunks(f, g, tdt, saturate, rounding, base_seed, row,
                                               tot, progress)))
            continue
        info = f.info(name)
        # in a quantized checkpoint only the quantized weights change:
        # every other tensor is kept as stored (an F32 router bias stays
        # F32, as in the references' dequantized models)
        cast = info.dtype in FLOAT_CODES and not lay and (
            only is None or fnmatch.fnmatchcase(name, only))
        row = {"name": name, "from": info.dtype, "to": tcode if cast else info.dtype,
               "rel_rms_error": None}
        rows.append(row)
        if not cast:
            data, _ = f._raw(name)
            specs.append((name, info.dtype, info.shape, _copy_chunks(data, progress)))
            continue
        n = math.prod(info.shape)
        if st._BITS[tcode] < 8 and (n * st._BITS[tcode]) % 8:
            raise ValueError(f"{src}: tensor {name!r}: {n} values of {to} do not fill whole "
                             f"bytes, which safetensors needs; leave it out with --only")
        chunks = _cast_chunks(f, name, tdt, saturate, rounding, base_seed, row, tot, progress)
        if _Caster.fuses(tdt, rounding, np.dtype(st.DTYPES[info.dtype])) and st._BITS[tcode] >= 8:
            chunks = st.Deferrable(chunks)   # offers its chunks to write()'s _Deferred
        specs.append((name, tcode, info.shape, chunks))
    return specs


#: a model folder's files convert_folder never copies: the checkpoint itself
#: (rewritten) and, once dequantized, ModelOpt's quantization config
_DROPPED_WHEN_DEQUANTIZED = ("hf_quant_config.json",)


def convert_folder(src, dst, to, *, saturate=None, rounding="nearest", only=None, seed=None,
                   progress=None, fsync=False, ignore=(), jobs=1, scheduler=None,
                   on_shard=None, max_shard_size=None):
    """convert_file for a model: `src` a model folder or a sharded
    checkpoint's index .json, `dst` a new folder.  Each shard is converted
    to a shard of the same name (a quantized weight whose scales sit in
    another shard included), the index is rewritten (weight_map,
    metadata.total_size), and the folder's other files are copied:
    config.json with its quantization config removed once dequantized (and
    its dtype set to a 16/32-bit float target), hf_quant_config.json
    dropped.  The folder appears only once complete: it is written under a
    temporary name next to `dst` and renamed (removed on any error or
    interruption).  `dst` must not exist, or be an empty folder.

    jobs: shards converted at once (threads; the kernels release the GIL).
    scheduler: a dask.distributed scheduler address (or a Client): the
    shards run on its workers, which must see `src` and `dst` at the same
    paths (a shared filesystem).  on_shard(path, nbytes): called as each
    shard starts.  max_shard_size: bytes (or a string such as "5GB",
    "500MiB", as transformers' save_pretrained takes): the output is split
    anew, in the input's tensor order, into shards of at most that many
    bytes of tensor data (a tensor larger than that alone in its shard; a
    quantized weight with its scales), named PREFIX-00001-of-0000N.safetensors
    with the index PREFIX.safetensors.index.json (one shard: PREFIX.safetensors,
    no index); `src` may then be a single file.  Returns (rows, overall
    rel. RMS error) as convert_file, rows in shard order."""
    tdt, _ = _target(to, saturate, rounding)
    if max_shard_size is not None:
        max_shard_size = parse_size(max_shard_size)
        if to in _blocks.BLOCK_FORMATS:
            raise ValueError(f"--max-shard-size with --to {to}: block-format outputs keep the "
                             f"input's shards; leave out --max-shard-size")
    src, dst = os.fspath(src), os.fspath(dst)
    entry = st.resolve(src)
    folder = os.path.dirname(os.path.abspath(entry))
    if os.path.exists(dst) and not (os.path.isdir(dst) and not os.listdir(dst)):
        raise FileExistsError(errno.EEXIST, "exists and is not an empty folder; give a new "
                              "folder for the converted model", dst)
    if os.path.abspath(dst) == folder:
        raise ValueError(f"refusing to write into the input folder {folder}; give a new folder")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be a positive number of shards at once; got {jobs!r}")
    with st.open(entry) as f:
        lay = _layouts.scan(f, entry)
        _check_quantized(src, lay, to)
        _check_only(src, only, list(f.keys()), lay)
        shards = f.files()
        sizes = {sh: sum(f.info(n).end - f.info(n).begin for n in f.keys() if f._shard(n) == sh)
                 for sh in shards}
    parent = os.path.dirname(os.path.abspath(dst)) or "."
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(os.path.abspath(dst))
    _remove_stale_folders(parent, base)
    tmp = tempfile.mkdtemp(prefix=f".{base}.{os.getpid()}.", suffix=".tmp", dir=parent)
    opts = dict(src=src, to=to, saturate=saturate, rounding=rounding, only=only, seed=seed,
                ignore=tuple(ignore), fsync=fsync)
    index_name = os.path.basename(entry) if entry.endswith(".json") else None
    try:
        if max_shard_size is None:
            # (entry, shard, out, names, what on_shard shows, its input bytes)
            tasks = [(entry, sh, os.path.join(tmp, os.path.basename(sh)), None, sh, sizes[sh])
                     for sh in shards]
        else:
            tasks, index_name = _resplit(entry, tmp, max_shard_size, opts)
        if scheduler is not None:
            results = _run_on_dask(scheduler, tasks, opts, progress, on_shard)
        else:
            def one(t):
                if on_shard is not None:
                    on_shard(t[4], t[5])
                return convert_shard(*t[:3], names=t[3], progress=progress, **opts)
            if jobs == 1 or len(tasks) == 1:
                results = [one(t) for t in tasks]
            else:
                from concurrent.futures import ThreadPoolExecutor
                with ThreadPoolExecutor(min(jobs, len(tasks))) as ex:
                    results = list(ex.map(one, tasks))
        rows, tot, weight_map, total = [], {"err2": 0.0, "ref2": 0.0}, {}, 0
        for t, (r, tt, wm) in zip(tasks, results):
            rows += r
            tot["err2"] += tt["err2"]
            tot["ref2"] += tt["ref2"]
            for n, nbytes in wm.items():
                weight_map[n] = os.path.basename(t[2])
                total += nbytes
        if index_name is not None:
            meta = _json_file(entry).get("metadata") if entry.endswith(".json") else None
            meta = {k: v for k, v in meta.items() if k != "total_size"} \
                if isinstance(meta, dict) else {}
            meta["total_size"] = total
            st.save_index(os.path.join(tmp, index_name), weight_map, meta)
        _copy_model_files(folder, tmp, entry, shards, to, bool(lay), ignore,
                          entry_is_file=not (os.path.isdir(src) or src.endswith(".json")))
        if os.path.isdir(dst):
            os.rmdir(dst)                 # empty (checked above)
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    overall = math.sqrt(tot["err2"] / tot["ref2"]) if tot["ref2"] > 0 else 0.0
    return rows, overall


def convert_shard(entry, shard, out, *, src, to, saturate=None, rounding="nearest", only=None,
                  seed=None, ignore=(), fsync=False, progress=None, names=None):
    """One shard of convert_folder: the tensors of `shard` (a file of the
    checkpoint `entry` opens: its index, or the file itself) converted into
    `out`, reading a quantized weight's scales from whichever shard holds
    them.  names: the tensors to write (in this order) where not the
    shard's own (a new split: `shard` then only gives the metadata).
    Returns (rows, {"err2", "ref2"}, {written name: nbytes}).  A plain
    function of paths, so a dask worker can run it."""
    rows, tot = [], {"err2": 0.0, "ref2": 0.0}
    if to in _blocks.BLOCK_FORMATS:
        _convert_blocks(shard, out, to, only, rows, tot, progress, fsync)
    else:
        with st.open(entry) as f, st.open(shard) as sf:
            lay = _layouts.scan(f, entry)
            mine = names if names is not None else [n for n in f.keys() if f._shard(n) == shard]
            meta = sf.metadata()
            specs = _specs(f, lay, mine, src=src, to=to, saturate=saturate, rounding=rounding,
                           only=only, seed=seed, ignore=ignore, rows=rows, tot=tot,
                           progress=progress)
            st.write(out, specs, meta or None, fsync=fsync)
    with st.open(out) as o:
        written = {n: o.info(n).end - o.info(n).begin for n in o.keys()}
    return rows, tot, written


def _specs(f, lay, names, *, src, to, saturate, rounding, only, seed, ignore, rows, tot,
           progress):
    """st.write's specs for the tensors `names` of open checkpoint `f`
    converted to `to` (lazy: nothing is read until the chunks are)."""
    if to in LAYOUT_TARGETS:
        return _layout_specs(f, names, to, ignore, only, rows, progress)
    tdt, tcode = _target(to, saturate, rounding)
    saturate = saturates(to, saturate) if tdt is not None else False
    return _cast_specs(src, f, names, lay, to, tdt, tcode, saturate, rounding, only, seed, rows,
                       tot, progress)


_SIZE_UNITS = {"": 1, "B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
               "KIB": 2 ** 10, "MIB": 2 ** 20, "GIB": 2 ** 30, "TIB": 2 ** 40}


def parse_size(size):
    """Bytes of a shard size: an int, or a string "5GB" (10^9), "500MiB"
    (2^20), "2048" -- the units transformers' max_shard_size takes, any case."""
    if isinstance(size, int) and not isinstance(size, bool):
        n = size
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]I?B|B)?\s*", str(size), re.IGNORECASE)
        if m is None:
            raise ValueError(f"--max-shard-size {size!r} is not a size: give bytes or a number "
                             f"with a unit (e.g. 5GB, 500MB, 2GiB)")
        n = int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").upper()])
    if n < 1:
        raise ValueError(f"--max-shard-size {size!r}: a shard holds at least one byte")
    return n


def _resplit(entry, tmp, max_bytes, opts):
    """convert_folder's tasks for a new split into shards of at most
    `max_bytes` of tensor data: ([(entry, shard for metadata, out path,
    names, out path, input bytes)], index name or None).  Each
    output tensor's size comes from the specs the conversion itself builds
    (not read), so the split is exact."""
    units = []                            # (input name, its shard, output bytes, input bytes)
    with st.open(entry) as f:
        lay = _layouts.scan(f, entry)
        first = f.files()[0]
        for name in f.keys():
            specs = _specs(f, lay, [name], rows=[], tot={"err2": 0.0, "ref2": 0.0},
                           progress=None, **{k: opts[k] for k in (
                               "src", "to", "saturate", "rounding", "only", "seed", "ignore")})
            out_b = 0
            for _, code, shape, chunks in specs:
                out_b += -(-st._BITS[code] * math.prod(shape) // 8)
                if hasattr(chunks, "close"):
                    chunks.close()
            info = f.info(name)
            units.append((name, f._shard(name), out_b, info.end - info.begin))
    groups, cur, cur_b = [], [], 0
    for u in units:
        if cur and u[2] and cur_b + u[2] > max_bytes:
            groups.append(cur)
            cur, cur_b = [], 0
        cur.append(u)
        cur_b += u[2]
    if cur or not groups:
        groups.append(cur)
    base = os.path.basename(entry)
    for suffix in (".safetensors.index.json", ".index.json", ".json", ".safetensors"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    base = base or "model"
    n = len(groups)
    tasks = []
    for i, g in enumerate(groups):
        name = f"{base}.safetensors" if n == 1 else f"{base}-{i + 1:05d}-of-{n:05d}.safetensors"
        out = os.path.join(tmp, name)
        tasks.append((entry, g[0][1] if g else first, out, [u[0] for u in g], out,
                      sum(u[3] for u in g)))
    return tasks, (f"{base}.safetensors.index.json" if n > 1 else None)


def _run_on_dask(scheduler, tasks, opts, progress, on_shard):
    """The shards as tasks of a dask.distributed cluster; results in order."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise ImportError("--scheduler needs dask.distributed: pip install 'dask[distributed]'") \
            from None
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        futs = [client.submit(convert_shard, *t[:3], names=t[3], pure=False, **opts)
                for t in tasks]
        task_of = {f.key: t for f, t in zip(futs, tasks)}
        for fut in as_completed(futs):
            t = task_of[fut.key]
            if on_shard is not None:
                on_shard(t[4], t[5])
            if progress is not None:
                progress(t[5])
        return client.gather(futs)
    finally:
        if client is not scheduler:
            client.close()


def _remove_stale_folders(parent, base):
    """Remove the temporary folders earlier converts to `base` left behind
    when killed outright (SIGKILL, a power cut: no handler runs): hidden
    ``.BASE.PID.*.tmp`` folders whose process is gone.  A folder of a
    process still running (another convert) is left alone."""
    pat = re.compile(re.escape(f".{base}.") + r"(\d+)\.[^/]*\.tmp")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for e in entries:
        m = pat.fullmatch(e.name)
        if not m or not e.is_dir(follow_symlinks=False):
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
            continue                      # alive (or not ours to signal): keep
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue
        shutil.rmtree(e.path, ignore_errors=True)


def _json_file(path):
    with open(path, "rb") as fh:
        d = json.loads(fh.read().decode("utf-8"))
    return d if isinstance(d, dict) else {}


def _copy_model_files(folder, out, entry, shards, to, dequantized, ignore=(), entry_is_file=False):
    """The model folder's other top-level files (config, tokenizer,
    generation config, README, ...) into `out`; config.json rewritten for
    the converted weights (and, for a layout target, its quantization config
    written: into config.json, or ModelOpt's hf_quant_config.json)."""
    skip = {os.path.basename(entry)} | {os.path.basename(s) for s in shards}
    if to in LAYOUT_TARGETS:
        qcfg = _requantize.quantization_config(to, ignore=list(ignore) or None)
        where = _requantize.config_file(to)
        if where == "hf_quant_config.json":
            _write_json(os.path.join(out, where), qcfg)
            skip.add(where)
    for e in sorted(os.scandir(folder), key=lambda e: e.name):
        if e.name in skip or e.name.endswith(".safetensors") or not e.is_file():
            continue
        if e.name.endswith(".safetensors.index.json"):
            continue
        if entry_is_file and e.name != "config.json":
            continue                  # a lone file's folder is not the model's: its config only
        if dequantized and e.name in _DROPPED_WHEN_DEQUANTIZED:
            continue
        if e.name == "config.json":
            try:
                cfg = _json_file(e.path)
            except (OSError, ValueError):
                cfg = None
            if cfg is not None:
                cfg = output_config(cfg, to, dequantized)
                if to in LAYOUT_TARGETS and where == "config.json":
                    cfg["quantization_config"] = qcfg
                _write_json(os.path.join(out, e.name), cfg)
                continue
        shutil.copy2(e.path, os.path.join(out, e.name))


def _write_json(path, d):
    with open(path, "w") as fh:
        json.dump(d, fh, indent=2)
        fh.write("\n")


def _layout_specs(f, names, to, ignore, only, rows, progress):
    """st.write's specs writing the tensors `names` of an unquantized
    checkpoint in layout `to` (minifloat.io.requantize): each Linear weight
    the layout quantizes (and `only` selects, `ignore` does not name) as its
    stored tensors, computed by the layout's reference rule; every other
    tensor as stored."""
    specs = []
    for name in names:
        info = f.info(name)
        if (info.dtype in ("BF16", "F16", "F32") and (only is None or fnmatch.fnmatchcase(name, only))
                and _requantize.should_quantize(name, info.shape, to, ignore)):
            q = _requantize.quantizer(to, info.dtype)
            x = f.get_tensor(name)

            def read_rows(r0, r1, x=x):
                return np.asarray(x[r0:r1], np.float32)
            parts = q.specs(name, tuple(info.shape), read_rows)
            rows.append({"name": name, "from": info.dtype, "to": to, "rel_rms_error": None,
                         "tensors": {p[0]: p[1] for p in parts}})
            specs += [p[:3] + (_counted(p[3], progress, info, len(parts)),) for p in parts]
            continue
        rows.append({"name": name, "from": info.dtype, "to": info.dtype, "rel_rms_error": None})
        specs.append((name, info.dtype, info.shape, _copy_chunks(f._raw(name)[0], progress)))
    return specs


def _counted(chunks, progress, info, nparts):
    """`chunks`, reporting the source tensor's bytes to `progress` (its
    share for each of the `nparts` stored tensors) once written."""
    yield from chunks
    if progress is not None:
        progress((info.end - info.begin) // nparts)


def output_config(cfg, to, dequantized):
    """config.json for the converted model: without its quantization config
    (transformers' "quantization_config", MLX's "quantization") once
    dequantized, and with its dtype ("dtype" / "torch_dtype") the target's
    when the target is a 16/32-bit float."""
    cfg = dict(cfg)
    if dequantized:
        cfg.pop("quantization_config", None)
        cfg.pop("quantization", None)
    if to in ("bfloat16", "float16", "float32"):
        for key in ("dtype", "torch_dtype"):
            if key in cfg:
                cfg[key] = to
    return cfg


#: the targets a decoded quantized tensor may be converted to today
DEQUANT_TARGETS = ("bfloat16", "float16", "float32")


def _check_quantized(src, lay, to):
    """Refuse what convert cannot do right with a quantized checkpoint: a
    layout whose values it does not decode (it would cast codes and scales
    as if they were values), or a target other than a 16/32-bit float
    (re-quantizing comes later)."""
    for g in lay.groups.values():
        if not g.decoded:
            what = (f"an {g.description}" if g.layout == "unknown"
                    else f"the quantized layout {g.description}")
            raise ValueError(f"{src}: holds {what} (e.g. tensor {g.name!r}: "
                             f"{' + '.join(g.tensors.values())}); converting this layout is not "
                             f"supported yet (its stored tensors are codes and scales, not "
                             f"values)")
    if lay and to not in DEQUANT_TARGETS:
        g = next(iter(lay.groups.values()))
        raise ValueError(f"{src}: holds quantized tensors ({g.description}, e.g. {g.name!r}); "
                         f"--to {to}: re-quantizing a quantized checkpoint is not supported yet; "
                         f"convert it --to one of {', '.join(DEQUANT_TARGETS)}")


#: gpt-oss MXFP4 -> bfloat16 straight from the codes (off: through float32
#: and the cast's statistics kernel, as every other layout; the tests compare)
_MXFP4_BF16_DIRECT = True


def _dequant_cast_chunks(f, g, tdt, saturate, rounding, seed, row, tot, progress):
    """A decoded quantized tensor's values, cast to `tdt` chunk by chunk
    (one rounding, from the float32 values its layout defines), and the
    cast's relative RMS error against those float32 values."""
    size = sum(f.info(n).end - f.info(n).begin for n in g.tensors.values())
    cast = _Caster(tdt, saturate, rounding, seed, np.dtype(np.float32))
    if _MXFP4_BF16_DIRECT and g.layout == "gpt_oss_mxfp4" and tdt.name == "bfloat16":
        # every MXFP4 value (e2m1 times a power of two, 2^-127 .. 2^127) is
        # a bfloat16 value, so the cast rounds nothing: the kernel writes the
        # bfloat16 codes directly, the error and the counts are 0, and the
        # reference sum (for the overall error) comes from the codes
        # (tests/io/test_unpack_e2m1.py checks every code and scale)
        ref2 = []
        for c in _layouts.gpt_oss_chunks(f, g, CHUNK, bf16_ref2=ref2):
            yield memoryview(c.reshape(-1).view(np.uint8))
        cast.ref2 = math.fsum(ref2)
        cast.finish(row, tot)
        if progress is not None:
            progress(size)
        return
    for k, c in enumerate(_layouts.chunks(f, g, CHUNK)):
        c = c.reshape(-1)
        y = cast(c, k)
        yield memoryview(y.view(np.uint8))
    cast.finish(row, tot)
    if progress is not None:
        progress(size)


def _convert_blocks(src, dst, to, only, rows, tot, progress, fsync=False):
    """convert_file to a block-scaled format: each floating-point tensor of
    ndim >= 1 becomes BlockScaled.to_dict's tensors (name: the codes, name +
    "_scale": the scales, NVFP4 name + "_scale_2": the tensor scale), quantized
    along its last axis, streaming."""
    spec = _blocks.BLOCK_FORMATS[to]
    data_code = "F4" if spec.packed else st.code_of(spec.element_dtype)
    scale_code = st.code_of(spec.scale_dtype)
    with st.open(src) as f:
        meta = dict(f.metadata() or {})
        infos = json.loads(meta.get(_blocks._META_KEY, "{}"))
        specs, taken = [], {}
        for name in f.keys():
            info = f.info(name)
            cast = (info.dtype in FLOAT_CODES and len(info.shape) >= 1
                    and (only is None or fnmatch.fnmatchcase(name, only)))
            row = {"name": name, "from": info.dtype, "to": to if cast else info.dtype,
                   "rel_rms_error": None}
            rows.append(row)
            if not cast:
                taken.setdefault(name, []).append(name)
                data, _ = f._raw(name)
                specs.append((name, info.dtype, info.shape, _copy_chunks(data, progress)))
                continue
            t = _BlockTensor(f, name, spec, data_code, row, tot, progress)
            shape = tuple(info.shape)
            lead, k = shape[:-1], shape[-1]
            nb = -(-k // spec.block)
            parts = [(name, data_code, lead + (nb * spec.block,), t.data_chunks()),
                     (name + "_scale", scale_code, lead + (nb,), t.scale_chunks())]
            if spec.kind == _blocks._KIND_NV:
                parts.append((name + "_scale_2", "F32", (), t.tensor_scale_chunks()))
            row["tensors"] = {p[0]: p[1] for p in parts}
            for p in parts:
                taken.setdefault(p[0], []).append(name)
            specs += parts
            infos[name] = _blocks._checkpoint_info(spec, name, shape, len(shape) - 1)
        for n, owners in taken.items():
            if len(owners) > 1:
                raise ValueError(f"{src}: {to} would write two tensors named {n!r} (from "
                                 f"{' and '.join(map(repr, owners))}: a tensor's scales are "
                                 f"named NAME_scale); choose the tensors to convert with --only, "
                                 f"e.g. --only '*proj.weight'")
        if infos:
            meta[_blocks._META_KEY] = json.dumps(infos, sort_keys=True)
        st.write(dst, specs, meta or None, fsync=fsync)


class _BlockTensor:
    """One tensor converted to a block format, as three streams of chunks
    that st.write consumes one after the other (in its own order): the scale
    stream quantizes the tensor and measures the error; the code stream
    quantizes it again (two passes: buffering either stream would hold a
    whole tensor's codes or scales); NVFP4's tensor scale needs the tensor's
    amax, one more read, done once."""

    def __init__(self, f, name, spec, data_code, row, tot, progress):
        self.f, self.name, self.spec, self.data_code = f, name, spec, data_code
        self.row, self.tot, self.progress = row, tot, progress
        self._amax = None

    def amax(self):
        if self.spec.kind != _blocks._KIND_NV:
            return None
        if self._amax is None:
            self._amax = _finite_amax(self.f, self.name, self.spec.block)
        return self._amax

    def tensor_scale_chunks(self):
        enc = _blocks._nvfp4_encode_scale(self.amax())
        yield np.asarray(np.float32(1.0) / enc, "<f4").reshape(1).view(np.uint8).tobytes()

    def scale_chunks(self):
        s = Stats(self.spec.name)
        amax = self.amax()
        for c in _block_chunks(self.f, self.name, self.spec.block):
            q = s.add_block(c, amax, quantized=True)
            yield memoryview(np.ascontiguousarray(q.scales).view(np.uint8).reshape(-1))
        err2 = s.err2 if s._acc is not None else 0.0
        ref2 = s.ref2 if s._acc is not None else 0.0
        self.row["rel_rms_error"] = math.sqrt(err2 / ref2) if ref2 > 0 else 0.0
        self.tot["err2"] += err2
        self.tot["ref2"] += ref2

    def data_chunks(self):
        bits = st._BITS[self.f.info(self.name).dtype]
        amax = self.amax()
        # float6 codes (one a byte in memory) are packed 4 in 3 bytes in the
        # file (F6_E2M3 / F6_E3M2); float4 codes come packed already (F4)
        sub = not self.spec.packed and st._BITS[self.data_code] < 8
        for c in _block_chunks(self.f, self.name, self.spec.block):
            q = _blocks.quantize(c, self.spec.name, global_amax=amax)
            if self.progress is not None:
                self.progress(c.size * bits // 8)
            d = np.ascontiguousarray(q.data)
            yield memoryview(_pack(d)) if sub else memoryview(d.view(np.uint8).reshape(-1))


def _copy_chunks(data, progress, chunk=1 << 24):
    for i in range(0, data.size, chunk):
        c = data[i:i + chunk]
        if progress is not None:
            progress(c.size)
        yield memoryview(c)


def _cast_chunk(c, tdt, saturate, rounding, seed, k):
    """Chunk `c` (the k-th) cast to `tdt` (a reused scratch buffer), and the
    cast's squared error and squared reference sums over the values finite
    on both sides."""
    s = None
    if rounding == "stochastic":
        s = (np.random.SeedSequence([seed, k]).generate_state(1, np.uint64)[0]
             if seed is not None else None)
    x = _as_real(c, "cx")    # exact; float32 -> target is the fast cast path
    y = _buf("cy", tdt, x.size)
    with np.errstate(over="ignore", invalid="ignore"):
        if tdt.name in _FORMATS:
            _cast(x, tdt, saturate=saturate, rounding=rounding, seed=s, out=y)
        else:                    # float16, float32: NumPy's casts round to nearest even
            if saturate:         # as minifloat's cast saturates: inf included
                big = np.finfo(tdt).max
                np.copyto(y, np.clip(x, -big, big), casting="unsafe")
            else:
                np.copyto(y, x, casting="unsafe")
    yb = _buf("cyb", x.dtype, x.size)
    with np.errstate(invalid="ignore"):
        np.copyto(yb, y, casting="unsafe")
    xs = x
    counts = np.zeros(3, np.int64)         # to inf/NaN, saturated, flushed to zero
    fx = np.isfinite(x)
    counts[2] = np.count_nonzero((yb == 0) & (x != 0) & fx)
    big = _max_finite(tdt)
    with np.errstate(invalid="ignore"):
        counts[1] = np.count_nonzero((np.abs(x) > big) & (np.abs(yb) == big))
    if not all(np.isfinite(v) for v in (x.min(), x.max(), yb.min(), yb.max())):
        fy = np.isfinite(yb)
        counts[0] = np.count_nonzero(fx & ~fy)
        ok = fx & fy
        xs, yb = x[ok], yb[ok]
    e = np.subtract(yb, xs, out=yb)
    w = _buf("c64", np.float64, e.size)
    np.copyto(w, e)
    err2 = float(np.dot(w, w))
    np.copyto(w, xs)
    return y, err2, float(np.dot(w, w)), counts


def _max_finite(tdt):
    from .._finfo import finfo
    return float(finfo(tdt).max)


def _count_row(row, counts):
    """A converted tensor's row gets its overflow and flush counts: values
    that became inf or NaN, values clamped to the largest finite value
    (saturating), nonzero values that became zero."""
    row["to_nonfinite"], row["saturated"], row["flush_to_zero"] = (int(v) for v in counts)


class _Caster:
    """Chunks cast to `tdt`, with the cast's squared error and reference
    sums and its overflow / flush counts over all of them (finish() puts them
    in the row).  Where it can, one pass of the statistics kernel does it:
    decode to float32 blocks, encode (the cast), decode back, error sums,
    writing the codes; its counts come from the blocks that hold a value not
    finite, so a target whose overflow is silent (no inf, no NaN: it always
    clamps), stochastic rounding, or a source the kernels do not read takes
    the general route (_cast_chunk), which counts the clamped values."""

    def __init__(self, tdt, saturate, rounding, seed, source_dtype):
        self.tdt, self.saturate, self.rounding, self.seed = tdt, saturate, rounding, seed
        self.fused = self.fuses(tdt, rounding, source_dtype)
        self.err2 = self.ref2 = 0.0
        self.counts = np.zeros(3, np.int64)
        self.acc = None

    @staticmethod
    def fuses(tdt, rounding, source_dtype):
        """Whether the statistics kernel casts these chunks (else the
        general route)."""
        fmt = _FORMATS.get(tdt.name)
        return (rounding == "nearest" and fmt is not None and (fmt["has_inf"] or fmt["has_nan"])
                and bool(_kernel_source(source_dtype)) and source_dtype != np.float64)

    def __call__(self, c, k):
        """Chunk `c` (the k-th) cast: a reused scratch buffer of this thread's."""
        if self.fused:
            if self.acc is None:
                self.acc = np.zeros(14)
                self.acc[_A_MIN], self.acc[_A_MAX] = math.inf, -math.inf
            acc = self.acc
            before = acc.copy()
            c = np.require(c, requirements="CA")
            dw = st.deferred_writer()
            if dw is None:
                y = _buf("cy", self.tdt, c.size)
                _core._stats(acc, c, self.tdt.name, 1.0, None, y, False)
            else:
                # the chunk before this one may be pending in the other
                # buffer: written here while the threads cast this one
                y = _buf(("cy0", "cy1")[dw.flip], self.tdt, c.size)
                p = dw.take()
                if p is None:
                    _core._stats(acc, c, self.tdt.name, 1.0, None, y, False)
                else:
                    dw.wrote(p, _core._stats(acc, c, self.tdt.name, 1.0, None, y, False, dw.fd, p))
            if not (self.saturate and (acc[_A_OVER] > before[_A_OVER]
                                       or acc[_A_INF] > before[_A_INF])):
                return y
            # the kernel does not clamp: a chunk with a value beyond the
            # range (rare in a checkpoint) is cast again, saturating
            acc[:] = before
        y, e2, r2, n = _cast_chunk(c, self.tdt, self.saturate, self.rounding, self.seed, k)
        self.err2 += e2
        self.ref2 += r2
        self.counts += n
        return y

    def offers(self, y):
        """Whether y is one of the deferred writer's two buffers (the fused
        route's result; the general route's is a scratch of its own)."""
        bufs = getattr(_scratch, "bufs", {})
        return any(b is not None and y.base is b for b in (bufs.get("cy0"), bufs.get("cy1")))

    def finish(self, row, tot):
        err2, ref2, counts = self.err2, self.ref2, self.counts
        if self.acc is not None:
            err2 += float(self.acc[_A_ERR2])
            ref2 += float(self.acc[_A_REF2])
            # the kernel's counts: finite -> inf/NaN, zeros of y and of x
            counts = counts + (int(self.acc[_A_OVER]), 0,
                               int(self.acc[_A_ZY]) - int(self.acc[_A_ZX]))
        _count_row(row, counts)
        row["rel_rms_error"] = math.sqrt(err2 / ref2) if ref2 > 0 else 0.0
        tot["err2"] += err2
        tot["ref2"] += ref2


def _cast_chunks(f, name, tdt, saturate, rounding, seed, row, tot, progress):
    sub = st._BITS[st.code_of(tdt)] < 8
    bits = st._BITS[f.info(name).dtype]
    cast = _Caster(tdt, saturate, rounding, seed, np.dtype(st.DTYPES[f.info(name).dtype]))
    for k, c in enumerate(_chunks(f, name, KCHUNK if cast.fused else CHUNK)):
        y = cast(c, k)
        if progress is not None:
            progress(c.size * bits // 8)
        # y is a scratch buffer: write() consumes each chunk before asking
        # for the next, except one of the deferred writer's two (offered: it
        # stays intact until the next cast has written it)
        mv = memoryview(_pack(y)) if sub else memoryview(y.view(np.uint8))
        dw = st.deferred_writer()
        if dw is not None and not sub and cast.offers(y):
            dw.offer(mv)
            dw.flip ^= 1
        yield mv
    cast.finish(row, tot)


# --------------------------------------------------------------------------- demo

DEMO_NAME = "demo.safetensors"


def demo_tensors():
    """The demo checkpoint's tensors: a tiny transformer-shaped model with
    realistic value ranges (a few outliers, some tiny values), generated
    deterministically (seed 0) so every run shows the same numbers."""
    rng = np.random.default_rng(0)
    bf16 = _FORMATS["bfloat16"]["dtype"]
    t = {}
    t["embed_tokens.weight"] = (rng.standard_normal((512, 64)) * 0.02).astype(np.float32).astype(bf16)
    for i in range(2):
        p = f"layers.{i}."
        q = rng.standard_normal((64, 64)) * 0.05
        q[rng.integers(0, 64, 4), rng.integers(0, 64, 4)] = 600.0   # outliers e4m3fn cannot hold
        t[p + "attn.q_proj.weight"] = q.astype(np.float32).astype(bf16)
        t[p + "mlp.up_proj.weight"] = (rng.standard_normal((128, 64)) * 1e-3).astype(np.float32) \
            .astype(bf16)                                           # tiny: flush to zero in fp8
        t[p + "input_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)
    t["lm_head.weight"] = (rng.standard_normal((512, 64)) * 0.02).astype(np.float32) \
        .astype(_FORMATS["float8_e4m3fn"]["dtype"])
    t["lm_head.weight_scale"] = np.array([1 / 64], np.float32)
    t["position_ids"] = np.arange(128, dtype=np.int64)
    return t


def write_demo(folder):
    """Write the demo checkpoint into `folder`; returns its path."""
    path = os.path.join(folder, DEMO_NAME)
    st.save(path, demo_tensors(), metadata={"format": "pt", "source": "minifloat demo (seed 0)"})
    return path
