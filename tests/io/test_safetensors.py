"""minifloat.safetensors: true dtypes, zero-copy loads, lazy access, atomic
saves, sharded checkpoints, header validation (and a fuzz of the parser),
round trips with the real safetensors package (where installed)."""
import json
import os
import struct
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st_

import minifloat as mf
import minifloat.io.safetensors as mst

# safetensors' Dtype enum (safetensors/src/tensor.rs), in its order
SAFETENSORS_DTYPES = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3",
                      "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32",
                      "U32", "F32", "C64", "F64", "I64", "U64"]


def raw_file(path, header, data=b"", pad=True):
    """Write a safetensors file from a header (dict, or str/bytes taken as is)."""
    if isinstance(header, dict):
        hb = json.dumps(header).encode()
    elif isinstance(header, str):
        hb = header.encode()
    else:
        hb = header
    if pad:
        hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)
    return path


def some_tensors():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    return {
        "bf16": x.astype(mf.bfloat16),
        "e4m3": x.astype(mf.float8_e4m3fn),
        "e5m2": x.astype(mf.float8_e5m2),
        "e8m0": np.abs(x).astype(mf.float8_e8m0fnu),
        "e4m3fnuz": x.astype(mf.float8_e4m3fnuz),
        "e5m2fnuz": x.astype(mf.float8_e5m2fnuz),
        "f6a": x.astype(mf.float6_e2m3fn),
        "f6b": x.astype(mf.float6_e3m2fn),
        "f4": x.astype(mf.float4_e2m1fn),
        "f16": x.astype(np.float16),
        "f32": x,
        "f64": x.astype(np.float64),
        "c64": (x + 1j * x).astype(np.complex64),
        "i8": np.arange(-12, 12, dtype=np.int8).reshape(4, 6),
        "u8": np.arange(24, dtype=np.uint8).reshape(4, 6),
        "i16": np.arange(24, dtype=np.int16), "u16": np.arange(24, dtype=np.uint16),
        "i32": np.arange(24, dtype=np.int32), "u32": np.arange(24, dtype=np.uint32),
        "i64": np.arange(24, dtype=np.int64) - 2**40, "u64": np.arange(24, dtype=np.uint64) + 2**63,
        "bool": np.arange(24).reshape(2, 12) % 3 == 0,
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 3), mf.bfloat16),
    }


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_dtype_table_is_safetensors_enum():
    assert list(mst.DTYPES) == SAFETENSORS_DTYPES
    assert mst.DTYPES["BF16"] == np.dtype(mf.bfloat16)
    assert mst.DTYPES["F8_E4M3"] == np.dtype(mf.float8_e4m3fn)
    assert mst.DTYPES["F8_E8M0"] == np.dtype(mf.float8_e8m0fnu)
    assert mst.DTYPES["F4"] == np.dtype(mf.float4_e2m1fn)
    for code, dt in mst.DTYPES.items():
        assert mst.code_of(dt) == code
    assert mst.code_of(np.dtype(">f4")) == "F32"
    assert mst.code_of(np.complex128) is None and mst.code_of(mf.int4) is None


def test_round_trip_every_dtype(tmp_path):
    t = some_tensors()
    p = tmp_path / "m.safetensors"
    mst.save(p, t, metadata={"format": "np", "note": "ü"})
    for mmap in (True, False):
        back = mst.load(p, mmap=mmap)
        assert set(back) == set(t)
        for k in t:
            assert same_bits(back[k], t[k]), k
    with mst.open(p) as f:
        assert f.metadata() == {"format": "np", "note": "ü"}
        assert sorted(f.keys()) == sorted(t)


def test_mmap_is_zero_copy_and_read_only(tmp_path):
    p = tmp_path / "m.safetensors"
    mst.save(p, some_tensors())
    with mst.open(p) as f:
        whole = f._buffer(str(p))
        for k in f.keys():
            a = f.get_tensor(k)
            if f.info(k).dtype in ("F4", "F6_E2M3", "F6_E3M2"):
                assert not np.shares_memory(a, whole)        # unpacked: a copy (documented)
            elif a.size:
                assert np.shares_memory(a, whole), k
                assert not a.flags.writeable
    loaded = mst.load(p)
    assert not loaded["bf16"].flags.writeable
    copy = mst.load(p, mmap=False)
    assert copy["bf16"].flags.writeable and not np.shares_memory(copy["bf16"], loaded["bf16"])


