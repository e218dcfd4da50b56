"""Real GPU memory over DLPack: CUDA managed memory, pinned host memory,
plain device memory, and the stream argument.

The tests marked ``cupy`` or ``cuda_torch`` run only where CuPy with a CUDA device,
or a CUDA build of torch with a device, is importable; everywhere else they skip
(the CI machines have no GPU).  The first tests need no GPU: they check, with
host memory labelled as the CUDA device types, what the importer does for each.

What the DLPack spec (array API 2023.12, ``__dlpack__``) asks of a consumer: it
passes ``stream`` for the device it will use the data on; for CUDA, ``None``
means the legacy default stream, and for devices without streams (the CPU) it
must be ``None``.  minifloat reads on the CPU, so it always passes
``stream=None``: the producer orders its pending work before the legacy default
stream, but nothing makes the *host* wait for the GPU.  Reading what a kernel
wrote into managed memory therefore needs a synchronize first
(``cupy.cuda.Device().synchronize()``, ``torch.cuda.synchronize()``), as
docs/exchange.md says.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import minifloat

KDLCUDA, KDLCUDAHOST, KDLCUDAMANAGED = 2, 3, 13
BF16 = (4, 16, 1)   # kDLBfloat, 16 bits, 1 lane


def _cupy():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:   # not installed, no driver, no device
        return None
    return cupy


def _cuda_torch():
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except Exception:
        return None
    return torch


@pytest.fixture(scope="module")
def cupy():
    cp = _cupy()
    if cp is None:
        pytest.skip("needs CuPy with a CUDA device (no GPU here)")
    return cp


@pytest.fixture(scope="module")
def cuda_torch():
    t = _cuda_torch()
    if t is None:
        pytest.skip("needs a CUDA build of torch with a device (no GPU here)")
    return t


def bf16_codes(n, start=0):
    return (np.arange(n, dtype=np.uint16) + np.uint16(start)) & np.uint16(0x7F7F)


class Producer:
    """A DLPack producer over a capsule factory, recording what it was asked."""

    def __init__(self, make, device):
        self.make, self.device, self.calls = make, device, []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, dl_device=dl_device, copy=copy))
        return self.make()

    def __dlpack_device__(self):
        return self.device


# ------------------------------------------------------ no GPU needed

@pytest.mark.parametrize("dev", [KDLCUDAHOST, KDLCUDAMANAGED])
def test_host_addressable_cuda_memory_is_viewed_with_stream_none(dev, dlpack_producer):
    buf = bf16_codes(16)
    p = Producer(lambda: dlpack_producer.make_capsule(data=buf, shape=(16,), dtype=BF16,
                                                      device=(dev, 0)), (dev, 0))
    a = minifloat.from_dlpack(p)
    assert a.dtype == minifloat.bfloat16
    assert a.ctypes.data == buf.ctypes.data          # a view, no copy
    assert a.view(np.uint16).tolist() == buf.tolist()
    # the CPU has no stream: the spec's value for it (and CUDA's legacy default) is None
    assert p.calls == [dict(stream=None, dl_device=None, copy=None)]


def test_device_memory_refused_naming_device_and_copy(dlpack_producer):
    p = Producer(lambda: dlpack_producer.make_capsule(address=0x10, shape=(4,), dtype=BF16,
                                                      device=(KDLCUDA, 1)), (KDLCUDA, 1))
    with pytest.raises(BufferError, match=r"kDLCUDA \(2\), device 1 is not addressable") as e:
        minifloat.from_dlpack(p)
    msg = str(e.value)
    assert "device='cpu'" in msg and ".cpu()" in msg and "cupy.asnumpy" in msg
    assert p.calls[0]["stream"] is None


# ------------------------------------------------------------ CuPy

def managed_array(cupy, n, dtype):
    mem = cupy.cuda.malloc_managed(n * np.dtype(dtype).itemsize)
    return cupy.ndarray((n,), dtype, memptr=mem)


def test_cupy_managed_memory_zero_copy_sees_gpu_writes(cupy):
    x = managed_array(cupy, 256, cupy.uint16)
    x[...] = cupy.arange(256, dtype=cupy.uint16)          # a kernel writes
    cupy.cuda.Device().synchronize()
    assert x.__dlpack_device__()[0] == KDLCUDAMANAGED
    a = minifloat.from_dlpack(x)                          # CuPy's own capsule
    assert a.ctypes.data == x.data.ptr                    # zero-copy
    assert a.tolist() == list(range(256))
    b = a.view(minifloat.bfloat16)
    x[...] = cupy.asarray(bf16_codes(256, 5))            # the GPU writes again
    cupy.cuda.Device().synchronize()
    assert b.view(np.uint16).tolist() == bf16_codes(256, 5).tolist()


def test_cupy_managed_memory_as_bfloat16_capsule(cupy, dlpack_producer):
    x = managed_array(cupy, 64, cupy.uint16)
    x[...] = cupy.asarray(bf16_codes(64))
    cupy.cuda.Device().synchronize()
    cap = dlpack_producer.make_capsule(address=x.data.ptr, shape=(64,), dtype=BF16,
                                       device=(KDLCUDAMANAGED, x.device.id))
    a = minifloat.from_dlpack(cap)
    assert a.dtype == minifloat.bfloat16 and a.ctypes.data == x.data.ptr
    assert a.view(np.uint16).tolist() == bf16_codes(64).tolist()
    a[:] = minifloat.bfloat16(2.0)                        # the CPU writes, the GPU reads
    assert int((x == 0x4000).sum()) == 64


def test_cupy_stream_then_synchronize(cupy):
    x = managed_array(cupy, 1 << 16, cupy.uint16)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x[...] = 7
    s.synchronize()
    a = minifloat.from_dlpack(x)
    assert (a == 7).all()


def test_cupy_pinned_host_memory_zero_copy(cupy, dlpack_producer):
    n = 64
    mem = cupy.cuda.alloc_pinned_memory(2 * n)
    host = np.frombuffer(mem, np.uint16, n)
    host[:] = bf16_codes(n)
    cap = dlpack_producer.make_capsule(address=mem.ptr, shape=(n,), dtype=BF16,
                                       device=(KDLCUDAHOST, 0))
    a = minifloat.from_dlpack(cap)
    assert a.dtype == minifloat.bfloat16 and a.ctypes.data == mem.ptr
    assert a.view(np.uint16).tolist() == bf16_codes(n).tolist()
    # the GPU copies from the pinned buffer: it sees a CPU write made through the view
    a[0] = minifloat.bfloat16(1.0)
    d = cupy.asarray(host)
    assert int(d[0]) == 0x3F80
    del a, cap


def test_cupy_device_memory_refused(cupy):
    x = cupy.zeros(8, cupy.float32)
    with pytest.raises(BufferError, match=r"kDLCUDA \(2\), device \d+") as e:
        minifloat.from_dlpack(x)
    assert "cupy.asnumpy" in str(e.value)
    assert minifloat.asnumpy(x).tolist() == [0.0] * 8     # the producer copies


# -------------------------------------------------------------- torch

def test_torch_cuda_tensor_refused_then_copied(cuda_torch):
    torch = cuda_torch
    t = torch.arange(8, dtype=torch.float32, device="cuda").to(torch.bfloat16)
    with pytest.raises(BufferError, match=r"kDLCUDA \(2\), device \d+") as e:
        minifloat.from_dlpack(t)
    assert ".cpu()" in str(e.value)
    a = minifloat.from_dlpack(t, device="cpu")
    assert a.dtype == minifloat.bfloat16 and a.astype(np.float32).tolist() == list(range(8))
    b = minifloat.asnumpy(t)
    assert b.dtype == minifloat.bfloat16 and b.astype(np.float32).tolist() == list(range(8))


def test_torch_pinned_memory_zero_copy(cuda_torch):
    torch = cuda_torch
    t = torch.zeros(64, dtype=torch.bfloat16).pin_memory()
    assert t.is_pinned()
    t.copy_(torch.arange(64, dtype=torch.float32, device="cuda").to(torch.bfloat16),
            non_blocking=True)
    torch.cuda.synchronize()
    a = minifloat.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr()                   # zero-copy
    assert a.astype(np.float32).tolist() == list(range(64))


# --------------------------------------------------------------- JAX

_JAX_CHILD = r"""
import json
import numpy as np
import jax, jax.numpy as jnp
import minifloat
if not [d for d in jax.devices() if d.platform == "gpu"]:
    print(json.dumps(None)); raise SystemExit
