"""DLPack exchange without any framework: a hand-made producer (the test-only
extension tests/dlpack_producer/, built by _dlpack_producer.py) covers
versions, flags, devices, strides, sub-byte layouts and malformed tensors;
minifloat.dlpack covers export."""
import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc

import numpy as np
import pytest

import minifloat
from minifloat import _core, exchange

FORMATS = _core.formats()
BYTE_FORMATS = [f for f in FORMATS if f["dlpack_bits"] == 8 * f["itemsize"]]
SUBBYTE_FORMATS = [f for f in FORMATS if f["dlpack_bits"] < 8 * f["itemsize"]]

READ_ONLY, IS_COPIED, PADDED = 1, 2, 4
CPU, CUDA, CUDA_HOST, OPENCL, ROCM, ROCM_HOST, CUDA_MANAGED = 1, 2, 3, 4, 10, 11, 13
BUILTIN = [  # (code, bits) -> NumPy dtype: DLPack's own ABI table
    ((6, 8), np.bool_), ((0, 8), np.int8), ((0, 16), np.int16), ((0, 32), np.int32),
    ((0, 64), np.int64), ((1, 8), np.uint8), ((1, 16), np.uint16), ((1, 32), np.uint32),
    ((1, 64), np.uint64), ((2, 16), np.float16), ((2, 32), np.float32), ((2, 64), np.float64),
    ((5, 64), np.complex64), ((5, 128), np.complex128),
]


# ---------------------------------------------------------------- helpers

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


class _Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype, _get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_get_ptr.restype, _get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def capsule_name(cap):
    return _get_name(cap).decode()


def capsule_info(cap):
    """The fields of an unused DLPack capsule, read through the ABI."""
    name = _get_name(cap)
    p = _get_ptr(cap, name)
    if name == b"dltensor_versioned":
        m = _Versioned.from_address(p)
        info = {"version": (m.major, m.minor), "flags": m.flags}
        t = m.dl_tensor
    else:
        assert name == b"dltensor"
        info = {"version": None, "flags": None}
        t = _Legacy.from_address(p).dl_tensor
    info.update(
        name=name.decode(), data=t.data or 0, device=(t.device_type, t.device_id),
        dtype=(t.code, t.bits, t.lanes),
        shape=tuple(t.shape[i] for i in range(t.ndim)) if t.shape else None,
        strides=tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None,
        byte_offset=t.byte_offset)
    return info


_producer = None


@pytest.fixture(autouse=True, scope="module")
def _with_producer(dlpack_producer):
    global _producer
    _producer = dlpack_producer


def producer():
    """The test-only DLPack producer (conftest's dlpack_producer fixture)."""
    return _producer


def deleter_calls():
    return producer().deleter_stats()["calls"]


def make(buf=None, **kw):
    """A test capsule viewing `buf` (an ndarray; shape/dtype default from it)."""
    if buf is not None:
        kw.setdefault("data", buf)
        kw.setdefault("shape", buf.shape)
    return producer().make_capsule(**kw)


def data_ptr(a):
    return a.__array_interface__["data"][0]


def run_child(code, *args):
    """Run `code` in a fresh interpreter (python -c code *args), which must
    print "ok": for calls that may abort the process (a framework's DLPack
    import), so that an abort fails the test instead of ending the run."""
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=300)
    signal = f" (killed by signal {-r.returncode})" if r.returncode < 0 else ""
    assert r.returncode == 0 and r.stdout.strip() == "ok", \
        f"exit {r.returncode}{signal}\n{r.stderr[-3000:]}"