def test_byte_order_and_ml_dtypes_arrays(tmp_path):
    p = tmp_path / "m.safetensors"
    x = np.arange(6, dtype=">f4")
    mst.save(p, {"x": x})
    assert same_bits(mst.load(p)["x"], x.astype("<f4"))
    ml = pytest.importorskip("ml_dtypes")
    y = np.arange(6, dtype=np.float32).astype(ml.bfloat16)
    mst.save(p, {"y": y, "f4": np.zeros(4, ml.float4_e2m1fn) + 1})
    back = mst.load(p)
    assert back["y"].dtype == mf.bfloat16 and back["y"].tobytes() == y.tobytes()
    assert back["f4"].astype(np.float32).tolist() == [1.0] * 4


def test_save_refuses(tmp_path):
    p = tmp_path / "m.safetensors"
    with pytest.raises(TypeError, match="complex128"):
        mst.save(p, {"c": np.zeros(2, np.complex128)})
    with pytest.raises(TypeError, match="int4"):
        mst.save(p, {"c": np.zeros(2, mf.int4)})
    with pytest.raises(ValueError, match="whole bytes"):
        mst.save(p, {"f4": np.zeros(3, mf.float4_e2m1fn)})
    with pytest.raises(TypeError, match="metadata"):
        mst.save(p, {"a": np.zeros(2)}, metadata={"n": 1})
    with pytest.raises(ValueError, match="reserved"):
        mst.save(p, {"__metadata__": np.zeros(2)})
    assert not p.exists()


def test_save_is_atomic(tmp_path):
    p = tmp_path / "m.safetensors"
    mst.save(p, {"a": np.arange(4, dtype=np.float32)})
    before = p.read_bytes()

    def broken():
        yield b"\0" * 8
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        mst.write(p, [("a", "F32", (4,), broken())])
    assert p.read_bytes() == before                   # the old file, untouched
    assert os.listdir(tmp_path) == ["m.safetensors"]  # no temporary file left


@pytest.fixture
def background(monkeypatch):
    """write() on its background thread for any size, with small buffers
    (chunks split across several), whatever the core count."""
    monkeypatch.setattr(mst, "_BACKGROUND_MIN", 0)
    monkeypatch.setattr(mst, "_BACKGROUND_BUF", 1000)
    monkeypatch.setattr(mst._core, "get_num_threads", lambda: 2)


def _chunked(arr, sizes, reuse):
    """arr's bytes in chunks of `sizes`; with `reuse`, every chunk in the same
    buffer, overwritten for the next one (as a converter's scratch array)."""
    b = arr.view(np.uint8).reshape(-1)
    scratch = np.empty(max(sizes), np.uint8)
    o = 0
    for n in sizes:
        if reuse:
            c = scratch[:n]
            c[...] = b[o:o + n]
            yield c
            c[...] = 0xEE                     # the producer moves on at once
        else:
            yield b[o:o + n]
        o += n


@pytest.mark.parametrize("reuse", [False, True])
def test_background_writer_same_bytes(tmp_path, background, reuse):
    x = np.random.default_rng(0).integers(0, 1 << 16, 20011).astype(np.uint16).view(mf.bfloat16)
    y = np.arange(7, dtype=np.float32)
    sizes = [1, 999, 1000, 1001, 4000, 17, 5000, 28004]
    assert sum(sizes) == x.nbytes
    p = tmp_path / "bg.safetensors"
    mst.write(p, [("x", "BF16", x.shape, _chunked(x, sizes, reuse)),
                  ("y", "F32", y.shape, [y, b""])])
    q = tmp_path / "plain.safetensors"
    mst.save(q, {"x": x, "y": y})
    assert p.read_bytes() == q.read_bytes()


