"""Read and write safetensors checkpoints with the true dtypes.

    tensors = minifloat.safetensors.load("model.safetensors")      # read-only views of the file
    with minifloat.safetensors.open("model.safetensors") as f:      # lazy, like safe_open
        f.keys(); f.metadata(); f.get_tensor("w"); f.get_slice("w")[:10]
    minifloat.safetensors.save("out.safetensors", {"w": w}, metadata={"format": "np"})

A ``model.safetensors.index.json`` path (a sharded checkpoint), or a model
folder holding one (or holding a single ``.safetensors`` file), works wherever
a file does.  ``load(path, dequantize=True)`` and ``open(path,
dequantize=True)`` give a quantized checkpoint's weights as values under the
unquantized model's names (minifloat.io.layouts).  Each safetensors dtype is read as its own NumPy dtype (BF16 as
bfloat16, F8_E4M3 as float8_e4m3fn, ...; the table is ``DTYPES`` and
docs/safetensors.md).  With ``mmap=True`` byte-sized tensors are read-only
views of the mapped file (no copy); sub-byte tensors (F4, F6_E2M3, F6_E3M2),
which safetensors stores packed, are unpacked into one byte per value (a
copy).  Every header is validated before any tensor byte is read
(:func:`parse_header`); a malformed file raises ValueError naming the file and
the tensor.
"""
import builtins
import contextlib
import errno
import json
import mmap as _mmap
import os
import stat as _stat
import struct
import tempfile
import threading
from collections import namedtuple

import numpy as np

from .. import _core
from ..casting import pack as _pack, unpack as _unpack

__all__ = ["load", "open", "save", "parse_header", "resolve", "DTYPES", "MAX_HEADER_SIZE",
           "SafeOpen", "DequantizedOpen"]

#: safetensors' own limit on the JSON header (safetensors/src/tensor.rs)
MAX_HEADER_SIZE = 100_000_000

_FORMATS = {f["name"]: f for f in _core.formats()}

# safetensors dtype code -> (NumPy dtype, bits per element).  The order is
# safetensors' Dtype enum (increasing alignment), which its writer sorts by.
_CODES = [
    ("BOOL", np.dtype(np.bool_), 8),
    ("F4", _FORMATS["float4_e2m1fn"]["dtype"], 4),
    ("F6_E2M3", _FORMATS["float6_e2m3fn"]["dtype"], 6),
    ("F6_E3M2", _FORMATS["float6_e3m2fn"]["dtype"], 6),
    ("U8", np.dtype("u1"), 8),
    ("I8", np.dtype("i1"), 8),
    ("F8_E5M2", _FORMATS["float8_e5m2"]["dtype"], 8),
    ("F8_E4M3", _FORMATS["float8_e4m3fn"]["dtype"], 8),
    ("F8_E8M0", _FORMATS["float8_e8m0fnu"]["dtype"], 8),
    ("F8_E4M3FNUZ", _FORMATS["float8_e4m3fnuz"]["dtype"], 8),
    ("F8_E5M2FNUZ", _FORMATS["float8_e5m2fnuz"]["dtype"], 8),
    ("I16", np.dtype("<i2"), 16),
    ("U16", np.dtype("<u2"), 16),
    ("F16", np.dtype("<f2"), 16),
    ("BF16", _FORMATS["bfloat16"]["dtype"], 16),
    ("I32", np.dtype("<i4"), 32),
    ("U32", np.dtype("<u4"), 32),
    ("F32", np.dtype("<f4"), 32),
    ("C64", np.dtype("<c8"), 64),
    ("F64", np.dtype("<f8"), 64),
    ("I64", np.dtype("<i8"), 64),
    ("U64", np.dtype("<u8"), 64),
]
#: safetensors dtype code -> NumPy dtype (minifloat's for the low-precision ones)
DTYPES = {code: dt for code, dt, _ in _CODES}
_BITS = {code: bits for code, _, bits in _CODES}
_RANK = {code: i for i, (code, _, _) in enumerate(_CODES)}
# dtype name -> code; minifloat's names are ml_dtypes' names, so ml_dtypes'
# arrays (same encodings) are saved too
_NAME_TO_CODE = {str(dt) if type(dt).__module__ == "minifloat.dtypes" else dt.name: code
                 for code, dt, _ in _CODES}
_NAME_TO_CODE["bool"] = "BOOL"

#: one tensor of a header: safetensors dtype code, shape (elements), and the
#: byte span [begin, end) relative to the start of the data (after the header)
TensorInfo = namedtuple("TensorInfo", "dtype shape begin end")


def _nbytes(code, shape):
    n = 1
    for d in shape:
        n *= d
    return n * _BITS[code] // 8, n * _BITS[code] % 8 == 0


def _is_index(path):
    return str(path).endswith(".json")