def pack_ref(values, bits):
    """DLPack's packed layout, little bit-endian, in pure Python (the reference)."""
    acc = 0
    for i, v in enumerate(values):
        acc |= (int(v) & ((1 << bits) - 1)) << (i * bits)
    return acc.to_bytes((len(values) * bits + 7) // 8, "little")


def unpack_ref(data, bit_offsets, bits):
    acc = int.from_bytes(bytes(data), "little")
    return [(acc >> p) & ((1 << bits) - 1) for p in bit_offsets]


class Producer:
    """A DLPack producer that records how it was asked (tests of the handshake)."""

    def __init__(self, make_capsule, device=(CPU, 0)):
        self.make_capsule = make_capsule
        self.device = device
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version, dl_device=dl_device,
                               copy=copy))
        return self.make_capsule(max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self.device


class OldProducer:
    """A producer written before the 2023.12 protocol: only `stream`."""

    def __init__(self, cap_factory):
        self.cap_factory = cap_factory
        self.calls = 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.cap_factory()

    def __dlpack_device__(self):
        return (CPU, 0)


# ---------------------------------------------------------------- dtypes

@pytest.mark.parametrize("f", BYTE_FORMATS, ids=lambda f: f["name"])
def test_minifloat_codes_import_as_minifloat_dtypes(f):
    buf = np.arange(12, dtype=np.uint8).view(f"u{f['itemsize']}")
    a = minifloat.from_dlpack(make(buf, dtype=(f["dlpack_code"], f["dlpack_bits"], 1)))
    assert a.dtype == f["dtype"]
    assert np.shares_memory(a, buf) and data_ptr(a) == data_ptr(buf)
    assert a.view(buf.dtype).tolist() == buf.tolist()


@pytest.mark.parametrize("codebits,np_type", BUILTIN, ids=str)
def test_builtin_codes_import_as_numpy_dtypes(codebits, np_type):
    buf = np.zeros(3, np_type)
    a = minifloat.from_dlpack(make(buf.view(np.uint8), shape=(3,), dtype=(*codebits, 1)))
    assert a.dtype == np.dtype(np_type) and a.shape == (3,)
    assert data_ptr(a) == data_ptr(buf)


@pytest.mark.parametrize("code,bits", [(4, 8), (4, 32), (2, 8), (2, 128), (5, 32), (3, 64),
                                       (6, 1), (99, 8), (10, 16), (15, 8), (17, 8), (0, 3)])
def test_unknown_dtype_raises_and_leaves_capsule_to_producer(code, bits):
    buf = np.zeros(8, np.uint8)
    before = deleter_calls()
    cap = make(buf, shape=(2,), dtype=(code, bits, 1))
    with pytest.raises(BufferError, match=f"Unsupported dtype in DLTensor: code {code} .*bits {bits}"):
        minifloat.from_dlpack(cap)
    assert capsule_name(cap) == "dltensor_versioned"   # not consumed
    assert deleter_calls() == before
    del cap
    assert deleter_calls() == before + 1               # the producer's destructor freed it


def test_dtype_from_dlpack_is_derived_from_the_format_table():
    for f in FORMATS:
        dt, subbits = _core._dtype_from_dlpack(f["dlpack_code"], f["dlpack_bits"])
        assert dt == f["dtype"]
        assert subbits == (f["dlpack_bits"] if f["dlpack_bits"] < 8 * f["itemsize"] else 0)
        assert _core._dlpack_dtype(f["dtype"])[:2] == (f["dlpack_code"], f["dlpack_bits"])


# ---------------------------------------------------------------- layouts

def test_strided_transposed_zero_and_negative_strides_view_the_buffer():
    buf = np.arange(24, dtype=np.float32)
    cases = [  # shape, strides (elements), first element
        ((3, 4), (4, 1), 0),       # C-contiguous, explicit
        ((3, 4), None, 0),         # NULL strides: C-contiguous (producers before 1.2)
        ((4, 3), (1, 4), 0),       # transposed
        ((3, 4), (8, 2), 1),       # non-contiguous, with a byte_offset
        ((3, 4), (0, 1), 0),       # zero stride (broadcast)
        ((5,), (-2,), 10),         # negative stride from the 11th element
    ]
    for shape, strides, first in cases:
        cap = make(buf, shape=shape, strides=strides, byte_offset=4 * first, dtype=(2, 32, 1))
        a = minifloat.from_dlpack(cap)
        st = strides or (shape[1], 1)
        expect = [buf[first + int(np.dot(i, st))] for i in np.ndindex(*shape)]
        assert a.shape == shape and a.strides == tuple(4 * s for s in st)
        assert np.shares_memory(a, buf) and data_ptr(a) == data_ptr(buf) + 4 * first
        assert a.ravel().tolist() == expect


def test_byte_offset():
    buf = np.arange(16, dtype=np.uint16).view(minifloat.bfloat16)
    a = minifloat.from_dlpack(make(buf.view(np.uint8), shape=(4,), byte_offset=6, dtype=(4, 16, 1)))
    assert data_ptr(a) == data_ptr(buf) + 6
    assert a.view(np.uint16).tolist() == [3, 4, 5, 6]


def test_zero_dim_and_empty_tensors():
    buf = np.array([2.5], np.float64)
    a = minifloat.from_dlpack(make(buf, shape=(), dtype=(2, 64, 1)))
    assert a.shape == () and a[()] == 2.5 and np.shares_memory(a, buf)
    # shape and strides NULL with ndim 0
    a = minifloat.from_dlpack(make(data=buf, shape=None, strides=None, ndim=0, dtype=(2, 64, 1)))
    assert a.shape == () and a[()] == 2.5
    del a
    # empty with NULL data: a new empty array, the tensor released at once
    before = deleter_calls()
    e = minifloat.from_dlpack(make(shape=(0, 3), dtype=(4, 16, 1)))
    assert e.shape == (0, 3) and e.dtype == minifloat.bfloat16
    assert deleter_calls() == before + 1
    # empty with data: still a view
    a = minifloat.from_dlpack(make(buf, shape=(2, 0), dtype=(2, 64, 1)))
    assert a.shape == (2, 0)


# ---------------------------------------------------------------- flags and versions

def test_read_only_flag_and_legacy_capsules_give_non_writeable_arrays():
    buf = np.zeros(4, np.float32)
    assert minifloat.from_dlpack(make(buf, dtype=(2, 32, 1))).flags.writeable
    ro = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), flags=READ_ONLY))
    assert not ro.flags.writeable
    with pytest.raises(ValueError):
        ro[0] = 1
    # a legacy capsule cannot say whether it may be written: read-only, as NumPy does
    assert not minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), versioned=False)).flags.writeable


@pytest.mark.parametrize("major", [0, 2, 7])
def test_unknown_major_version_is_refused(major):
    buf = np.zeros(4, np.float32)
    before = deleter_calls()
    cap = make(buf, dtype=(2, 32, 1), version=(major, 0))
    with pytest.raises(BufferError, match=f"major version {major}"):
        minifloat.from_dlpack(cap)
    assert capsule_name(cap) == "dltensor_versioned"
    del cap
    assert deleter_calls() == before + 1


def test_newer_minor_versions_are_read():
    buf = np.arange(4, dtype=np.float32)
    a = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), version=(1, 99)))
    assert a.tolist() == [0, 1, 2, 3]