def test_lent_buffers_written_without_a_copy(tmp_path, background, monkeypatch):
    """lend_buffer(): a chunk computed into the writer's own buffer is
    queued as it is (no copy); a chunk that does not start at the lent
    buffer, one too large to lend, a buffer lent but never yielded, and no
    write() running: the copy (or None), and the same bytes either way."""
    assert mst.lend_buffer(10) is None                       # no write() in this thread
    copies = []
    real = mst._BackgroundWriter.write

    def counting(self, c):
        lent = self.lent
        n = real(self, c)
        copies.append(lent is None or self.lent is not None)   # still lent: copied
        return n
    monkeypatch.setattr(mst._BackgroundWriter, "write", counting)
    x = np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8)

    def chunks():
        b = mst.lend_buffer(800)
        assert mst.lend_buffer(10) is None                   # one at a time
        np.frombuffer(b, np.uint8)[:800] = x[:800]
        yield memoryview(b)[:800]                            # no copy
        assert mst.lend_buffer(2000) is None                 # above the buffers' 1000
        yield x[800:2800]                                    # copied
        b = mst.lend_buffer(500)
        np.frombuffer(b, np.uint8)[:500] = x[2800:3300]
        yield memoryview(b)[:500]                            # no copy
        b = mst.lend_buffer(100)
        np.frombuffer(b, np.uint8)[:101] = 7
        yield memoryview(b)[1:101].tobytes() and x[3300:3400]   # not the lent memory: copied
        assert mst.lend_buffer(10) is None                   # still lent (never yielded)
        yield x[3400:]
    p = tmp_path / "lent.safetensors"
    mst.write(p, [("x", "U8", x.shape, chunks())])
    assert copies == [False, True, False, True, True]
    assert mst.load(p)["x"].tobytes() == x.tobytes()
    assert mst.lend_buffer(10) is None                       # write() is over


def test_background_writer_errors(tmp_path, background, monkeypatch):
    p = tmp_path / "m.safetensors"
    mst.save(p, {"a": np.arange(4, dtype=np.float32)})
    before = p.read_bytes()

    def broken():
        yield b"\0" * 3000
        raise RuntimeError("disk on fire")

    # the producer's error: raised as is, the old file kept, nothing left behind
    with pytest.raises(RuntimeError, match="disk on fire"):
        mst.write(p, [("a", "U8", (6000,), broken())])
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["m.safetensors"]
    # the write's own error (a full disk), on the thread: raised in the caller
    real = mst._BackgroundWriter._run

    def full_disk(self):
        class Full:
            def __init__(s, f):
                s.f, s.n = f, 0

            def write(s, b):
                s.n += len(b)
                if s.n > 2500:
                    raise OSError(28, "No space left on device")
                return s.f.write(b)

            def __getattr__(s, k):
                return getattr(s.f, k)
        self.out = Full(self.out)
        return real(self)

    monkeypatch.setattr(mst._BackgroundWriter, "_run", full_disk)
    with pytest.raises(OSError, match="No space left"):
        mst.write(p, [("a", "U8", (6000,), [b"\1" * 6000])])
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["m.safetensors"]
    assert not [t for t in threading.enumerate() if t.name == "minifloat-safetensors-writer"]