def resolve(path):
    """The file that `path` names as a checkpoint: a ``.safetensors`` file or
    an index ``.json`` as given; a model folder: its
    ``*.safetensors.index.json`` (a sharded checkpoint), else its one
    ``.safetensors`` file.  A folder with none, or with several files and no
    index, is an error that says what to give instead."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path
    try:
        # not only regular files: a FIFO named *.safetensors is found here
        # and refused by name when opened
        names = sorted(e.name for e in os.scandir(path) if not e.is_dir())
    except OSError as e:
        raise OSError(e.errno, f"{path}: {e.strerror}") from None
    index = [n for n in names if n.endswith(".safetensors.index.json")]
    files = [n for n in names if n.endswith(".safetensors")]
    if len(index) == 1:
        return os.path.join(path, index[0])
    if len(index) > 1:
        raise ValueError(f"{path}: a folder with {len(index)} index files "
                         f"({', '.join(index)}); give the one to open")
    if len(files) == 1:
        return os.path.join(path, files[0])
    if not files:
        raise FileNotFoundError(errno.ENOENT, "a folder with no .safetensors file", path)
    raise ValueError(f"{path}: a folder with {len(files)} .safetensors files and no "
                     f"*.safetensors.index.json; give one file, or the index of the sharded "
                     f"checkpoint")


def _open_regular(path):
    """Open `path` for binary reading only if it is a regular file.  A FIFO
    (or a character device, a socket) would block ``open()`` until a writer
    comes, or stream bytes a header's offsets cannot be checked against: it is
    opened without blocking, checked and refused."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if _stat.S_ISDIR(st.st_mode):      # as open() says it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not _stat.S_ISREG(st.st_mode):
            what = ("a FIFO" if _stat.S_ISFIFO(st.st_mode)
                    else "a character device" if _stat.S_ISCHR(st.st_mode)
                    else "a socket" if _stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise ValueError(f"{path}: {what}, not a regular file: give a .safetensors file or "
                             f"a sharded checkpoint's index .json")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return builtins.open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# --------------------------------------------------------------------------- header

def parse_header(buf, file_size, path="<buffer>"):
    """Parse and validate a safetensors header.

    buf:       the file's first bytes: the 8-byte little-endian header length
               N followed by (at least) the N header bytes; the whole file is
               fine too.
    file_size: the file's size in bytes (the spans must cover the data exactly).
    path:      named in error messages.

    Returns ``(data_start, tensors, metadata)``: the offset of the data in the
    file (8 + N), a dict name -> :class:`TensorInfo` in file order, and the
    ``__metadata__`` dict (str -> str; empty when absent).

    Raises ValueError, naming `path` and the tensor, for: a file too short, a
    header length past the end of the file or above safetensors' 100 MB limit,
    bad UTF-8 or JSON, a header that is not a JSON object, duplicate names,
    non-string metadata, an unknown dtype, a bad shape or bad offsets, a shape
    whose size does not match its byte span, a sub-byte tensor that does not
    fill whole bytes, and spans that overlap, leave holes or run past the end
    of the file.  Pure Python; reads nothing but `buf`.
    """
    where = f"{os.fspath(path) if not isinstance(path, str) else path}"

    def bad(msg, name=None):
        return ValueError(f"{where}: {'tensor ' + repr(name) + ': ' if name is not None else ''}"
                          f"{msg} (not a valid safetensors file)")

    buf = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
    if file_size < 8 or len(buf) < 8:
        raise bad(f"file is {file_size} bytes long; a safetensors file starts with an 8-byte "
                  f"header length")
    (n,) = struct.unpack("<Q", bytes(buf[:8]))
    if n > MAX_HEADER_SIZE:
        raise bad(f"header length {n} is above safetensors' limit of {MAX_HEADER_SIZE} bytes")
    if 8 + n > file_size:
        raise bad(f"header length {n} runs past the end of the file ({file_size} bytes)")
    if 8 + n > len(buf):
        raise ValueError(f"{where}: parse_header was given {len(buf)} bytes; the header needs {8 + n}")
    raw = bytes(buf[8:8 + n])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad(f"header is not UTF-8 ({e.reason} at byte {8 + e.start})") from None
    if not text.startswith("{"):
        raise bad("header does not start with '{'")

    def no_duplicates(pairs):
        d = {}
        for k, v in pairs:
            if k in d:
                raise bad("name appears twice in the header", k)
            d[k] = v
        return d

    def no_constant(s):          # NaN, Infinity: not JSON
        raise bad(f"header is not JSON ({s} is not a JSON value)")

    try:
        header = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise bad(f"header is not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise bad("header is not JSON (nested too deeply)") from None
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")

    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad("__metadata__ must map strings to strings")

    infos = []
    for name, entry in header.items():
        if not isinstance(entry, dict):
            raise bad("entry is not a JSON object", name)
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
        if missing:
            raise bad(f"entry has no {', '.join(missing)}", name)
        code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(code, str) or code not in _BITS:
            raise bad(f"unknown dtype {code!r} (known: {', '.join(_BITS)})", name)
        if (not isinstance(shape, list)
                or not all(type(d) is int and 0 <= d < 2**64 for d in shape)):
            raise bad(f"shape {shape!r} is not a list of non-negative integers", name)
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int and 0 <= o < 2**64 for o in offsets)):
            raise bad(f"data_offsets {offsets!r} is not a pair of non-negative integers", name)
        begin, end = offsets
        if end < begin:
            raise bad(f"data_offsets [{begin}, {end}] end before they begin", name)
        size, whole = _nbytes(code, shape)
        if not whole:
            raise bad(f"{code} tensor of shape {tuple(shape)} does not fill whole bytes", name)
        if end - begin != size:
            raise bad(f"{code} tensor of shape {tuple(shape)} takes {size} bytes but its "
                      f"data_offsets [{begin}, {end}] span {end - begin}", name)
        infos.append((name, TensorInfo(code, tuple(shape), begin, end)))

    infos.sort(key=lambda t: (t[1].begin, t[1].end))
    data_size = file_size - 8 - n
    pos = 0
    for name, info in infos:
        if info.begin < pos:
            raise bad(f"data_offsets [{info.begin}, {info.end}] overlap the previous tensor's "
                      f"(which ends at {pos})", name)
        if info.begin > pos:
            raise bad(f"data_offsets [{info.begin}, {info.end}] leave a hole after byte {pos} "
                      f"of the data", name)
        if info.end > data_size:
            raise bad(f"data_offsets [{info.begin}, {info.end}] run past the end of the file "
                      f"(the data is {data_size} bytes)", name)
        pos = info.end
    if pos != data_size:
        raise bad(f"the tensors cover {pos} bytes of data but the file holds {data_size}")
    return 8 + n, dict(infos), metadata