def test_copy_true_copies_once_and_releases_the_producer():
    buf = np.arange(4, dtype=np.float32)
    before = deleter_calls()
    a = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), flags=READ_ONLY), copy=True)
    assert deleter_calls() == before + 1       # released right after the copy
    assert not np.shares_memory(a, buf) and a.flags.writeable and a.base is None
    assert a.tolist() == [0, 1, 2, 3]
    # the producer says it copied already: no second copy
    a = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), flags=IS_COPIED), copy=True)
    assert np.shares_memory(a, buf)


# ---------------------------------------------------------------- malformed

@pytest.mark.parametrize("kw,msg", [
    (dict(shape=(2, -3)), "shape\\[1\\] is -3"),
    (dict(shape=None, ndim=2), "shape is NULL"),
    (dict(shape=(4,), ndim=-1), "ndim is -1"),
    (dict(shape=(4,), ndim=65), "ndim is 65"),
    (dict(shape=(1 << 40, 1 << 40)), "overflows"),
    (dict(shape=(4,), dtype=(2, 32, 0)), "lanes is 0"),
    (dict(shape=(4,), dtype=(2, 32, 4)), "Unsupported lanes"),
    (dict(shape=(4,), dtype=(4, 16, 2)), "Unsupported lanes"),
    (dict(shape=(4,), strides=(1 << 62,)), "strides\\[0\\]"),
])
def test_malformed_tensors_raise_buffer_error(kw, msg):
    buf = np.zeros(64, np.uint8)
    kw.setdefault("dtype", (2, 32, 1))
    before = deleter_calls()
    cap = make(data=buf, **kw)
    with pytest.raises(BufferError, match=msg):
        minifloat.from_dlpack(cap)
    del cap
    assert deleter_calls() == before + 1


def test_null_data_for_a_non_empty_tensor():
    with pytest.raises(BufferError, match="data is NULL"):
        minifloat.from_dlpack(make(shape=(3,), dtype=(2, 32, 1)))


def test_capsule_names():
    buf = np.zeros(4, np.float32)
    cap = make(buf, dtype=(2, 32, 1))
    minifloat.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="already consumed"):
        minifloat.from_dlpack(cap)
    cap = make(buf, dtype=(2, 32, 1), versioned=False)
    minifloat.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor"

    class Bad:
        def __init__(self, ret):
            self.ret = ret

        def __dlpack__(self, **kw):
            return self.ret

        def __dlpack_device__(self):
            return (CPU, 0)

    with pytest.raises(TypeError, match="must return a PyCapsule"):
        minifloat.from_dlpack(Bad(3))
    wrong = ctypes.pythonapi.PyCapsule_New
    wrong.restype, wrong.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.c_void_p]
    with pytest.raises(ValueError, match='named "other"'):
        minifloat.from_dlpack(Bad(wrong(buf.ctypes.data, b"other", None)))


def test_no_deleter_is_allowed():
    buf = np.arange(3, dtype=np.float32)
    a = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), deleter=False))
    assert a.tolist() == [0, 1, 2]
    del a


def test_bad_arguments():
    buf = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match='Only "cpu" is allowed'):
        minifloat.from_dlpack(make(buf, dtype=(2, 32, 1)), device="cuda")
    with pytest.raises(TypeError, match="unexpected keyword"):
        minifloat.from_dlpack(buf, stream=None)
    with pytest.raises(TypeError, match="exactly 1 positional"):
        minifloat.from_dlpack()
    with pytest.raises(TypeError, match="__dlpack__"):
        minifloat.from_dlpack([1, 2])


# ---------------------------------------------------------------- devices

@pytest.mark.parametrize("dev", [CPU, CUDA_HOST, ROCM_HOST, CUDA_MANAGED])
def test_host_addressable_devices_are_zero_copy(dev):
    buf = np.arange(4, dtype=np.float32)
    a = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1), device=(dev, 1)))
    assert np.shares_memory(a, buf) and a.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("dev,name", [(CUDA, "kDLCUDA"), (ROCM, "kDLROCM"), (OPENCL, "kDLOpenCL"),
                                      (7, "kDLVulkan"), (8, "kDLMetal"), (14, "kDLOneAPI"),
                                      (18, "kDLTrn"), (99, "unknown device type")])
def test_device_memory_is_never_dereferenced(dev, name):
    # the address is not mapped: touching it would crash the test process
    before = deleter_calls()
    cap = make(address=0x10, shape=(1 << 20,), dtype=(2, 32, 1), device=(dev, 3))
    with pytest.raises(BufferError, match=f"{name} \\({dev}\\), device 3 is not addressable "
                                          f"from the CPU; pass device='cpu'"):
        minifloat.from_dlpack(cap)
    for copy in (True, False):
        with pytest.raises(BufferError, match="not addressable"):
            minifloat.from_dlpack(cap, copy=copy)
    del cap
    assert deleter_calls() == before + 1


def _device_producer():
    """On 'CUDA' until asked for dl_device=(kDLCPU, 0), then a host copy."""
    host = np.arange(5, dtype=np.float32)

    def make_capsule(max_version, dl_device, copy):
        if dl_device == (CPU, 0):
            if copy is False:
                raise BufferError("a copy to the host is needed")
            return make(host.copy(), dtype=(2, 32, 1), flags=IS_COPIED)
        return make(address=0x10, shape=(5,), dtype=(2, 32, 1), device=(CUDA, 0))

    return Producer(make_capsule, device=(CUDA, 0))