x = jnp.arange(8, dtype=jnp.float32).astype(jnp.bfloat16)   # in GPU memory
out = {"platform": x.devices().pop().platform}
try:
    minifloat.from_dlpack(x)
    out["view"] = "no error"
except BufferError as e:
    out["view"] = str(e)
a = minifloat.asnumpy(x)
out["asnumpy"] = [str(a.dtype), a.astype(np.float32).tolist()]
try:
    b = minifloat.from_dlpack(x, device="cpu")
    out["cpu"] = [str(b.dtype), b.astype(np.float32).tolist()]
except BufferError as e:
    out["cpu"] = "BufferError: " + str(e)
print(json.dumps(out))
"""


def test_jax_gpu_array_refused_then_copied():
    """A CUDA JAX array, in a child without the suite's JAX_PLATFORMS=cpu."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    try:
        import jax  # noqa: F401
    except ImportError:
        pytest.skip("needs JAX")
    r = subprocess.run([sys.executable, "-c", _JAX_CHILD], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if out is None:
        pytest.skip("needs a CUDA build of JAX with a device (no GPU here)")
    assert out["platform"] == "gpu"
    assert "kDLCUDA (2)" in out["view"] and "device='cpu'" in out["view"]
    assert out["asnumpy"] == ["bfloat16", [float(i) for i in range(8)]]
    # JAX copies to the host for dl_device=CPU, or says it cannot: never wrong values
    if isinstance(out["cpu"], str):
        assert out["cpu"].startswith("BufferError: ")
    else:
        assert out["cpu"] == ["bfloat16", [float(i) for i in range(8)]]