def test_convert_writes_each_chunk_during_the_next_cast(tmp_path, monkeypatch):
    """With more than one thread, convert's fused casts write the chunk
    before theirs while the threads cast (write()'s _Deferred): the file is
    byte for byte the one-thread file (which writes each chunk in turn),
    with tensors of several chunks, a tensor the kernels do not cast between
    them (written directly, after the pending chunk), and a sub-byte target
    (packed, never deferred); most chunks went through the cast's write.
    Preferred to the background writer at any size (its threshold at 0)."""
    from minifloat.io import checkpoint
    monkeypatch.setattr(mst, "_BACKGROUND_MIN", 0)
    rng = np.random.default_rng(5)
    n = 3 * (1 << 20) + 12348                      # four chunks, the last one short
    t = {"a": (rng.standard_normal(n) * 0.05).astype(np.float32).astype(mf.bfloat16),
         "b": np.arange(1000, dtype=np.int32),
         "c": (rng.standard_normal(n // 2) * 3).astype(np.float32).astype(mf.bfloat16),
         "d": (rng.standard_normal(2 * n) * 0.5).astype(np.float32)}
    src = tmp_path / "src.safetensors"
    mst.save(src, t)
    taken = []
    real = mst._Deferred.wrote
    monkeypatch.setattr(mst._Deferred, "wrote", lambda self, p, k: (taken.append((len(p), k)),
                                                                     real(self, p, k))[1])
    # the chunk written during a cast is never the buffer that cast fills
    real_stats, overlaps = mst._core._stats, []

    def stats(acc, x, target, rel, y=None, out=None, *rest):
        if len(rest) > 2 and rest[2] is not None and out is not None:
            overlaps.append(np.shares_memory(np.frombuffer(rest[2], np.uint8), out))
        return real_stats(acc, x, target, rel, y, out, *rest)
    monkeypatch.setattr(mst._core, "_stats", stats)
    prev = mf.get_num_threads()
    try:
        for to in ("float8_e4m3fn", "float4_e2m1fn"):
            out = {}
            for threads in (1, 2):
                mf.set_num_threads(threads)
                out[threads] = tmp_path / f"{to}-{threads}.safetensors"
                checkpoint.convert_file(src, out[threads], to)
            assert out[1].read_bytes() == out[2].read_bytes(), to
            assert same_bits(mst.load(out[2])["a"], t["a"].astype(getattr(mf, to)))
            if to == "float8_e4m3fn":
                # b (int32, first in the file) is written as it comes; then
                # a, c, d: 4 + 2 + 7 chunks, each but the first written
                # during the next one's cast, whole
                assert len(taken) == 12 and all(k == m for m, k in taken), taken
                assert overlaps == [False] * 12
            else:
                assert taken == []                           # packed 4-bit: not deferred
            taken.clear()
    finally:
        mf.set_num_threads(prev)
    assert mst.deferred_writer() is None                     # write() is over


def test_deferred_write_errors(tmp_path, monkeypatch):
    """A write error during the cast (here: a descriptor that cannot be
    written) is raised as the file's own write would raise it; the old
    output is kept and nothing is left behind."""
    from minifloat.io import checkpoint
    src = tmp_path / "src.safetensors"
    mst.save(src, {"a": np.linspace(-3, 3, 3 << 20, dtype=np.float32).astype(mf.bfloat16)})
    dst = tmp_path / "o.safetensors"
    mst.save(dst, {"old": np.arange(3, dtype=np.float32)})
    before = dst.read_bytes()
    real = mst._Deferred.__init__
    bad = os.open(src, os.O_RDONLY)

    def read_only_fd(self, out, at, early):
        real(self, out, at, early)
        self.fd = bad
    monkeypatch.setattr(mst._Deferred, "__init__", read_only_fd)
    prev = mf.get_num_threads()
    try:
        mf.set_num_threads(2)
        with pytest.raises(OSError) as e:
            checkpoint.convert_file(src, dst, "float8_e4m3fn")
        assert e.value.errno == 9                            # EBADF
    finally:
        mf.set_num_threads(prev)
        os.close(bad)
    assert dst.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["o.safetensors", "src.safetensors"]


def test_fsync_only_when_asked(tmp_path, monkeypatch):
    """Atomic by default (temporary file, rename); durable (fsync before the
    rename) only with fsync=True, in save, write and convert_file."""
    from minifloat.io import checkpoint
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    p = tmp_path / "m.safetensors"
    x = {"a": np.arange(8, dtype=np.float32).astype(mf.bfloat16)}
    mst.save(p, x)
    assert synced == []
    mst.save(p, x, fsync=True)
    assert len(synced) == 1
    checkpoint.convert_file(p, tmp_path / "o.safetensors", "float8_e4m3fn")
    assert len(synced) == 1
    checkpoint.convert_file(p, tmp_path / "o.safetensors", "float8_e4m3fn", fsync=True)
    assert len(synced) == 2
    assert same_bits(mst.load(tmp_path / "o.safetensors")["a"], x["a"].astype(mf.float8_e4m3fn))


def _open_fds():
    return set(os.listdir("/proc/self/fd"))


def _mapping_of(a):
    """The mmap object under a tensor read with mmap=True."""
    while isinstance(a, (np.ndarray, memoryview)):
        a = a.base if isinstance(a, np.ndarray) else a.obj
    assert a is not None and type(a).__name__ == "mmap"
    return a


def test_closed_mapping_is_unmapped_off_the_callers_thread(tmp_path, monkeypatch):
    """Closing an opened checkpoint lets go of a large file mapping on a
    thread of its own (unmapping 32 MiB of touched pages takes about 1 ms);
    a mapping a view still holds stays valid and goes when the view goes,
    in the thread that drops it; a small one goes at once, here."""
    import weakref
    p = tmp_path / "m.safetensors"
    x = np.arange(4096, dtype=np.float32).astype(mf.bfloat16)
    mst.save(p, {"a": x})
    gone = []

    def watch(a):
        weakref.finalize(_mapping_of(a), lambda: gone.append(threading.current_thread().name))

    def join_release():
        for t in threading.enumerate():
            if t.name == "minifloat-release":
                t.join()

    monkeypatch.setattr(mst, "_RELEASE_MIN", 64)
    with mst.open(p) as f:
        watch(f.get_tensor("a"))
        assert not gone                               # the open file holds it
    join_release()
    assert gone == ["minifloat-release"]
    # a view kept past close: the bytes stay readable, the mapping goes with it
    gone.clear()
    with mst.open(p) as f:
        kept = f.get_tensor("a")
        watch(kept)
    join_release()
    assert not gone and same_bits(kept, x)
    del kept
    assert gone == [threading.current_thread().name]
    # below the threshold: unmapped at close, on the caller's thread
    gone.clear()
    monkeypatch.setattr(mst, "_RELEASE_MIN", 1 << 30)
    with mst.open(p) as f:
        watch(f.get_tensor("a"))
    assert gone == [threading.current_thread().name]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_replaced_file_is_released_off_the_callers_thread(tmp_path, monkeypatch):
    """Writing over an existing regular file holds the old file open across
    the rename and closes it on a thread of its own (its last close frees
    its pages; ext4 waits there for any still being written out).  The new
    content is in place at once, a reader's mapping of the old file keeps
    the old bytes, every descriptor is closed afterwards, and a FIFO, a
    symlink or a small file at the path is never held."""
    monkeypatch.setattr(mst, "_RELEASE_MIN", 64)
    closed = []
    real_close = os.close
    monkeypatch.setattr(os, "close", lambda fd: (closed.append(
        (fd, threading.current_thread().name)), real_close(fd))[1])
    p = tmp_path / "m.safetensors"
    x = {"a": np.arange(256, dtype=np.float32).astype(mf.bfloat16)}
    y = {"a": -np.arange(256, dtype=np.float32).astype(mf.bfloat16)}
    mst.save(p, x)
    assert not [n for _, n in closed if n == "minifloat-release"]      # nothing replaced
    old = mst.load(p)                    # a mapping of the file about to be replaced
    before = _open_fds()
    mst.save(p, y)
    assert same_bits(mst.load(p)["a"], y["a"]) and same_bits(old["a"], x["a"])
    for t in threading.enumerate():
        if t.name == "minifloat-release":
            t.join()
    assert [n for _, n in closed].count("minifloat-release") == 1
    assert _open_fds() <= before                     # the old file's descriptor is closed
    assert sorted(os.listdir(tmp_path)) == ["m.safetensors"]
    # not held: a file below the threshold, a FIFO, a symlink
    closed.clear()
    monkeypatch.setattr(mst, "_RELEASE_MIN", 1 << 30)
    mst.save(p, x)
    fifo = tmp_path / "f.safetensors"
    os.mkfifo(fifo)
    mst.save(fifo, x)                                # replaces the FIFO, never opens it to read
    link = tmp_path / "l.safetensors"
    link.symlink_to(p)
    monkeypatch.setattr(mst, "_RELEASE_MIN", 64)
    mst.save(link, y)                                # the link is replaced; p stays as it was
    assert same_bits(mst.load(p)["a"], x["a"]) and same_bits(mst.load(link)["a"], y["a"])
    assert not link.is_symlink()
    assert "minifloat-release" not in [n for _, n in closed]
    # a rename that fails closes the held file at once and leaves the old one
    fds = _open_fds()
    monkeypatch.setattr(os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(5, "EIO")))
    with pytest.raises(OSError, match="EIO"):
        mst.save(p, y)
    assert _open_fds() <= fds and same_bits(mst.load(p)["a"], x["a"])
    assert sorted(os.listdir(tmp_path)) == ["f.safetensors", "l.safetensors", "m.safetensors"]


def test_replacing_starts_the_writeback_early(tmp_path, monkeypatch):
    """Writing over an existing file hands each written range to the
    writeback (posix_fadvise) as it goes, once, in order, covering the
    tensor data; a new file is left to the kernel.  The bytes are the same
    either way."""
    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise on this platform")
    calls = []
    real = os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise",
                        lambda fd, off, n, adv: (calls.append((off, n, adv)), real(fd, off, n, adv)))
    monkeypatch.setattr(mst, "_EARLY_BYTES", 1000)
    x = {"a": np.arange(5000, dtype=np.float32).astype(mf.bfloat16),
         "b": np.arange(3000, dtype=np.float32)}
    p = tmp_path / "m.safetensors"

    def pieces(v):
        b = v.view(np.uint8)
        return (memoryview(b[i:i + 1500]) for i in range(0, b.size, 1500))

    def specs():
        return [(k, mst.code_of(v.dtype), v.shape, pieces(v)) for k, v in x.items()]

    mst.write(p, specs())
    assert calls == []                                  # a new file
    first = p.read_bytes()
    mst.write(p, specs())                                # over the existing one
    assert p.read_bytes() == first
    assert calls and all(adv == os.POSIX_FADV_DONTNEED for _, _, adv in calls)
    ends = [o + n for o, n, _ in calls]
    assert [o for o, _, _ in calls[1:]] == ends[:-1]     # consecutive ranges
    header_end = 8 + struct.unpack("<Q", first[:8])[0]
    assert calls[0][0] == header_end and all(n >= 1000 for _, n, _ in calls)
    assert len(first) - ends[-1] < 1000 + 1500            # all but the last stretch
    assert sorted(os.listdir(tmp_path)) == ["m.safetensors"]
    for k, v in mst.load(p).items():
        assert same_bits(v, x[k])