def test_device_cpu_asks_the_producer_for_a_host_copy():
    p = _device_producer()
    with pytest.raises(BufferError, match="kDLCUDA \\(2\\), device 0 is not addressable"):
        minifloat.from_dlpack(p)
    a = minifloat.from_dlpack(p, device="cpu")
    assert p.calls[-1]["dl_device"] == (CPU, 0) and a.tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(BufferError, match="copy to the host is needed"):
        minifloat.from_dlpack(p, device="cpu", copy=False)
    assert p.calls[-1]["copy"] is False
    # asnumpy asks for the host copy unless copy=False
    assert minifloat.asnumpy(p).tolist() == [0, 1, 2, 3, 4]
    assert minifloat.asnumpy(p, np.float64).dtype == np.float64
    with pytest.raises(BufferError, match="not addressable"):
        minifloat.asnumpy(p, copy=False)


def test_old_producer_ignoring_the_cpu_request_gets_a_clear_error():
    p = OldProducer(lambda: make(address=0x10, shape=(5,), dtype=(2, 32, 1),
                                 device=(CUDA, 1)))
    with pytest.raises(BufferError, match="although a CPU copy .* was requested"):
        minifloat.from_dlpack(p, device="cpu")


# ---------------------------------------------------------------- handshake

def test_versioned_handshake_arguments():
    buf = np.arange(3, dtype=np.float32)
    p = Producer(lambda **kw: make(buf, dtype=(2, 32, 1)))
    minifloat.from_dlpack(p)
    assert p.calls == [dict(stream=None, max_version=(1, 3), dl_device=None, copy=None)]
    minifloat.from_dlpack(p, copy=False)
    assert p.calls[-1]["copy"] is False
    minifloat.from_dlpack(p, device="cpu")
    assert p.calls[-1]["dl_device"] == (CPU, 0)


def test_legacy_answer_to_a_versioned_request_is_accepted():
    buf = np.arange(3, dtype=np.float32)
    p = Producer(lambda **kw: make(buf, dtype=(2, 32, 1), versioned=False))
    a = minifloat.from_dlpack(p)
    assert a.tolist() == [0, 1, 2] and np.shares_memory(a, buf)


def test_producer_taking_only_stream_is_called_again_without_keywords():
    buf = np.arange(3, dtype=np.float32)
    p = OldProducer(lambda: make(buf, dtype=(2, 32, 1), versioned=False))
    a = minifloat.from_dlpack(p)
    assert p.calls == 1 and a.tolist() == [0, 1, 2] and np.shares_memory(a, buf)
    c = minifloat.from_dlpack(p, copy=True)        # honoured by copying here
    assert not np.shares_memory(c, buf)


def test_producer_errors_propagate():
    class Refuses:
        def __dlpack__(self, **kw):
            raise BufferError("no export for you")

        def __dlpack_device__(self):
            return (CPU, 0)

    with pytest.raises(BufferError, match="no export for you"):
        minifloat.from_dlpack(Refuses())


# ---------------------------------------------------------------- lifetime

def test_deleter_runs_once_when_the_last_view_is_gone():
    buf = np.arange(8, dtype=np.float32)
    before = deleter_calls()
    a = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1)))
    b = a[2:5]
    c = b.reshape(3, 1)
    del a, b
    gc.collect()
    assert deleter_calls() == before
    assert c.ravel().tolist() == [2, 3, 4]
    del c
    assert deleter_calls() == before + 1


@pytest.mark.thread_unsafe   # reads the all-threads deleter count
def test_deleter_runs_in_the_thread_that_drops_the_last_view_with_the_gil():
    buf = np.arange(8, dtype=np.float32)
    stats0 = producer().deleter_stats()
    holder = [minifloat.from_dlpack(make(buf, dtype=(2, 32, 1)))]
    ident = []

    def drop():
        ident.append(threading.get_ident())
        holder.clear()

    th = threading.Thread(target=drop)
    th.start()
    th.join()
    stats = producer().deleter_stats()
    assert stats["calls_all_threads"] == stats0["calls_all_threads"] + 1
    assert stats["calls"] == stats0["calls"]      # counted in the thread that ran it
    assert stats["last_thread"] == ident[0] != threading.get_ident()
    assert stats["calls_without_gil"] == stats0["calls_without_gil"]


def test_exported_capsule_deleter_may_run_without_the_gil():
    a = np.arange(5, dtype=np.float32).astype(minifloat.bfloat16)
    refs = sys.getrefcount(a)
    cap = minifloat.dlpack(a).__dlpack__(max_version=(1, 3))
    assert sys.getrefcount(a) == refs + 1
    producer().consume_without_gil(cap)        # a foreign consumer's thread, no GIL
    assert capsule_name(cap) == "used_dltensor_versioned"
    assert sys.getrefcount(a) == refs
    del cap                                       # used: the destructor does nothing
    assert sys.getrefcount(a) == refs


def test_no_leak_over_100k_round_trips():
    a = np.arange(64, dtype=np.float32).astype(minifloat.bfloat16)
    buf = np.arange(64, dtype=np.float32)
    exporter = minifloat.dlpack(a)
    refs = sys.getrefcount(a)
    for _ in range(2000):                        # warm up caches and free lists
        minifloat.from_dlpack(exporter)
        minifloat.from_dlpack(make(buf, dtype=(2, 32, 1)))
    before = deleter_calls()
    tracemalloc.start()
    try:
        m0 = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            b = minifloat.from_dlpack(exporter)            # export + import, ours both ways
            c = minifloat.from_dlpack(make(buf, dtype=(2, 32, 1)))
        del b, c
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - m0
    finally:
        tracemalloc.stop()
    assert deleter_calls() == before + 100_000
    assert sys.getrefcount(a) == refs
    assert grown < 256 * 1024, grown