def _read_header(f, path):
    size = os.fstat(f.fileno()).st_size
    head = f.read(8)
    if len(head) == 8:
        (n,) = struct.unpack("<Q", head)
        if n <= MAX_HEADER_SIZE and 8 + n <= size:
            head += f.read(n)
    return parse_header(head, size, path)


# --------------------------------------------------------------------------- reading

def _tensor_from_bytes(data, info):
    """data: uint8 array of exactly the tensor's bytes -> the tensor."""
    dt = DTYPES[info.dtype]
    if _BITS[info.dtype] < 8:
        return _unpack(data, dt, info.shape)
    return data.view(dt).reshape(info.shape)


class SafeOpen:
    """A safetensors file (or a sharded checkpoint's index), opened lazily:
    only the header is read until a tensor is asked for.  Use as a context
    manager, like ``safetensors.safe_open``."""

    def __init__(self, path, *, mmap=True):
        self.path = resolve(path)
        self._mmap = mmap
        self._files = {}          # file path -> [data_start, tensors, mapped buffer or None]
        self._meta_of = {}        # file path -> its __metadata__
        self._where = {}          # tensor name -> file path
        if _is_index(self.path):
            self._open_index()
        else:
            self._open_file(self.path)
            self._where = {k: self.path for k in self._files[self.path][1]}
            self._metadata = self._meta_of[self.path]

    def _open_file(self, path):
        with _open_regular(path) as f:
            start, tensors, meta = _read_header(f, path)
        self._files[path] = [start, tensors, None]
        self._meta_of[path] = meta

    def _open_index(self):
        try:
            with _open_regular(self.path) as f:
                index = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{self.path}: not a safetensors index ({e})") from None
        except RecursionError:
            raise ValueError(f"{self.path}: not a safetensors index (JSON nested too "
                             f"deeply)") from None
        wm = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
            raise ValueError(f"{self.path}: a safetensors index needs a \"weight_map\" of "
                             f"tensor name -> shard file name")
        meta = index.get("metadata") or {}
        self._metadata = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in meta.items()} \
            if isinstance(meta, dict) else {}
        base = os.path.dirname(self.path)
        first = {}                # shard -> the first tensor the index puts there
        for name, shard in wm.items():
            first.setdefault(shard, name)
        for shard, name in first.items():
            sp = os.path.join(base, shard)
            if (os.path.isabs(shard) or ".." in shard.replace("\\", "/").split("/")
                    or "\0" in shard or not shard):
                raise ValueError(f"{self.path}: tensor {name!r}: shard {shard!r} is not a file "
                                 f"name inside the index's folder")
            try:
                self._open_file(sp)
            except FileNotFoundError:
                # named as the user gave it: the index, and what it lists there
                raise FileNotFoundError(errno.ENOENT, f"tensor {name!r}: the index puts it in "
                                        f"{shard}, which does not exist", self.path) from None
        self._unlisted = {}       # tensor name -> shard, for what the shards hold unlisted
        for name, shard in wm.items():
            sp = os.path.join(base, shard)
            if name not in self._files[sp][1]:
                raise ValueError(f"{self.path}: tensor {name!r}: the index puts it in {shard}, "
                                 f"which has no such tensor")
            self._where[name] = sp
        for shard in first:
            for name in self._files[os.path.join(base, shard)][1]:
                if name not in self._where:
                    self._unlisted.setdefault(name, shard)

    # -- the safe_open API
    def keys(self):
        """Tensor names, in file order (shard by shard for an index)."""
        return list(self._where)

    def unlisted(self):
        """The tensors a sharded checkpoint's shards hold but its index's
        weight_map does not list (name -> (TensorInfo, shard file name)):
        not part of the checkpoint, but a quantized weight whose scale is
        among them is named for what it is (minifloat.io.layouts.scan)."""
        return {n: (self._files[os.path.join(os.path.dirname(self.path), s)][1][n], s)
                for n, s in getattr(self, "_unlisted", {}).items()}

    def metadata(self):
        """The ``__metadata__`` dict (an index's "metadata", values as strings)."""
        return dict(self._metadata)

    def info(self, name):
        """The :class:`TensorInfo` of `name` (dtype code, shape, byte span)."""
        return self._files[self._shard(name)][1][name]

    def dtype(self, name):
        return DTYPES[self.info(name).dtype]

    def files(self):
        """The files that hold the tensors (one, or an index's shards)."""
        return list(self._files)

    def _shard(self, name):
        try:
            return self._where[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def _buffer(self, path):
        """The whole file as a read-only uint8 array over its mapping."""
        ent = self._files[path]
        if ent[2] is None:
            with _open_regular(path) as f:
                size = os.fstat(f.fileno()).st_size
                ent[2] = np.frombuffer(_mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ), np.uint8)
            if ent[2].size != size:
                raise ValueError(f"{path}: the file changed size while being opened")
        return ent[2]

    def _raw(self, name):
        """The tensor's stored bytes (uint8): a view of the mapping, or with
        mmap=False a fresh writable copy read from the file."""
        path = self._shard(name)
        start, tensors, _ = self._files[path]
        info = tensors[name]
        if self._mmap:
            return self._buffer(path)[start + info.begin:start + info.end], info
        n = info.end - info.begin
        data = bytearray(n)
        with _open_regular(path) as f:
            f.seek(start + info.begin)
            got = f.readinto(data)
        if got != n:
            raise ValueError(f"{path}: tensor {name!r}: the file ends early (it changed since "
                             f"it was opened)")
        return np.frombuffer(data, np.uint8), info

    def get_tensor(self, name):
        """The tensor `name`: with mmap a read-only view of the file for
        byte-sized dtypes; sub-byte dtypes are unpacked (a copy)."""
        data, info = self._raw(name)
        return _tensor_from_bytes(data, info)

    def get_slice(self, name):
        """A lazy handle: ``get_slice(name)[index]`` reads only the bytes the
        index needs (and returns a copy); ``.get_shape()``, ``.get_dtype()``."""
        return _Slice(self, name)

    def close(self):
        # a mapping stays alive while views of it do; one held only here is
        # unmapped on a thread of its own when large (_drop_later)
        held = []
        for ent in self._files.values():
            if ent[2] is not None:
                held.append(ent[2])
            ent[2] = None
        _drop_later(held)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self._where)

    def __contains__(self, name):
        return name in self._where


