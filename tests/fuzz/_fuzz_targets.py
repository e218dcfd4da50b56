"""Fuzz targets, shared by the coverage-guided fuzzer (fuzz/fuzz.py,
atheris) and the regression tests (tests/test_fuzz_regressions.py, which
replay every input under tests/fuzz_corpus/).

Each target takes bytes and either returns or raises one of the exceptions
NumPy raises for bad input (``ALLOWED``).  Anything else - another exception,
a crash, an AddressSanitizer report, a deleter that ran twice or never - is a
finding.  The byte reader is our own (not atheris's FuzzedDataProvider) so
that the corpus replays without atheris.
"""
import ctypes
import io
import struct
import tokenize
import zipfile

import numpy as np

import _dlpack_producer
import minifloat as mf
from minifloat import _core

# what a user may see for bad input: NumPy's kinds of exception
ALLOWED = (BufferError, ValueError, TypeError, OverflowError, MemoryError, EOFError, OSError,
           zipfile.BadZipFile)


class Reader:
    """Draws values from fuzzed bytes; zeros once they run out."""

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def take(self, n):
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b + bytes(n - len(b))

    def uint(self, nbytes):
        return int.from_bytes(self.take(nbytes), "little")

    def sint(self, nbytes):
        return int.from_bytes(self.take(nbytes), "little", signed=True)

    def flag(self):
        return self.uint(1) & 1

    def pick(self, seq):
        return seq[self.uint(1) % len(seq)]

    def rest(self):
        b = self.data[self.pos:]
        self.pos = len(self.data)
        return b


# ---------------------------------------------------------------------------
# DLPack importer
# ---------------------------------------------------------------------------

_FORMAT_CODES = sorted({(f["dlpack_code"], f["dlpack_bits"]) for f in _core.formats()})
_CODES = [0, 1, 2, 4, 5, 6] + [c for c, _ in _FORMAT_CODES]
_BITS = [1, 2, 4, 6, 8, 16, 32, 64, 128]
_DEVICES = [(1, 0), (1, 0), (1, 0), (3, 0), (13, 0), (2, 0), (2, 1), (11, 0), (14, 0), (1, 7)]
_BIG = [2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, -(2**63), -(2**62), -(2**31), -1]
_MAX_ELEMENTS = 1 << 14     # honest tensors larger than this are not read
_MAX_BYTES = 1 << 16

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


def _i64(r):
    """A shape/stride/offset value: mostly small, sometimes at the edges."""
    kind = r.uint(1)
    if kind < 200:
        return kind % 5
    if kind < 230:
        return -(kind % 4) - 1
    if kind < 245:
        return r.pick(_BIG)
    return r.sint(8)


def _storage(code, bits):
    """(storage itemsize, DLPack sub-byte bit width or 0), or None if unknown."""
    res = _core._dtype_from_dlpack(code, bits)
    if res is None:
        return None
    dt, subbits = res
    return np.dtype(dt).itemsize, subbits


def _extent(shape, strides, elem_bytes, byte_offset, bits, lanes, packed):
    """[lo, hi) bytes from the data pointer that the tensor claims (the DLPack
    spec's arithmetic, in Python integers), and the element count."""
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return 0, 0, 0
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    lo_e = sum(min(0, (s - 1) * st) for s, st in zip(shape, strides))
    hi_e = sum(max(0, (s - 1) * st) for s, st in zip(shape, strides))
    if packed:
        lo_bit = byte_offset * 8 + lo_e * lanes * bits
        hi_bit = byte_offset * 8 + (hi_e * lanes + lanes) * bits
        return lo_bit // 8, -(-hi_bit // 8), n
    return byte_offset + lo_e * elem_bytes, byte_offset + (hi_e + 1) * elem_bytes, n


class _Producer:
    """An object with __dlpack__/__dlpack_device__ handing out a capsule."""

    def __init__(self, capsule, device, old):
        self.capsule, self.device, self.old = capsule, device, old

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        if self.old and kwargs:
            raise TypeError("old producer: only stream")
        cap, self.capsule = self.capsule, None
        return cap