# ---------------------------------------------------------------- sub-byte

@pytest.mark.parametrize("f", SUBBYTE_FORMATS, ids=lambda f: f["name"])
def test_padded_sub_byte_data_is_viewed(f):
    codes = np.arange(10, dtype=np.uint8) % (1 << f["bits"])
    a = minifloat.from_dlpack(make(codes, dtype=(f["dlpack_code"], f["dlpack_bits"], 1),
                                   flags=PADDED))
    assert a.dtype == f["dtype"] and np.shares_memory(a, codes)
    assert a.view(np.uint8).tolist() == codes.tolist()
    with pytest.raises(BufferError, match="packed"):
        minifloat.from_dlpack(make(codes, dtype=(f["dlpack_code"], f["dlpack_bits"], 1)),
                              copy=False)


@pytest.mark.parametrize("f", SUBBYTE_FORMATS, ids=lambda f: f["name"])
def test_packed_sub_byte_data_is_unpacked_bit_exact(f):
    rng = np.random.default_rng(f["dlpack_code"] * 100 + f["bits"])
    bits = f["dlpack_bits"]
    raw = np.frombuffer(rng.bytes(64), np.uint8).copy()
    dt = (f["dlpack_code"], bits, 1)
    cases = [((7, 5), None, 0), ((7, 5), (5, 1), 3), ((5, 7), (1, 5), 0),
             ((4, 3), (11, 2), 1), ((6,), (-3,), 40), ((3, 2), (0, 1), 2), ((), None, 5)]
    for shape, strides, off in cases:
        a = minifloat.from_dlpack(make(data=raw, shape=shape, strides=strides, byte_offset=off,
                                       dtype=dt, versioned=bool(off % 2)))
        st = strides or tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        idx = np.indices(shape).reshape(len(shape), -1).T if shape else np.zeros((1, 0), int)
        positions = [off * 8 + int(np.dot(i, st)) * bits for i in idx]
        expect = unpack_ref(raw, positions, bits)
        assert a.dtype == f["dtype"] and a.shape == shape and a.flags.writeable
        assert a.view(np.uint8).ravel().tolist() == expect
        assert not np.shares_memory(a, raw)


def test_lanes_of_packed_sub_byte_values_become_a_trailing_axis():
    # torch's float4_e2m1fn_x2: two fp4 values in a byte, code 17, bits 4, lanes 2
    fmt = next(f for f in FORMATS if f["name"] == "float4_e2m1fn")
    raw = np.array([0x21, 0x43, 0x65, 0x87], np.uint8)
    a = minifloat.from_dlpack(make(raw, shape=(2, 2), dtype=(fmt["dlpack_code"], 4, 2)))
    assert a.shape == (2, 2, 2) and a.dtype == minifloat.float4_e2m1fn
    assert a.view(np.uint8).ravel().tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    # padded lanes: one value per byte, a zero-copy view
    raw = np.arange(8, dtype=np.uint8)
    a = minifloat.from_dlpack(make(raw, shape=(4,), dtype=(fmt["dlpack_code"], 4, 2),
                                   flags=PADDED))
    assert a.shape == (4, 2) and np.shares_memory(a, raw)
    assert a.view(np.uint8).tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]


# ---------------------------------------------------------------- export

def _sample(dtype, shape=(4, 6)):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    f = exchange._mf_format(dtype)
    if f is not None:
        codes = np.arange(n) % (1 << min(f["bits"], 16))
        return codes.astype(f"u{f['itemsize']}").view(dtype).reshape(shape)
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    return np.arange(n).astype(dtype).reshape(shape)


EXPORT_DTYPES = [f["dtype"] for f in FORMATS] + [np.dtype(t) for _, t in BUILTIN]