class _Slice:
    def __init__(self, f, name):
        self._f, self._name = f, name
        self._info = f.info(name)

    def get_shape(self):
        return list(self._info.shape)

    def get_dtype(self):
        return self._info.dtype

    @property
    def shape(self):
        return self._info.shape

    @property
    def dtype(self):
        return DTYPES[self._info.dtype]

    def __getitem__(self, idx):
        info = self._info
        if _BITS[info.dtype] >= 8:
            # a view of the mapping: indexing touches only the pages it needs
            return np.array(self._f.get_tensor(self._name)[idx])
        # sub-byte: unpack only the rows (along axis 0) the index can touch
        data, _ = self._f._raw(self._name)
        shape = info.shape
        row = 1
        for d in shape[1:]:
            row *= d
        bits = _BITS[info.dtype]
        tup = idx if isinstance(idx, tuple) else (idx,)
        first = tup[0] if tup else slice(None)
        if (shape and (row * bits) % 8 == 0 and isinstance(first, (int, np.integer, slice))
                and not isinstance(first, (bool, np.bool_))):
            n0 = shape[0]
            if isinstance(first, slice):
                rng = range(*first.indices(n0))
                lo, hi = (min(rng), max(rng) + 1) if len(rng) else (0, 0)
                start, stop, step = first.indices(n0)
                new_first = slice(start - lo, (stop - lo) if stop - lo >= 0 else None, step)
            else:
                i = int(first) + (n0 if first < 0 else 0)
                if not 0 <= i < n0:
                    raise IndexError(f"index {int(first)} is out of bounds for axis 0 with size {n0}")
                lo, hi, new_first = i, i + 1, 0
            rb = row * bits // 8
            part = _unpack(data[lo * rb:hi * rb], DTYPES[info.dtype], (hi - lo,) + shape[1:])
            return np.array(part[(new_first,) + tup[1:]])
        return np.array(_tensor_from_bytes(data, info)[idx])


def open(path, *, mmap=True, dequantize=False):   # noqa: A001  (the module's name for safe_open)
    """Open a safetensors file, a ``model.safetensors.index.json`` or a model
    folder lazily (only headers are read); see :class:`SafeOpen`.

    dequantize=True: the checkpoint as the unquantized model sees it
    (:class:`DequantizedOpen`): each quantized weight (codes plus scales in
    one of the hub layouts, docs/safetensors.md) is one tensor under its
    unquantized name, read as float32 values; every other tensor is as
    stored."""
    f = SafeOpen(path, mmap=mmap)
    return DequantizedOpen(f) if dequantize else f