def check_dlpack(data):
    """One DLPack capsule built from the bytes, imported by minifloat.from_dlpack."""
    r = Reader(data)
    versioned = r.flag()
    mode = r.uint(1)
    ndim_true = mode % 5 if mode < 200 else (mode % 65 if mode < 250 else None)
    if ndim_true is None:
        ndim_true = 0
        ndim = r.pick([-1, 65, 66, 2**31 - 1, -(2**31), 64, 33])
    else:
        ndim = ndim_true
    shape = [_i64(r) for _ in range(min(ndim_true, 64))]
    shape_null = r.uint(1) >= 250
    strides = None if r.uint(1) < 100 else [_i64(r) for _ in range(len(shape))]
    code = r.pick(_CODES) if r.uint(1) < 240 else r.uint(1)
    bits = r.pick(_BITS) if r.uint(1) < 240 else r.uint(1)
    lk = r.uint(1)
    lanes = 1 if lk < 200 else (r.pick([0, 2, 3, 4, 8]) if lk < 250 else r.uint(2))
    device = r.pick(_DEVICES) if r.uint(1) < 250 else (r.sint(4), r.sint(4))
    ok = r.uint(1)
    byte_offset = ok % 8 if ok < 230 else r.pick([2**63 - 1, 2**63, 2**64 - 1, 2**40])
    flags = r.uint(1) if r.uint(1) < 240 else r.uint(8)
    version = (1, r.uint(1) % 6) if r.uint(1) < 245 else (r.uint(4), r.uint(4))
    with_deleter = r.uint(1) < 240
    copy = r.pick([None, None, True, False])
    device_kw = r.pick([None, None, None, "cpu"])
    via = r.uint(1) % 4      # 0,1: capsule; 2: producer object; 3: old producer
    null_data = r.uint(1) >= 230
    fill = r.rest()

    # which byte range would be read, and is it small enough to provide?
    st = _storage(code, bits)
    honest = False
    lo = hi = n = 0
    if st is not None and not shape_null and 0 < lanes and all(s >= 0 for s in shape) \
            and ndim == ndim_true:
        itemsize, subbits = st
        padded = versioned and (flags & 4)
        packed = bool(subbits) and not padded
        lo, hi, n = _extent(shape, strides, itemsize * lanes, byte_offset, bits, lanes, packed)
        honest = n <= _MAX_ELEMENTS and hi - lo <= _MAX_BYTES
    if not honest:
        copy = False           # a lying tensor must not be read: only validated
    buf = None
    address = 0
    if not null_data:
        size = max(hi - lo, 1) if honest else 16
        buf = _libc.malloc(size)
        chunk = (fill * (size // max(len(fill), 1) + 1))[:size] if fill else bytes(size)
        ctypes.memmove(buf, chunk, size)
        address = buf - lo if honest else buf
        address %= 2**64

    producer = _dlpack_producer.load()     # the test-only producer (tests/dlpack_producer/)
    before = producer.deleter_stats()["calls"]
    kw = dict(shape=None if shape_null else tuple(shape),
              strides=None if strides is None else tuple(strides), ndim=ndim,
              dtype=(code, bits, lanes), device=device, byte_offset=byte_offset,
              versioned=bool(versioned), flags=flags, deleter=with_deleter, address=address)
    if versioned:
        kw["version"] = version
    try:
        cap = producer.make_capsule(**kw)
    except (OverflowError, ValueError):
        if buf is not None:
            _libc.free(buf)
        return
    src = cap if via < 2 else _Producer(cap, device, old=via == 3)
    del cap
    try:
        kwargs = {}
        if copy is not None:
            kwargs["copy"] = copy
        if device_kw is not None:
            kwargs["device"] = device_kw
        out = mf.from_dlpack(src, **kwargs)
    except ALLOWED:
        out = None
    if out is not None:
        assert isinstance(out, np.ndarray)
        if honest:
            # read every element through the strides (ASan sees any overrun)
            np.array(out, copy=True)
            if out.flags.writeable and out.size:
                out.reshape(-1)[:1] = out.reshape(-1)[:1]
    del out, src
    after = producer.deleter_stats()["calls"]
    expected = 1 if with_deleter else 0
    assert after - before == expected, f"deleter ran {after - before} times, expected {expected}"
    if buf is not None:
        _libc.free(buf)


# ---------------------------------------------------------------------------
# .npy headers (minifloat.load / np.load)
# ---------------------------------------------------------------------------

_NAMES = [f["name"] for f in _core.formats()]
_DESCR_CODES = ["<u1", "<u2", ">u2", "|u1", "<u4", "<i2", "<f2", "|b1", "|V2", "<u8", "|S2"]


_MF_DTYPE_TYPES = {type(f["dtype"]) for f in _core.formats()}


def _touch(arr):
    """Read every element and cast (the C casts run)."""
    arr = np.asarray(arr)
    if arr.size and arr.size <= (1 << 16):
        b = np.array(arr, copy=True)
        if type(b.dtype) in _MF_DTYPE_TYPES:
            b.astype(np.float32)


def _npy_bytes(r):
    """A .npy file: a header dict (built field by field, or raw bytes) and data."""
    kind = r.uint(1)
    major = r.pick([1, 1, 1, 2, 3, 0, 4])
    if kind < 200:
        fmt = r.pick(_NAMES) if r.uint(1) < 240 else r.take(r.uint(1) % 24).decode("latin1")
        code = r.pick(_DESCR_CODES)
        nfields = r.uint(1) % 3 if r.uint(1) > 240 else 1
        fields = [(f"minifloat:{fmt}" if i == 0 else f"f{i}", code) for i in range(nfields)]
        descr = repr(fields) if r.uint(1) < 240 else repr(code)
        ndim = r.uint(1) % 4
        shape = tuple(_i64(r) for _ in range(ndim))
        fortran = r.pick(["False", "True", "0", "None"])
        header = "{'descr': %s, 'fortran_order': %s, 'shape': %r, }" % (descr, fortran, shape)
        if r.uint(1) > 245:
            header = header[:r.uint(1) % (len(header) + 1)]
        hb = header.encode("latin1")
    else:
        hb = r.take(r.uint(1))
    hb = hb + b" " * ((-(len(hb) + 11)) % 64) + b"\n"
    if major == 1:
        hlen = struct.pack("<H", len(hb) % 65536)
    else:
        hlen = struct.pack("<I", len(hb))
    return b"\x93NUMPY" + bytes([major, 0]) + hlen + hb + r.rest()


def check_npy(data):
    """A .npy built from the bytes, read by minifloat.load and np.load."""
    r = Reader(data)
    which = r.uint(1) % 3
    mmap = r.uint(1) % 4 == 0
    blob = _npy_bytes(r)
    try:
        if which == 0:
            arr = mf.load(io.BytesIO(blob))
        elif which == 1:
            # np.load allocates what the header says before reading (NumPy's
            # own behaviour): only headers minifloat.load accepts reach it
            mf.npyio.check_npy_size(io.BytesIO(blob))
            try:
                arr = np.load(io.BytesIO(blob), allow_pickle=False)
            except (tokenize.TokenError, SyntaxError):
                return     # NumPy's own behaviour for some corrupt headers

        else:
            import tempfile, os
            fd, path = tempfile.mkstemp(suffix=".npy")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                arr = mf.load(path, mmap_mode="r" if mmap else None)
                _touch(arr)
                del arr
                return
            finally:
                os.unlink(path)
        _touch(arr)
    except ALLOWED:
        pass


# ---------------------------------------------------------------------------
# safetensors headers: minifloat.io.safetensors.parse_header
# ---------------------------------------------------------------------------

def check_safetensors(data):
    """A .safetensors blob (8-byte length, JSON header, data) built from the
    bytes, parsed by minifloat.io.safetensors.parse_header.  Mostly well-formed JSON with fuzzed fields, sometimes raw bytes."""
    from minifloat.io import safetensors as st
    import json
    r = Reader(data)
    if r.uint(1) < 200:
        n = r.uint(1) % 3
        header = {}
        for i in range(n):
            dt = r.pick(["BF16", "F8_E4M3", "F8_E5M2", "F32", "F16", "U8", "I64", "F8_E8M0",
                         "F4", "bogus", 7, None])
            shape = [_i64(r) for _ in range(r.uint(1) % 3)]
            a, b = _i64(r), _i64(r)
            header[f"t{i}"] = {"dtype": dt, "shape": shape, "data_offsets": [a, a + b]}
        if r.uint(1) > 240:
            header["__metadata__"] = {"k": r.pick(["v", 1, None])}
        hb = json.dumps(header).encode()
    else:
        hb = r.take(r.uint(1))
    lk = r.uint(1)
    hlen = len(hb) if lk < 240 else r.pick([0, 2**63, 2**64 - 1, len(hb) + 1, 2**32])
    blob = struct.pack("<Q", hlen % 2**64) + hb + r.rest()
    # minifloat.io.safetensors.parse_header validates everything load() reads
    # (spans, dtypes, shapes) before any tensor byte is touched
    try:
        data_start, tensors, metadata = st.parse_header(blob, len(blob), "<fuzz>")
    except ALLOWED:
        return
    assert 8 <= data_start <= len(blob)
    for info in tensors.values():
        str(info)


TARGETS = {"dlpack": check_dlpack, "npy": check_npy, "safetensors": check_safetensors}


# ---------------------------------------------------------------------------
# quantized layouts and the JSON files next to a checkpoint (_fuzz_layouts.py)
# ---------------------------------------------------------------------------

import _fuzz_layouts  # noqa: E402

TARGETS["layouts"] = _fuzz_layouts.check_layouts
TARGETS["config"] = _fuzz_layouts.check_config