def test_get_slice_reads_what_it_needs(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((10, 8, 4)).astype(np.float32)
    t = {"f32": x, "bf16": x.astype(mf.bfloat16), "f4": x.astype(mf.float4_e2m1fn),
         "f6": x.astype(mf.float6_e3m2fn)}
    p = tmp_path / "m.safetensors"
    mst.save(p, t)
    idxs = [np.s_[3], np.s_[-1], np.s_[2:5], np.s_[::-3], np.s_[7:2:-2], np.s_[1:3, 2:, ::2],
            np.s_[..., 1], np.s_[5:5], np.s_[:, [1, 3]], np.s_[4, 3, 2]]
    with mst.open(p) as f:
        for k, a in t.items():
            s = f.get_slice(k)
            assert s.get_shape() == [10, 8, 4] and s.get_dtype() == mst.code_of(a.dtype)
            for idx in idxs:
                assert same_bits(np.asarray(s[idx]), np.asarray(a[idx])), (k, idx)
    odd = {"f4": (np.arange(18, dtype=np.float32) % 7).reshape(6, 3).astype(mf.float4_e2m1fn),
           "f6": np.arange(8, dtype=np.float32).reshape(4, 2).astype(mf.float6_e2m3fn)}
    mst.save(tmp_path / "odd.safetensors", odd)       # rows that do not fill whole bytes
    with mst.open(tmp_path / "odd.safetensors") as g:
        for k, a in odd.items():
            for idx in (np.s_[1], np.s_[1:3], np.s_[::-1, 1], np.s_[-1]):
                assert same_bits(np.asarray(g.get_slice(k)[idx]), np.asarray(a[idx])), (k, idx)
    with mst.open(p) as f:
        seen = []
        real = mst._unpack
        monkeypatch.setattr(mst, "_unpack", lambda b, *a: seen.append(b.size) or real(b, *a))
        f.get_slice("f4")[3]
        assert seen == [16]               # one row of 32 four-bit values, not 160 bytes
        with pytest.raises(IndexError):
            f.get_slice("f4")[10]
        with pytest.raises(KeyError, match="nope"):
            f.get_tensor("nope")


def test_sharded_index(tmp_path):
    t = some_tensors()
    names = sorted(t)
    a, b = names[::2], names[1::2]
    mst.save(tmp_path / "model-00001-of-00002.safetensors", {k: t[k] for k in a})
    mst.save(tmp_path / "model-00002-of-00002.safetensors", {k: t[k] for k in b})
    wm = {k: "model-00001-of-00002.safetensors" for k in a}
    wm.update({k: "model-00002-of-00002.safetensors" for k in b})
    idx = tmp_path / "model.safetensors.index.json"
    mst.save_index(idx, wm, {"total_size": "123"})
    back = mst.load(idx)
    assert set(back) == set(t) and all(same_bits(back[k], t[k]) for k in t)
    with mst.open(idx) as f:
        assert f.metadata() == {"total_size": "123"} and len(f.files()) == 2
        assert same_bits(f.get_slice("f32")[1:3], t["f32"][1:3])
    wm["ghost"] = "model-00001-of-00002.safetensors"
    mst.save_index(idx, wm)
    with pytest.raises(ValueError, match="ghost"):
        mst.load(idx)


# --------------------------------------------------------------------------- validation

def _ok_header():
    return {"__metadata__": {"a": "b"},
            "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "v": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]}}


BAD = [
    # (header or raw bytes, data, message, tensor named)
    ({"w": {"dtype": "F31", "shape": [2], "data_offsets": [0, 8]}}, 8, "unknown dtype", "w"),
    ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, 8, "takes 12 bytes", "w"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 12, "overlap", "v"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "v": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}}, 20, "hole", "v"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, 8, "end before", "w"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, 8, "past the end", "w"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 12, "cover 8 bytes", None),
    ({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, 8, "shape", "w"),
    ({"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, 8, "shape", "w"),
    ({"w": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, 4, "shape", "w"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, 8, "data_offsets", "w"),
    ({"w": {"dtype": "F32", "shape": [2]}}, 8, "no data_offsets", "w"),
    ({"w": [1, 2]}, 0, "not a JSON object", "w"),
    ({"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}, 1, "whole bytes", "w"),
    ({"w": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, 8, "takes", "w"),
    ({"__metadata__": {"a": 1}}, 0, "__metadata__", None),
    ('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
     '"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', 8, "twice", "w"),
    ('{"w": ', 0, "not JSON", None),
    ('{"w": NaN}', 0, "not JSON", None),
    ("[1, 2]", 0, "start with", None),
    ("[" * 100000, 0, "start with", None),
    ('{"a":' * 100000, 0, "not JSON", None),
    (b'{"\xff": 1}', 0, "UTF-8", None),
]


@pytest.mark.parametrize("header, ndata, msg, name", BAD)
def test_invalid_headers_raise_value_error(tmp_path, header, ndata, msg, name):
    p = raw_file(tmp_path / "bad.safetensors", header, b"\0" * ndata)
    for fn in (mst.load, mst.open):
        with pytest.raises(ValueError, match=msg) as e:
            fn(p)
        assert str(p) in str(e.value)
        if name is not None:
            assert f"tensor {name!r}" in str(e.value)


def test_invalid_lengths(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\1\2\3")
    with pytest.raises(ValueError, match="3 bytes long"):
        mst.load(p)
    p.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="past the end of the file"):
        mst.load(p)
    p.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    with pytest.raises(ValueError, match="limit"):
        mst.load(p)
    p.write_bytes(struct.pack("<Q", 2) + b"{}")
    assert mst.load(p) == {}
    raw_file(p, _ok_header(), b"\0" * 24)
    assert set(mst.load(p)) == {"w", "v"}


# --------------------------------------------------------------------------- fuzz

def _corpus():
    """A small corpus of files (valid and nearly valid) to mutate."""
    out = []
    for header, data in [(_ok_header(), 24), ({}, 0),
                         ({"e": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [0, 0]},
                           "s": {"dtype": "F4", "shape": [2, 2], "data_offsets": [0, 2]}}, 2),
                         ({"a": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]},
                           "b": {"dtype": "U8", "shape": [], "data_offsets": [3, 4]}}, 4)]:
        hb = json.dumps(header).encode()
        hb += b" " * (-len(hb) % 8)
        out.append(struct.pack("<Q", len(hb)) + hb + bytes(range(data)))
    return out


CORPUS = _corpus()


def _check_parse(buf):
    try:
        start, tensors, meta = mst.parse_header(buf, len(buf), "fuzz")
    except ValueError as e:
        assert str(e).startswith("fuzz")
        return None
    # what it accepts is consistent: spans tile the data exactly
    pos = 0
    for info in sorted(tensors.values(), key=lambda i: (i.begin, i.end)):
        assert info.begin == pos and info.end >= info.begin
        pos = info.end
    assert start + pos == len(buf)
    assert all(isinstance(v, str) for v in meta.values())
    return tensors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st_.sampled_from(CORPUS), st_.lists(st_.tuples(st_.integers(0, 10**6), st_.integers(0, 255)),
                                           max_size=6), st_.integers(0, 10**6), st_.booleans())
def test_fuzz_parse_header_mutations(base, edits, cut, truncate):
    buf = bytearray(base)
    for pos, val in edits:
        buf[pos % len(buf)] = val
    if truncate:
        buf = buf[:cut % (len(buf) + 1)]
    _check_parse(bytes(buf))


@st_.composite
def _headers(draw):
    """A valid header (and its data size), then perhaps one field spoilt."""
    names = draw(st_.lists(st_.text(max_size=3), max_size=4, unique=True))
    header, off = {}, 0
    for name in names:
        code = draw(st_.sampled_from(SAFETENSORS_DTYPES))
        shape = draw(st_.lists(st_.integers(0, 4), max_size=3))
        size, whole = mst._nbytes(code, shape)
        if not whole:
            shape = shape + [8]
            size, _ = mst._nbytes(code, shape)
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [off, off + size]}
        off += size
    spoil = draw(st_.sampled_from(["none", "dtype", "shape", "begin", "end", "data", "swap"]))
    if names and spoil != "none":
        e = header[draw(st_.sampled_from(names))]
        if spoil == "dtype":
            e["dtype"] = draw(st_.sampled_from(SAFETENSORS_DTYPES + ["F31", "bf16"]))
        elif spoil == "shape":
            e["shape"] = draw(st_.lists(st_.integers(0, 9), max_size=3))
        elif spoil in ("begin", "end"):
            e["data_offsets"][spoil == "end"] = draw(st_.integers(0, off + 8))
        elif spoil == "swap":
            e["data_offsets"].reverse()
    if spoil == "data":
        off = draw(st_.integers(0, off + 8))
    return header, off


@settings(max_examples=200, deadline=None)
@given(_headers())
def test_fuzz_parse_header_agrees_with_safetensors(case):
    header, ndata = case
    hb = json.dumps(header).encode()
    buf = struct.pack("<Q", len(hb)) + hb + b"\0" * ndata
    ours = _check_parse(buf)
    try:
        from safetensors import deserialize
    except ImportError:
        return
    try:
        deserialize(buf)
        theirs = True
    except Exception:
        theirs = False
    assert (ours is not None) == theirs, (header, ndata)


# --------------------------------------------------------------------------- the real library

def _torch_tensors(torch):
    g = torch.Generator().manual_seed(0)
    dts = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint16, torch.int32, torch.uint32,
           torch.int64, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
           torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
           torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2]
    t = {}
    for d in dts:
        if d == torch.bool:
            t["bool"] = torch.randint(0, 2, (3, 8), generator=g).bool()
        else:
            b = torch.randint(0, 256, (3, 8 * d.itemsize), dtype=torch.uint8, generator=g)
            t[str(d).split(".")[-1]] = b.view(d)
    return t