def load(path, *, mmap=True, dequantize=False):
    """Load every tensor of a safetensors file (or of a sharded checkpoint's
    ``*.index.json``, or a model folder) as a dict name -> ndarray with the
    true dtypes.

    mmap=True:  byte-sized tensors are read-only views of the memory-mapped
                file (no copy; nothing is read until used).  Sub-byte tensors
                (F4, F6_*) are unpacked to one byte per value, a copy.
    mmap=False: the file is read into memory; the arrays are writable.
    dequantize=True: quantized weights come as float32 values under their
                unquantized names (their codes and scales do not appear);
                every other tensor as stored.  A quantized layout minifloat
                does not decode raises ValueError (never codes read as
                values).
    """
    f = open(path, mmap=mmap, dequantize=dequantize)
    return {name: f.get_tensor(name) for name in f.keys()}


class DequantizedOpen:
    """An open checkpoint seen as the unquantized model: ``keys()`` are the
    model's tensor names (a quantized weight's codes, scales, zero points and
    global scales are one name), ``get_tensor(name)`` gives a quantized
    weight's float32 values (decoded in bounded chunks into one array) and any
    other tensor as stored.  ``layouts`` is the
    :class:`minifloat.io.layouts.Layouts` found; ``stored`` the plain
    :class:`SafeOpen`."""

    def __init__(self, f):
        from . import layouts
        self.stored = f
        self.path = f.path
        self.layouts = layouts.scan(f, f.path)
        self._names = [n if kind == "tensor" else n.name
                       for kind, n in self.layouts.rows(f.keys())]

    def keys(self):
        return list(self._names)

    def metadata(self):
        return self.stored.metadata()

    def get_tensor(self, name):
        from . import layouts
        g = self.layouts.groups.get(name)
        if g is None:
            if name in self.layouts.owner or name not in self._names:
                raise KeyError(f"{self.path}: no tensor {name!r} in the dequantized view"
                               + (f" (it is part of {self.layouts.owner[name]!r})"
                                  if name in self.layouts.owner else ""))
            return self.stored.get_tensor(name)
        if not g.decoded:
            raise ValueError(f"{self.path}: tensor {name!r} is stored in "
                             f"{layouts.describe(g)}, which minifloat does not decode; its "
                             f"stored tensors are codes and scales, not values (read them with "
                             f"dequantize=False)")
        out = np.empty(g.shape, np.float32)
        flat = out.reshape(-1, g.shape[-1] if g.shape else 1) if out.size else out
        r = 0
        for c in layouts.chunks(self.stored, g):
            flat[r:r + c.shape[0]] = c
            r += c.shape[0]
        return out

    def get_slice(self, name):
        if name in self.layouts.groups:
            raise ValueError(f"{self.path}: tensor {name!r} is quantized; a dequantized tensor "
                             f"is read whole: get_tensor({name!r})")
        return self.stored.get_slice(name)

    def close(self):
        self.stored.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# --------------------------------------------------------------------------- writing

def code_of(dtype):
    """The safetensors dtype code of a NumPy dtype (minifloat's, NumPy's in
    either byte order, or ml_dtypes' formats by name), or None where
    safetensors has none."""
    dt = np.dtype(dtype)
    if type(dt).__module__ == "minifloat.dtypes":
        return _NAME_TO_CODE.get(str(dt))
    if dt.names is None and dt.kind in "biufc":
        return _NAME_TO_CODE.get(dt.newbyteorder("=").name)
    return _NAME_TO_CODE.get(dt.name)


def _chunks_of(a, code, chunk=1 << 24):
    """The bytes safetensors stores for array `a` (whose dtype has `code`)."""
    dt = DTYPES[code]
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))      # safetensors is little-endian
    if a.dtype != dt:
        a = np.ascontiguousarray(a).view(dt)         # ml_dtypes' twin: the same bytes
    if _BITS[code] < 8:
        yield memoryview(_pack(a))
        return
    flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    for i in range(0, flat.size, chunk):
        yield memoryview(flat[i:i + chunk])


#: replacing a file: hand the output to the writeback every this many bytes
_EARLY_BYTES = 2 << 20