@pytest.mark.parametrize("dtype", EXPORT_DTYPES, ids=str)
def test_export_round_trip_shares_memory_and_is_bit_exact(dtype):
    a = _sample(dtype)
    for view in (a, a[:, ::2], a.T, a[::-1]):
        cap = minifloat.dlpack(view).__dlpack__(max_version=(1, 3))
        info = capsule_info(cap)
        code, bits, sub = _core._dlpack_dtype(dtype)
        assert info["dtype"] == (code, bits, 1) and info["version"] == (1, 3)
        assert info["flags"] == (PADDED if sub else 0)
        assert info["strides"] == tuple(s // view.itemsize for s in view.strides)
        assert info["data"] == data_ptr(view) and info["device"] == (CPU, 0)
        b = minifloat.from_dlpack(cap)
        assert b.dtype == view.dtype and b.shape == view.shape
        assert data_ptr(b) == data_ptr(view) and b.strides == view.strides
        assert b.tobytes() == view.tobytes()


def test_export_flags_and_versions():
    a = _sample(minifloat.bfloat16)
    e = minifloat.dlpack(a)
    assert e.__dlpack_device__() == (CPU, 0)
    legacy = capsule_info(e.__dlpack__())
    assert legacy["name"] == "dltensor" and legacy["data"] == data_ptr(a)
    assert capsule_info(e.__dlpack__(max_version=(1, 0)))["version"] == (1, 0)
    assert capsule_info(e.__dlpack__(max_version=(1, 7)))["version"] == (1, 3)
    assert capsule_info(e.__dlpack__(max_version=(2, 0)))["version"] == (1, 3)
    assert capsule_info(e.__dlpack__(max_version=(0, 8)))["name"] == "dltensor"
    copied = e.__dlpack__(max_version=(1, 3), copy=True)
    info = capsule_info(copied)
    assert info["flags"] == IS_COPIED and info["data"] != data_ptr(a)
    assert minifloat.from_dlpack(copied).tobytes() == a.tobytes()
    e.__dlpack__(dl_device=(CPU, 0))
    with pytest.raises(BufferError, match="unsupported device requested: kDLCUDA"):
        e.__dlpack__(dl_device=(CUDA, 0))
    with pytest.raises(ValueError, match="stream must be None"):
        e.__dlpack__(stream=1)
    with pytest.raises(TypeError, match="max_version"):
        e.__dlpack__(max_version=3)


def test_export_of_read_only_arrays():
    a = _sample(minifloat.float8_e4m3fn)
    a.flags.writeable = False
    e = minifloat.dlpack(a)
    info = capsule_info(e.__dlpack__(max_version=(1, 3)))
    assert info["flags"] == READ_ONLY and info["data"] == data_ptr(a)
    b = minifloat.from_dlpack(e)
    assert not b.flags.writeable and np.shares_memory(a, b)
    with pytest.raises(BufferError, match="readonly"):
        e.__dlpack__()
    with pytest.raises(BufferError, match="readonly"):
        e.__dlpack__(copy=False)
    info = capsule_info(e.__dlpack__(copy=True))      # legacy: a writeable copy
    assert info["name"] == "dltensor" and info["data"] != data_ptr(a)


@pytest.mark.parametrize("f", SUBBYTE_FORMATS, ids=lambda f: f["name"])
def test_sub_byte_export_is_padded_or_a_packed_copy(f):
    a = _sample(f["dtype"], (3, 5))
    e = minifloat.dlpack(a)
    info = capsule_info(e.__dlpack__(max_version=(1, 1)))
    assert info["flags"] == PADDED and info["dtype"] == (f["dlpack_code"], f["dlpack_bits"], 1)
    for kw in ({}, {"max_version": (1, 0)}):
        with pytest.raises(BufferError, match="copy=True"):
            e.__dlpack__(**kw)
        cap = e.__dlpack__(copy=True, **kw)
        info = capsule_info(cap)
        assert info["dtype"] == (f["dlpack_code"], f["dlpack_bits"], 1)
        assert info["flags"] in (None, IS_COPIED) and info["strides"] == (5, 1)
        nbytes = (a.size * f["dlpack_bits"] + 7) // 8
        packed = ctypes.string_at(info["data"], nbytes)
        assert packed == pack_ref(a.view(np.uint8).ravel(), f["dlpack_bits"])
        back = minifloat.from_dlpack(cap)           # unpacked again
        assert back.tobytes() == a.tobytes()
    assert _core._pack_subbyte(a[:, ::-2]).tobytes() == pack_ref(
        np.ascontiguousarray(a[:, ::-2]).view(np.uint8).ravel(), f["dlpack_bits"])


@pytest.mark.parametrize("f", SUBBYTE_FORMATS, ids=lambda f: f["name"])
def test_sub_byte_export_to_jax_is_the_packed_copy(f):
    """JAX 0.12 asks for DLPack 1.3 but reads sub-byte data as packed whatever
    the padded flag says (silently wrong values): a caller in a jax module gets
    the packed copy, DLPack 1.0 (BufferError with copy=False)."""
    a = _sample(f["dtype"], (3, 5))
    e = minifloat.dlpack(a)
    caller = {"__name__": "jax._src.dlpack", "e": e}
    exec("cap = e.__dlpack__(stream=None, max_version=(1, 3))", caller)
    info = capsule_info(caller["cap"])
    assert info["flags"] == IS_COPIED and info["dtype"] == (f["dlpack_code"], f["dlpack_bits"], 1)
    nbytes = (a.size * f["dlpack_bits"] + 7) // 8
    assert ctypes.string_at(info["data"], nbytes) == pack_ref(a.view(np.uint8).ravel(),
                                                              f["dlpack_bits"])
    assert minifloat.from_dlpack(caller["cap"]).tobytes() == a.tobytes()
    with pytest.raises(BufferError, match="copy=True"):
        exec("e.__dlpack__(max_version=(1, 3), copy=False)", caller)
    # any other caller: the padded view
    assert capsule_info(e.__dlpack__(max_version=(1, 3)))["flags"] == PADDED
    # byte formats are not affected
    z = np.zeros(4, minifloat.bfloat16)
    g = dict(caller, b=minifloat.dlpack(z))
    exec("cap = b.__dlpack__(max_version=(1, 3))", g)
    info = capsule_info(g["cap"])
    assert info["data"] == data_ptr(z) and not info["flags"]       # zero-copy, as before


@pytest.mark.parametrize("bad", [np.array(["x"]), np.array([object()]), np.zeros(2, "M8[s]"),
                                 np.zeros(2, np.longdouble), np.zeros(2, ">f4"),
                                 np.zeros(2, "V3")], ids=lambda a: str(a.dtype))
def test_unexportable_dtypes(bad):
    with pytest.raises(BufferError):
        minifloat.dlpack(bad)


def test_strides_not_a_multiple_of_itemsize():
    raw = np.arange(20, dtype=np.uint8)
    weird = np.ndarray((3,), np.float32, raw.data, offset=0, strides=(6,))
    e = minifloat.dlpack(weird)
    with pytest.raises(BufferError, match="multiple of itemsize"):
        e.__dlpack__(max_version=(1, 3))
    c = minifloat.from_dlpack(e.__dlpack__(max_version=(1, 3), copy=True))
    assert c.tobytes() == weird.tobytes()


def test_ml_dtypes_arrays_are_exported_as_minifloat_views():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for f in FORMATS:
        ml = getattr(ml_dtypes, f["name"], None)
        if ml is None:
            continue
        a = np.arange(6, dtype=np.float32).astype(ml) if f["kind"] == "float" else \
            np.arange(6).astype(ml)
        b = minifloat.from_dlpack(minifloat.dlpack(a).__dlpack__(max_version=(1, 3)))
        assert b.dtype == f["dtype"] and np.shares_memory(a, b)
        assert b.tobytes() == a.tobytes()
        c = minifloat.asnumpy(a)
        assert c.dtype == f["dtype"] and np.shares_memory(a, c)


def test_ndarrays_import_as_views():
    a = _sample(minifloat.bfloat16)
    b = minifloat.from_dlpack(a)
    assert b.dtype == a.dtype and np.shares_memory(a, b) and b is not a
    assert not np.shares_memory(minifloat.from_dlpack(a, copy=True), a)
    a.flags.writeable = False
    assert not minifloat.from_dlpack(a).flags.writeable
    with pytest.raises(BufferError):
        minifloat.from_dlpack(np.array([object()]))


def test_numkong_tensors_both_ways():
    nk = pytest.importorskip("numkong")
    for name, mf_name in [("bfloat16", "bfloat16"), ("float8_e4m3", "float8_e4m3fn"),
                          ("float8_e5m2", "float8_e5m2"), ("float6_e2m3", "float6_e2m3fn"),
                          ("float6_e3m2", "float6_e3m2fn")]:
        x = nk.full((2, 3), 1.5, dtype=name)
        a = minifloat.from_dlpack(x)       # float6 arrives padded (one value per byte): a view
        assert a.dtype == getattr(minifloat, mf_name) and a.shape == (2, 3)
        assert a.astype(np.float32).ravel().tolist() == [1.5] * 6
        assert np.shares_memory(a, minifloat.from_dlpack(x))
    b = np.arange(6, dtype=np.float32).astype(minifloat.bfloat16)
    t = nk.from_dlpack(minifloat.dlpack(b))
    assert np.asarray(t).view(np.uint16).tolist() == b.view(np.uint16).tolist()


# ---------------------------------------------------------------- asnumpy

def test_asnumpy_copies_and_dtypes():
    a = _sample(minifloat.bfloat16)
    assert minifloat.asnumpy(a) is a
    c = minifloat.asnumpy(a, copy=True)
    assert not np.shares_memory(a, c) and c.tobytes() == a.tobytes()
    f = minifloat.asnumpy(a, np.float32)
    assert f.dtype == np.float32 and f.tolist() == a.astype(np.float32).tolist()
    assert minifloat.asnumpy(a, minifloat.bfloat16, copy=False) is a
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        minifloat.asnumpy(a, np.float32, copy=False)
    assert minifloat.asnumpy([1.5, 2], minifloat.bfloat16).dtype == minifloat.bfloat16

    class ArrayOnly:
        def __array__(self, dtype=None, copy=None):
            return np.arange(3, dtype=np.float32)

    assert minifloat.asnumpy(ArrayOnly()).tolist() == [0, 1, 2]


def test_asnumpy_from_dlpack_producers():
    buf = np.arange(6, dtype=np.uint16)
    p = Producer(lambda **kw: make(buf.view(np.uint8), shape=(6,), dtype=(4, 16, 1)))
    a = minifloat.asnumpy(p)
    assert a.dtype == minifloat.bfloat16 and np.shares_memory(a, buf)
    assert p.calls[-1]["dl_device"] == (CPU, 0)
    c = minifloat.asnumpy(p, copy=True)
    assert not np.shares_memory(c, buf) and c.tobytes() == buf.tobytes()
    f = minifloat.asnumpy(p, np.float32, copy=True)
    assert f.dtype == np.float32 and p.calls[-1]["copy"] is None   # one copy: the conversion
    packed = Producer(lambda **kw: make(np.array([0x21, 0x43], np.uint8), shape=(4,),
                                        dtype=(17, 4, 1)))
    assert minifloat.asnumpy(packed).view(np.uint8).tolist() == [1, 2, 3, 4]


# ---------------------------------------------------------------- import cost / deps

def test_minifloat_never_imports_torch_or_jax_by_itself():
    code = textwrap.dedent(f"""
        import sys, numpy as np, minifloat
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})
        import _dlpack_producer
        buf = np.arange(4, dtype=np.float32)
        minifloat.from_dlpack(_dlpack_producer.load().make_capsule(data=buf, shape=(4,)))
        minifloat.asnumpy([1, 2]); minifloat.asnumpy(buf, minifloat.bfloat16)
        minifloat.from_dlpack(minifloat.dlpack(buf.astype(minifloat.bfloat16)))
        minifloat.unpatch_torch()
        print(sorted(m for m in ("torch", "jax", "ml_dtypes") if m in sys.modules))
    """)
    # nor ml_dtypes (linked only when the user imports it), with or without
    # MINIFLOAT_NO_ML_DTYPES
    for no_ml in ("0", "1"):
        env = dict(os.environ, MINIFLOAT_NO_ML_DTYPES=no_ml)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env=env)
        assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- NumPy >= 2.5