def _torch_bytes(x):
    import torch

    return x.numpy().tobytes() if x.dtype == torch.bool else x.view(torch.uint8).numpy().tobytes()


def test_torch_round_trip_bit_for_bit(tmp_path):
    torch = pytest.importorskip("torch")
    storch = pytest.importorskip("safetensors.torch")
    t = _torch_tensors(torch)
    theirs = tmp_path / "theirs.safetensors"
    storch.save_file(t, str(theirs))
    ours = mst.load(theirs)
    for k, x in t.items():
        a = ours[k]
        if k == "float4_e2m1fn_x2":        # packed in torch; one value per byte here
            assert a.dtype == mf.float4_e2m1fn and a.shape == (3, 16)
            assert mf.pack(a).tobytes() == _torch_bytes(x)
        else:
            assert str(a.dtype) == k if k != "float8_e8m0fnu" else a.dtype == mf.float8_e8m0fnu
            assert a.shape == tuple(x.shape) and a.tobytes() == _torch_bytes(x), k
    again = tmp_path / "ours.safetensors"
    mst.save(again, ours)
    back = storch.load_file(str(again))
    for k, x in t.items():
        assert back[k].dtype == x.dtype and back[k].shape == x.shape
        assert _torch_bytes(back[k]) == _torch_bytes(x), k
    assert again.read_bytes() == theirs.read_bytes()   # the very same bytes as safetensors writes
    mst.save(again, ours, metadata={"format": "pt"})
    with __import__("safetensors").safe_open(str(again), "pt") as f:
        assert f.metadata() == {"format": "pt"}


def test_numpy_loader_reads_our_files(tmp_path):
    snp = pytest.importorskip("safetensors.numpy")
    t = {k: v for k, v in some_tensors().items() if mst.code_of(v.dtype) in
         {"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "F32", "F64", "C64"}}
    p = tmp_path / "m.safetensors"
    mst.save(p, t)
    back = snp.load_file(str(p))
    assert set(back) == set(t) and all(same_bits(back[k], t[k]) for k in t)