def _early_writeback(out, at):
    """Start writing the bytes at[1]..at[0] of `out` to disk now, without
    waiting for it.  Used when `write` will rename over an existing file:
    Linux's ext4 (auto_da_alloc) writes the new file out at such a rename and
    waits for it, ~8 ms per 16 MiB here; started as the chunks are written,
    that I/O runs while the rest is computed (docs/design.md).  POSIX_FADV_DONTNEED on
    pages just written starts their writeback and drops none of them (they
    are dirty)."""
    if hasattr(os, "posix_fadvise"):
        out.flush()
        try:
            os.posix_fadvise(out.fileno(), at[1], at[0] - at[1], os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
    at[1] = at[0]


#: write() hands the bytes to a thread of its own (below) when there are
#: at least this many to write and more than one core
_BACKGROUND_MIN = 64 << 20
_BACKGROUND_BUF = 4 << 20


#: the background writer of the write() running in this thread, if any
_lender = threading.local()


def lend_buffer(nbytes):
    """A writable buffer (a bytearray of at least `nbytes`) for the next
    chunk the calling thread hands to the write() it is producing chunks for,
    or None.  A chunk that starts at the buffer's first byte is then written
    with no copy (the buffer is the writer's: the producer must not touch it
    after yielding it); any other chunk is copied as usual.  None where that
    write() has no background writer, the chunk would not fit, or a buffer
    is already lent and not yet handed back: the producer then uses its own
    memory."""
    w = getattr(_lender, "writer", None)
    return None if w is None else w.lend(nbytes)


class Deferrable:
    """A tensor's chunks whose producer offers them to write()'s deferred
    writer (_Deferred): write() then uses it rather than the background
    writer, which measured slower for such chunks (docs/design.md)."""

    def __init__(self, chunks):
        self.chunks = chunks

    def __iter__(self):
        return iter(self.chunks)


def deferred_writer():
    """The write() running in this thread, as a _Deferred, if it takes
    chunks that a producer writes itself during its next computation; else
    None (see _Deferred)."""
    return getattr(_lender, "deferred", None)


class _Deferred:
    """write()'s chunks, each written while the producer computes the next.
    A producer that keeps a yielded chunk's memory intact until its next
    computation has returned (it alternates two buffers) says so with
    offer(chunk) before yielding it; write() then leaves that chunk pending.
    The producer's next computation takes it (take()) and writes it on the
    calling thread while the kernels' worker threads start on the next chunk
    (the fd and data arguments of _core._stats), then reports how far it got
    (wrote()); write() writes any chunk that was not offered (through the
    file object, buffered), or not taken, itself, always in order.  On two
    cores this overlaps the page-cache write with the cast instead of
    leaving one core idle during it."""

    def __init__(self, out, at, early):
        self.out, self.at, self.early = out, at, early
        self.fd = out.fileno()
        self.pending = None
        self.offered = None
        self.buffered = True   # the file object may hold bytes not yet written
        self.flip = 0          # the producer's buffer for its next chunk (0 or 1)

    def offer(self, chunk):
        self.offered = chunk

    def take(self):
        """The pending bytes, for the caller to write to self.fd (then
        wrote()), or None."""
        p, self.pending = self.pending, None
        if p is not None:
            self._unbuffer()
        return p

    def wrote(self, p, n):
        """n bytes of p (from take()) were written; the rest is written here
        (raising the error that stopped them, if any)."""
        self._write_rest(p, n)

    def _write_rest(self, p, n):
        self._count(n)
        p = p[n:]
        while len(p):
            k = os.write(self.fd, p)
            self._count(k)
            p = p[k:]

    def put(self, c):
        """Chunk c from write()'s loop: pending if offered, else written now."""
        offered, self.offered = self.offered, None
        self.flush()
        mv = memoryview(c).cast("B")
        if offered is not None and offered is c:
            self.pending = mv
        else:
            self._count(self.out.write(mv))
            self.buffered = True
        return len(mv)

    def flush(self):
        p = self.take()
        if p is not None:
            self._write_rest(p, 0)

    def _unbuffer(self):
        if self.buffered:
            self.out.flush()
            self.buffered = False

    def _count(self, k):
        at = self.at
        at[0] += k
        if self.early is not None and at[0] - at[1] >= _EARLY_BYTES:
            self._unbuffer()
            self.early(self.out, at)


class _BackgroundWriter:
    """Writes on a thread of its own while the caller computes what comes
    next.  Each chunk is first copied into one of three reused buffers (the
    caller may reuse its chunk's memory at once: a converter's chunks are
    scratch arrays), so the thread never reads memory the caller changes; the
    copy costs a memcpy, the write into the page cache several times that.
    A producer that computes its chunk into a buffer lent by lend_buffer()
    saves the copy.  An error of the thread's is raised by the caller's next
    call; close() waits for every byte (or, after an error, for the thread
    to stop)."""

    def __init__(self, out, at, early):
        import queue
        import threading
        self.out, self.at, self.early = out, at, early
        self.free = queue.Queue()
        for _ in range(3):
            self.free.put(bytearray(_BACKGROUND_BUF))
        self.todo = queue.Queue()
        self.error = None
        self.lent = None            # (address, buffer) lent by lend() and not yet written
        self.thread = threading.Thread(target=self._run, name="minifloat-safetensors-writer",
                                       daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            item = self.todo.get()
            if item is None:
                return
            buf, n = item
            try:
                if self.error is None:
                    self.out.write(memoryview(buf)[:n])
                    self.at[0] += n
                    if self.early is not None and self.at[0] - self.at[1] >= _EARLY_BYTES:
                        self.early(self.out, self.at)
            except BaseException as e:       # raised again in the caller's thread
                self.error = e
            self.free.put(buf)

    def _check(self):
        if self.error is not None:
            raise self.error

    def lend(self, nbytes):
        """One of the free buffers, for the caller to compute a chunk into
        (lend_buffer); None if it would not fit or one is lent already."""
        if nbytes > _BACKGROUND_BUF or self.lent is not None:
            return None
        buf = self.free.get()
        self._check()
        self.lent = (np.frombuffer(buf, np.uint8).ctypes.data, buf)
        return buf

    def write(self, c):
        """Queue chunk `c` (a C-contiguous bytes-like object, as the file's
        own write takes); returns its length."""
        mv = memoryview(c).cast("B")
        if self.lent is not None and len(mv) and (
                np.frombuffer(mv, np.uint8).ctypes.data == self.lent[0]):
            buf = self.lent[1]           # computed in the lent buffer: no copy
            self.lent = None
            self._check()
            self.todo.put((buf, len(mv)))
            return len(mv)
        for o in range(0, len(mv), _BACKGROUND_BUF):
            piece = mv[o:o + _BACKGROUND_BUF]
            buf = self.free.get()
            self._check()
            buf[:len(piece)] = piece
            self.todo.put((buf, len(piece)))
        return len(mv)

    def close(self, abort=False):
        """Wait for the thread; raise its error unless `abort` (the caller
        is raising one of its own: the thread only stops)."""
        if abort and self.error is None:
            self.error = _Aborted()
        self.todo.put(None)
        self.thread.join()
        if not abort:
            self._check()


class _Aborted(Exception):
    """The background writer's state once the caller gave up: skip the rest."""


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


_UMASK = _umask()


def _anonymous_file(folder):
    """A file with no name in `folder` (Linux's O_TMPFILE): if the process
    dies before it is linked, the kernel frees it -- nothing is left, even
    after kill -9.  None where the OS or the filesystem has no such file, or
    no /proc to link it through."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError:            # EOPNOTSUPP, EISDIR (old kernels), ...
        return None


#: a replaced file at least this large is let go by a thread of its own
_RELEASE_MIN = 1 << 20


def _hold_replaced(path):
    """An open descriptor of the file that `path` names now (a regular file
    of _RELEASE_MIN bytes or more), or None.  Held across the rename, it
    keeps the replaced file's inode alive, so the rename does not free its
    pages; _release_later frees them off the caller's thread.  POSIX only:
    Windows cannot replace a file that is open."""
    if os.name != "posix":
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st_ = os.fstat(fd)
        if _stat.S_ISREG(st_.st_mode) and st_.st_size >= _RELEASE_MIN:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _off_thread(fn, *args):
    """fn(*args) on a daemon thread named minifloat-release, or here when
    no thread can be had (at interpreter shutdown)."""
    try:
        threading.Thread(target=fn, args=args, name="minifloat-release", daemon=True).start()
    except RuntimeError:
        fn(*args)


def _release_later(fd):
    """Close `fd` (the replaced file, no longer linked) on a daemon thread.
    The last close frees the file's pages, and on ext4 waits for any of
    them still being written out: right after an earlier write of the same
    file, milliseconds per 16 MiB that the caller need not wait for
    (docs/design.md)."""
    if fd is not None:
        _off_thread(os.close, fd)


def _drop_later(held):
    """Let go of `held` (arrays over file mappings) on a daemon thread when
    they map _RELEASE_MIN bytes or more: unmapping a 32 MiB mapping whose
    pages were touched takes about 1 ms (its page tables), which the
    caller need not wait for.  A mapping that views elsewhere still hold is
    unmapped when the last of them goes, wherever that is."""
    if sum(a.size for a in held) >= _RELEASE_MIN:
        _off_thread(held.clear)
    else:
        held.clear()


@contextlib.contextmanager
def _atomic_replace(path, mode, fsync=False):
    """A file object to write `path`'s new content into, renamed over `path`
    when the block ends without an error (so a reader sees the old file or
    the whole new one, never a part) and removed when it raises (an
    interrupted write leaves nothing).  On Linux the file has no name while
    it is written (O_TMPFILE): killed with SIGKILL, the process leaves
    nothing behind either; once complete it gets a hidden name in the same
    folder (linkat) and is renamed over `path`.  Elsewhere it is a hidden
    named temporary file from the start.  Either way it gets the
    permissions a new file gets (0666 less the umask)."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    fd = _anonymous_file(folder)
    if fd is None:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                   dir=folder)
        os.fchmod(fd, 0o666 & ~_UMASK)
    try:
        with builtins.open(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as out:
            yield out
            out.flush()
            if fsync:
                os.fsync(out.fileno())
            if tmp is None:
                # a name for the finished file, then the rename: only this
                # instant between the two can leave a hidden file behind
                # (a dir_fd makes Python call linkat(AT_SYMLINK_FOLLOW):
                # plain link() would link the /proc symlink itself)
                dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                try:
                    for _ in range(100):
                        name = f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp"
                        try:
                            os.link(f"/proc/self/fd/{out.fileno()}", name, dst_dir_fd=dfd,
                                    follow_symlinks=True)
                        except FileExistsError:
                            continue
                        tmp = os.path.join(folder, name)
                        break
                    else:
                        raise FileExistsError(errno.EEXIST, "no free temporary name", folder)
                finally:
                    os.close(dfd)
        old = _hold_replaced(path)
        try:
            os.replace(tmp, path)
        except BaseException:
            if old is not None:
                os.close(old)
            raise
        _release_later(old)
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise


def write(path, specs, metadata=None, *, fsync=False):
    """Write a safetensors file atomically from ``specs``: a list of
    ``(name, code, shape, chunks)`` where ``chunks`` is an iterable of
    bytes-like objects holding the tensor's stored bytes (so a converter can
    stream).  Tensors are laid out as safetensors' writer lays them out (by
    decreasing alignment, then name).  The file appears only once complete:
    it is written to a temporary file in the same folder, then renamed.
    ``fsync=True`` also waits for the data to reach the disk before the
    rename (durable across a power cut, at the cost of the disk write; off by
    default, as in safetensors, torch and NumPy)."""
    path = os.fspath(path)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("metadata must be a dict of str -> str (as safetensors requires)")
    specs = sorted(specs, key=lambda s: (-_RANK[s[1]], s[0]))
    names = [s[0] for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: duplicate tensor names")
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    off = 0
    for name, code, shape, _ in specs:
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str; got {name!r}")
        if name == "__metadata__":
            raise ValueError(f"{path}: '__metadata__' is reserved in safetensors and cannot name "
                             f"a tensor")
        size, whole = _nbytes(code, shape)
        if not whole:
            raise ValueError(f"{path}: tensor {name!r}: {code} with shape {tuple(shape)} does not "
                             f"fill whole bytes; safetensors stores whole bytes (give it an even "
                             f"number of 4-bit values, a multiple of 4 of 6-bit values)")
        header[name] = {"dtype": code, "shape": [int(d) for d in shape],
                        "data_offsets": [off, off + size]}
        off += size
    hb = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    if len(hb) > MAX_HEADER_SIZE:
        raise ValueError(f"{path}: the header would be {len(hb)} bytes, above safetensors' "
                         f"limit of {MAX_HEADER_SIZE}")
    early = _early_writeback if os.path.exists(path) else None
    with _atomic_replace(path, "wb", fsync) as out:
        out.write(struct.pack("<Q", len(hb)))
        out.write(hb)
        at = [out.tell()] * 2          # written, and handed to the writeback
        bg = prev = dw = prev_dw = None
        defers = any(isinstance(s[3], Deferrable) for s in specs)
        if off >= _BACKGROUND_MIN and _core.get_num_threads() > 1 and not defers:
            bg = _BackgroundWriter(out, at, early)
            prev, _lender.writer = getattr(_lender, "writer", None), bg
        elif _core.get_num_threads() > 1:
            dw = _Deferred(out, at, early)
        prev_dw, _lender.deferred = getattr(_lender, "deferred", None), dw
        try:
            for name, code, shape, chunks in specs:
                begin, end = header[name]["data_offsets"]
                size, got = end - begin, 0
                for c in chunks:
                    if bg is not None:
                        got += bg.write(c)
                        continue
                    if dw is not None:
                        got += dw.put(c)
                        continue
                    k = out.write(c)
                    got += k
                    at[0] += k
                    if early is not None and at[0] - at[1] >= _EARLY_BYTES:
                        early(out, at)
                if got != size:
                    raise ValueError(f"{path}: tensor {name!r}: {got} bytes written, "
                                     f"{size} expected")
            if dw is not None:
                dw.flush()
        except BaseException:
            if bg is not None:
                bg.close(abort=True)
            raise
        finally:
            _lender.deferred = prev_dw
            if bg is not None:
                _lender.writer = prev
        if bg is not None:
            bg.close()


def save(path, tensors, metadata=None, *, fsync=False):
    """Save a dict name -> array as a safetensors file, atomically (a
    temporary file, then a rename: an interrupted save leaves no broken file;
    ``fsync=True``: on disk before the rename, see `write`).

    Every dtype safetensors has can be saved: bool, (u)int8-64, float16/32/64,
    complex64, and minifloat's (or ml_dtypes') bfloat16, float8_e4m3fn,
    float8_e5m2, float8_e8m0fnu, float8_e4m3fnuz, float8_e5m2fnuz,
    float6_e2m3fn, float6_e3m2fn and float4_e2m1fn (packed as safetensors
    packs them).  `metadata`: dict str -> str, stored as ``__metadata__``.
    The file is what ``safetensors.torch.load_file`` reads back bit for bit.
    """
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of name -> array; got {type(tensors).__name__}")
    specs = []
    for name, a in tensors.items():
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        code = code_of(a.dtype)
        if code is None:
            raise TypeError(f"{os.fspath(path)}: tensor {name!r}: safetensors has no dtype for "
                            f"{a.dtype} (it stores {', '.join(str(d) for d in DTYPES.values())})")
        specs.append((name, code, a.shape, _chunks_of(a, code)))
    write(path, specs, metadata, fsync=fsync)


def save_index(path, weight_map, metadata=None):
    """Write a ``model.safetensors.index.json`` (atomically) for shards
    already saved next to it: weight_map is tensor name -> shard file name."""
    path = os.fspath(path)
    body = {"metadata": dict(metadata or {}), "weight_map": dict(sorted(weight_map.items()))}
    with _atomic_replace(path, "w") as out:
        json.dump(body, out, indent=2)
        out.write("\n")