class RegistryStandIn:
    """np.dtypes.register_dlpack_dtype as NumPy 2.5 defines it: bits must equal
    8 * itemsize, built-in mappings win, a conflicting registration raises."""

    BUILTIN_CODES = {0, 1, 2, 5, 6}

    def __init__(self):
        self.imports, self.exports = {}, {}

    def __call__(self, codebits, dtype, /):
        code, bits = codebits
        dtype = np.dtype(dtype)
        if dtype.itemsize * 8 != bits:
            raise ValueError("register_dlpack_dtype: number of bits must match the dtype's "
                             "elsize and be <=255.")
        if self.exports.setdefault(dtype, (code, bits)) != (code, bits):
            raise ValueError("this NumPy dtype is already exported with a different (code, bits)")
        if self.imports.setdefault((code, bits), dtype) is not dtype:
            raise ValueError("the same (code, bits) already maps to another dtype")

    def from_dlpack_dtype(self, code, bits):
        return None if code in self.BUILTIN_CODES else self.imports.get((code, bits))


def test_registration_with_a_numpy_registry_stand_in():
    reg = RegistryStandIn()
    result = exchange._register_with_numpy(reg)
    expect = {f["name"] for f in BYTE_FORMATS}
    assert set(result) == expect and all(v is None for v in result.values())
    for f in BYTE_FORMATS:
        assert reg.from_dlpack_dtype(f["dlpack_code"], f["dlpack_bits"]) is f["dtype"]
        assert reg.exports[f["dtype"]] == (f["dlpack_code"], f["dlpack_bits"])
    for f in SUBBYTE_FORMATS:
        assert f["dtype"] not in reg.exports
    assert exchange._register_with_numpy(reg) == result     # idempotent
    # another library registered bfloat16's code first: recorded, not raised
    ml_dtypes = pytest.importorskip("ml_dtypes")
    reg2 = RegistryStandIn()
    reg2((4, 16), np.dtype(ml_dtypes.bfloat16))
    result2 = exchange._register_with_numpy(reg2)
    assert "already maps" in result2["bfloat16"]
    assert result2["float8_e4m3fn"] is None


REGISTRY_STAND_IN = """
import numpy as np
calls = []
np.dtypes.register_dlpack_dtype = lambda cb, dt, /: calls.append(
    (cb, str(dt), type(dt).__module__.split(".")[0]))
"""
HIDE_ML_DTYPES = """
import importlib.machinery as _m
_find = _m.PathFinder.find_spec
_m.PathFinder.find_spec = classmethod(
    lambda cls, name, path=None, target=None: None if name == "ml_dtypes" else _find(name, path, target))
"""


def test_registration_happens_at_import_without_ml_dtypes():
    code = REGISTRY_STAND_IN + HIDE_ML_DTYPES + textwrap.dedent("""
        import minifloat
        print(calls)
        print(sorted(k for k, v in minifloat.exchange.numpy_registration.items() if v is None))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    calls, names = out.stdout.strip().splitlines()
    expect = [((f["dlpack_code"], f["dlpack_bits"]), f["name"], "minifloat") for f in BYTE_FORMATS]
    assert eval(calls) == expect
    assert eval(names) == sorted(f["name"] for f in BYTE_FORMATS)


def test_registration_waits_for_an_installed_ml_dtypes():
    """ml_dtypes 0.7 registers the same codes at its import (NumPy >= 2.5) and
    raises if one is taken: minifloat registers after it, never before."""
    pytest.importorskip("ml_dtypes")
    code = REGISTRY_STAND_IN + textwrap.dedent("""
        import minifloat
        print(calls)
        import ml_dtypes
        print(calls)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = (eval(line) for line in out.stdout.strip().splitlines())
    assert before == []
    ours = [c for c in after if c[2] == "minifloat"]
    assert ours == [((f["dlpack_code"], f["dlpack_bits"]), f["name"], "minifloat")
                    for f in BYTE_FORMATS]
    assert after[-len(ours):] == ours          # ml_dtypes' own (if any) came first
    assert not hasattr(np.dtypes, "register_dlpack_dtype") or exchange.numpy_registration


@pytest.mark.parametrize("n", [0, 1, 3, 64, 1000, 1 << 16])
def test_export_copies_are_64_byte_aligned(n):
    """Copies minifloat makes for export (copy=True, packed sub-byte) start on a
    64-byte boundary: TensorFlow aborts on DLPack data that does not, and JAX
    copies it."""
    buf = np.arange(2 * n + 2, dtype=np.uint16).view(minifloat.bfloat16)
    for src in (buf[1:n + 1], buf[:2 * n:2], buf[::-1][:n]):
        for version in (None, (1, 3)):
            cap = _core._dlpack_export(src, None, version, None, True)
            a = minifloat.from_dlpack(cap)
            assert not np.shares_memory(a, buf)
            assert a.tobytes() == src.tobytes()
            if n:
                assert data_ptr(a) % 64 == 0
    f4 = np.zeros(2 * n + 1, np.uint8).view(minifloat.float4_e2m1fn)[1:]
    cap = _core._dlpack_export(f4, None, None, None, True)        # legacy: packed copy
    assert capsule_info(cap)["data"] % 64 == 0 or n == 0
