"""DLPack exchange with torch, both directions, through torch's C exchange API
and through __dlpack__; patch_torch."""
import gc
import io
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import minifloat
from minifloat import _core

torch = pytest.importorskip("torch")

from test_exchange import capsule_info, data_ptr, run_child  # noqa: E402

# every torch dtype with a NumPy or minifloat counterpart: torch dtype -> ndarray dtype
TORCH_DTYPES = {
    torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
    torch.int32: np.int32, torch.int64: np.int64, torch.uint16: np.uint16,
    torch.uint32: np.uint32, torch.uint64: np.uint64, torch.float16: np.float16,
    torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
    torch.complex128: np.complex128,
}
for _f in _core.formats():
    # torch.int4/uint4/int2/... are shell dtypes that torch exports as int8/uint8 bits 8
    _t = getattr(torch, _f["name"], None)
    if isinstance(_t, torch.dtype) and _f["kind"] == "float":
        TORCH_DTYPES[_t] = _f["dtype"]
REQUIRED = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]
UINT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.complex128}


def test_the_matrix_covers_the_required_dtypes():
    names = {str(t).removeprefix("torch.") for t in TORCH_DTYPES}
    assert set(REQUIRED) <= names


@pytest.fixture(params=[True, False], ids=["C-API", "__dlpack__"])
def api(request):
    prev = _core._set_exchange_api(request.param)
    yield request.param
    _core._set_exchange_api(prev)


def random_tensor(dtype, shape=(6, 8), seed=0):
    """A tensor of `dtype` with random bits (NaN codes included)."""
    g = torch.Generator().manual_seed(seed)
    size = torch.empty((), dtype=dtype).element_size()
    n = int(np.prod(shape))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    raw = torch.randint(0, 256, (n * size,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


def tensor_bytes(t):
    return t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def layouts(t):
    return {"contiguous": t, "strided": t[1:, ::3], "transposed": t.T, "zero-stride":
            t[:1].expand(4, -1)}


@pytest.mark.parametrize("tdtype", list(TORCH_DTYPES), ids=str)
def test_torch_to_numpy(tdtype, api):
    base = random_tensor(tdtype)
    for name, t in layouts(base).items():
        a = minifloat.from_dlpack(t)
        assert a.dtype == np.dtype(TORCH_DTYPES[tdtype]), name
        assert data_ptr(a) == t.data_ptr(), name
        assert a.strides == tuple(s * t.element_size() for s in t.stride()), name
        assert a.shape == tuple(t.shape) and a.flags.writeable
        assert np.ascontiguousarray(a).tobytes() == tensor_bytes(t), name


@pytest.mark.parametrize("tdtype", list(TORCH_DTYPES), ids=str)
def test_numpy_to_torch(tdtype):
    src = minifloat.from_dlpack(random_tensor(tdtype, seed=1).clone())   # an ndarray we own
    for name, a in layouts_np(src).items():
        t = torch.from_dlpack(minifloat.dlpack(a))
        assert t.dtype == tdtype and t.data_ptr() == data_ptr(a), name
        assert tuple(t.stride()) == tuple(s // a.itemsize for s in a.strides), name
        assert tensor_bytes(t) == np.ascontiguousarray(a).tobytes(), name
        t2 = minifloat.to_torch(a)
        assert t2.dtype == tdtype and t2.data_ptr() == data_ptr(a)


def layouts_np(a):
    return {"contiguous": a, "strided": a[1:, ::3], "transposed": a.T}


@pytest.mark.parametrize("tdtype", list(TORCH_DTYPES), ids=str)
def test_round_trips_share_memory_and_writes(tdtype, api):
    t = random_tensor(tdtype, seed=2)
    a = minifloat.from_dlpack(t)
    back = torch.from_dlpack(minifloat.dlpack(a))
    assert back.data_ptr() == t.data_ptr() and tensor_bytes(back) == tensor_bytes(t)
    # a write through NumPy is seen by torch, and the other way round
    a.view(np.uint8)[0, 0] ^= 1
    assert tensor_bytes(t) == np.ascontiguousarray(a).tobytes()
    back.view(torch.uint8)[0, 1] ^= 1
    assert tensor_bytes(t) == np.ascontiguousarray(a).tobytes()


def test_bfloat16_values(api):
    t = torch.tensor([1.0, -2.5, 3.0e38, float("inf"), float("nan"), 1e-40], dtype=torch.bfloat16)
    a = minifloat.from_dlpack(t)
    assert a.dtype == minifloat.bfloat16
    np.testing.assert_array_equal(a.astype(np.float32), t.float().numpy())
    a32 = minifloat.asnumpy(t, np.float32)
    assert a32.dtype == np.float32 and a32.tobytes() == t.float().numpy().tobytes()


def test_tensor_lifetime(api):
    """The array keeps torch's storage alive after the tensor is gone."""
    t = torch.arange(1000, dtype=torch.float32).to(torch.bfloat16)
    a = minifloat.from_dlpack(t)
    del t
    gc.collect()
    for _ in range(10):
        torch.empty(1000, dtype=torch.bfloat16).fill_(7)   # churn the allocator
    assert a.astype(np.float32)[[0, 1, 999]].tolist() == [0.0, 1.0, 1000.0]


def test_requires_grad_conj_and_neg_are_refused(api):
    # torch's own __dlpack__ raises its message, the C API path minifloat's
    with pytest.raises(BufferError, match="requires grad|require gradient"):
        minifloat.from_dlpack(torch.zeros(3, requires_grad=True))
    with pytest.raises(BufferError, match="conjugate bit"):
        minifloat.from_dlpack(torch.tensor([1 + 2j]).conj())
    neg = torch.tensor([1 + 2j], dtype=torch.complex64).conj().imag   # negative bit
    assert neg.is_neg() and neg.item() == -2
    with pytest.raises(BufferError, match="negative bit"):
        minifloat.from_dlpack(neg)
    assert minifloat.from_dlpack(neg.resolve_neg()).tolist() == [-2.0]
    p = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    assert minifloat.from_dlpack(p).tolist() == [1.0, 1.0]


def test_subclass_overriding_dlpack_is_called():
    calls = []

    class Logged(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            calls.append(kwargs)
            return super().__dlpack__(*args, **kwargs)

    t = torch.arange(3.0).as_subclass(Logged)
    assert minifloat.from_dlpack(t).tolist() == [0, 1, 2]
    assert calls and calls[0]["max_version"] == (1, 3)


def test_the_c_exchange_api_is_used(monkeypatch):
    """With the API on, torch's Python-level __dlpack__ is not called; off, it is."""
    t = torch.arange(4.0).to(torch.bfloat16)
    orig = torch.Tensor.__dlpack__
    calls = []

    def spy(self, *a, **k):
        calls.append(k)
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "__dlpack__", spy)   # also invalidates the type cache
    prev = _core._set_exchange_api(True)
    try:
        assert minifloat.from_dlpack(t).astype(np.float32).tolist() == [0, 1, 2, 3]
        assert calls == []
        _core._set_exchange_api(False)
        assert minifloat.from_dlpack(t).astype(np.float32).tolist() == [0, 1, 2, 3]
        assert calls == [dict(stream=None, max_version=(1, 3), dl_device=None, copy=None)]
    finally:
        _core._set_exchange_api(prev)


def test_legacy_torch_capsules():
    t = torch.arange(4, dtype=torch.float32).to(torch.float8_e5m2)
    cap = torch.utils.dlpack.to_dlpack(t)
    a = minifloat.from_dlpack(cap)
    assert a.dtype == minifloat.float8_e5m2 and data_ptr(a) == t.data_ptr()
    assert not a.flags.writeable    # a legacy capsule cannot say it is writeable


def test_copy_keyword(api):
    t = torch.arange(4.0).to(torch.bfloat16)
    c = minifloat.from_dlpack(t, copy=True)
    assert data_ptr(c) != t.data_ptr() and c.astype(np.float32).tolist() == [0, 1, 2, 3]
    v = minifloat.from_dlpack(t, copy=False)
    assert data_ptr(v) == t.data_ptr()


def test_float4_e2m1fn_x2_both_ways(api):
    a = np.array([[0.5, 1, -6, 0], [2, 3, -0.5, 6]], np.float32).astype(minifloat.float4_e2m1fn)
    t = minifloat.to_torch(a)
    assert t.dtype == torch.float4_e2m1fn_x2 and tuple(t.shape) == (2, 2)
    codes = a.view(np.uint8)
    assert t.view(torch.uint8).numpy().tolist() == (codes[:, ::2] | codes[:, 1::2] << 4).tolist()
    back = minifloat.from_dlpack(t)        # code 17, bits 4, lanes 2: unpacked, lanes last
    assert back.shape == (2, 2, 2) and back.reshape(a.shape).tobytes() == a.tobytes()
    with pytest.raises(BufferError, match="packed"):
        minifloat.from_dlpack(t, copy=False)
    with pytest.raises(BufferError, match="copy"):
        minifloat.to_torch(a, copy=False)
    with pytest.raises(ValueError, match="even length"):
        minifloat.to_torch(a[:, :3])


def test_to_torch_refusals_and_read_only():
    with pytest.raises(TypeError, match="torch has no float8_e3m4"):
        minifloat.to_torch(np.zeros(2, minifloat.float8_e3m4))
    with pytest.raises(TypeError, match="torch has no float6_e2m3fn"):
        minifloat.to_torch(np.zeros(2, minifloat.float6_e2m3fn))
    a = np.arange(4, dtype=np.float32).astype(minifloat.bfloat16)
    a.flags.writeable = False
    t = minifloat.to_torch(a)       # torch would write through READ_ONLY: a copy
    assert t.data_ptr() != data_ptr(a) and t.float().tolist() == [0, 1, 2, 3]
    with pytest.raises(BufferError, match="READ_ONLY"):
        minifloat.to_torch(a, copy=False)


def test_read_only_arrays_export_the_flag_torch_ignores():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    info = capsule_info(minifloat.dlpack(a).__dlpack__(max_version=(1, 0)))
    assert info["flags"] == 1   # READ_ONLY; torch.from_dlpack still gives a writeable view


def test_ml_dtypes_arrays_to_torch():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    t = minifloat.to_torch(a)
    assert t.dtype == torch.bfloat16 and t.data_ptr() == data_ptr(a)
    assert tensor_bytes(t) == a.tobytes()
    b = np.arange(6, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)
    t = torch.from_dlpack(minifloat.dlpack(b))
    assert t.dtype == torch.float8_e4m3fn and tensor_bytes(t) == b.tobytes()


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_asnumpy_torch():
    t = torch.arange(6.0).reshape(2, 3).to(torch.float8_e4m3fn)
    a = minifloat.asnumpy(t)
    assert a.dtype == minifloat.float8_e4m3fn and data_ptr(a) == t.data_ptr()
    f = minifloat.asnumpy(t.T, np.float32)
    assert f.dtype == np.float32 and f.tolist() == t.T.float().tolist()
    with pytest.raises(BufferError, match="requires grad"):
        minifloat.asnumpy(torch.zeros(2, requires_grad=True))
    # a dtype neither NumPy nor minifloat has
    with pytest.raises(BufferError, match="Unsupported dtype"):
        minifloat.asnumpy(torch.zeros(2, dtype=torch.complex32))


# ---------------------------------------------------------------- patch_torch

@pytest.fixture
def unpatched():
    minifloat.unpatch_torch()
    yield
    minifloat.unpatch_torch()
    assert "numpy" not in torch.Tensor.__dict__


def third_party(t):
    """Code that knows nothing about minifloat."""
    return t.numpy(), np.asarray(t)


def test_patch_native(unpatched):
    t = torch.arange(4.0).to(torch.bfloat16)
    with pytest.raises(TypeError):
        t.numpy()
    with minifloat.patch_torch("native") as p:
        a, b = third_party(t)
        assert a.dtype == b.dtype == minifloat.bfloat16
        assert data_ptr(a) == t.data_ptr() and a.flags.writeable
        a[0] = 5
        assert t[0].item() == 5.0
        for dt in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                   torch.float8_e5m2fnuz):
            assert t.to(dt).numpy().dtype.name == str(dt).removeprefix("torch.")
        assert torch.bfloat16 in p.dtypes
        # other dtypes exactly as before
        f = torch.arange(3.0)
        assert f.numpy().dtype == np.float32 and data_ptr(f.numpy()) == f.data_ptr()
        with pytest.raises(RuntimeError, match="requires grad"):
            torch.zeros(2, requires_grad=True).numpy()
        with pytest.raises(RuntimeError, match="requires grad"):
            torch.zeros(2, dtype=torch.bfloat16, requires_grad=True).numpy()
        g = torch.ones(2, dtype=torch.bfloat16, requires_grad=True)
        assert g.numpy(force=True).astype(np.float32).tolist() == [1, 1]
        with pytest.raises(TypeError):
            torch.zeros(2, dtype=torch.complex32).numpy()
    assert "numpy" not in torch.Tensor.__dict__
    with pytest.raises(TypeError):
        t.numpy()


@pytest.fixture
def fresh_warning(monkeypatch):
    """as in a new process: the default's warning not yet shown"""
    monkeypatch.setattr(minifloat.exchange, "_float32_warned", False)


def _conversion_warnings(w):
    return [x for x in w if issubclass(x.category, minifloat.exchange.Float32ConversionWarning)]


def test_patch_default_is_float32_and_warns_once_per_process(unpatched, fresh_warning):
    t = torch.arange(4.0).to(torch.bfloat16)
    assert issubclass(minifloat.exchange.Float32ConversionWarning, UserWarning)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with minifloat.patch_torch() as p:
            assert p.mode == "float32"
            for _ in range(3):
                a, b = third_party(t)
                assert a.dtype == b.dtype == np.float32 and a.tolist() == [0, 1, 2, 3]
                assert data_ptr(a) != t.data_ptr()
            for dt in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                       torch.float8_e5m2fnuz):
                assert t.to(dt).numpy().dtype == np.float32
            assert torch.arange(2).numpy().dtype == np.int64
        with minifloat.patch_torch():                # a second activation: no second warning
            t.numpy()
    got = _conversion_warnings(w)
    assert len(got) == 1
    msg = str(got[0].message)
    assert 'patch_torch("native")' in msg and "bfloat16" in msg and "exact" in msg
    # asnumpy is not affected: it stays native
    with minifloat.patch_torch():
        assert minifloat.asnumpy(t).dtype == minifloat.bfloat16


@pytest.mark.parametrize("dt", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                "float8_e5m2fnuz"])
def test_patch_default_values_are_exact(unpatched, fresh_warning, dt):
    codes = np.arange(1 << (16 if dt == "bfloat16" else 8)).astype(
        np.uint16 if dt == "bfloat16" else np.uint8)
    x = codes.view(getattr(minifloat, dt))
    t = minifloat.to_torch(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with minifloat.patch_torch():
            got = t.numpy()
    np.testing.assert_array_equal(got, t.float().numpy())       # NaNs included
    np.testing.assert_array_equal(got, x.astype(np.float32))


def test_patch_float32_explicit_does_not_warn(unpatched, fresh_warning):
    t = torch.arange(4.0).to(torch.bfloat16)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with minifloat.patch_torch("float32"):
            a, b = third_party(t)
            assert a.dtype == b.dtype == np.float32 and a.tolist() == [0, 1, 2, 3]
    assert not _conversion_warnings(w)


def test_patch_default_warns_once_in_a_new_process():
    code = textwrap.dedent("""
        import warnings, torch, minifloat
        warnings.simplefilter("always")
        minifloat.patch_torch()
        t = torch.ones(2, dtype=torch.bfloat16)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(3):
                t.numpy()
            minifloat.unpatch_torch()
            minifloat.patch_torch()
            t.numpy()
        print(len(w), w[0].category.__name__, issubclass(w[0].category, UserWarning))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "Float32ConversionWarning", "True"]


def test_why_the_default_is_float32(unpatched):
    """docs/exchange.md: the common TTS save wraps +1.0 to -32768 with the
    native dtype (32767 rounds to 32768 in bfloat16); the default gives what
    .float().numpy() gives."""
    t = torch.tensor([1.0, -1.0, 0.5], dtype=torch.bfloat16)
    want = (t.float().numpy() * 32767).astype(np.int16)
    assert want.tolist() == [32767, -32767, 16383]
    with minifloat.patch_torch("native"):
        with np.errstate(all="ignore"):
            assert (t.numpy() * 32767).astype(np.int16)[0] == -32768
    with minifloat.patch_torch("float32"):
        assert np.array_equal((t.numpy() * 32767).astype(np.int16), want)
    wavfile = pytest.importorskip("scipy.io.wavfile")
    with minifloat.patch_torch("native"):
        with pytest.raises(ValueError, match="bfloat16"):
            wavfile.write(io.BytesIO(), 16000, t.numpy())
    with minifloat.patch_torch("float32"):
        wavfile.write(io.BytesIO(), 16000, t.numpy())


def test_patch_nesting_and_unpatch(unpatched):
    t = torch.arange(2.0).to(torch.bfloat16)
    outer = minifloat.patch_torch("native")          # not a with block: patched until undone
    assert t.numpy().dtype == minifloat.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with minifloat.patch_torch("float32"):
            assert t.numpy().dtype == np.float32
        assert t.numpy().dtype == minifloat.bfloat16  # the outer patch again
    minifloat.unpatch_torch()
    assert "numpy" not in torch.Tensor.__dict__
    outer.undo()                                     # harmless after unpatch
    assert "numpy" not in torch.Tensor.__dict__
    with pytest.raises(ValueError, match="mode"):
        minifloat.patch_torch("float16")
    with pytest.raises(ValueError, match="mode"):
        minifloat.patch_torch("bfloat16")


def test_torch_is_imported_only_by_torch_functions():
    code = textwrap.dedent("""
        import sys, minifloat
        assert "torch" not in sys.modules
        minifloat.patch_torch().undo()
        print("torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"



# ------------------------------------------------------------------ strides
# torch's DLPack import aborts the process on a negative stride ("Storage size
# calculation overflowed"), NumPy's own arrays included: the cases run in a
# child process, so that an abort fails the test instead of ending the run
# (the child names the case it was in).

NEGATIVE = ["reversed", "rows reversed", "columns reversed, step 2", "both reversed"]
POSITIVE = ["contiguous", "strided", "transposed"]

_STRIDES_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import minifloat as mf

    dtype = sys.argv[1]
    base = np.arange(48, dtype=np.float32).reshape(6, 8).astype(getattr(mf, dtype, dtype))
    for layout in sys.argv[2:]:
        print("case:", dtype, layout, file=sys.stderr, flush=True)
        a = {"reversed": base.ravel()[::-1], "rows reversed": base[::-1],
             "columns reversed, step 2": base[:, ::-2], "both reversed": base[::-2, ::-1],
             "contiguous": base, "strided": base[1:, ::3], "transposed": base.T}[layout]
        want = np.ascontiguousarray(a).tobytes()
        if any(s < 0 for s in a.strides):
            for copy in (None, True):
                t = mf.to_torch(a, copy=copy)
                back = mf.from_dlpack(t)              # a view of the tensor's memory
                assert back.tobytes() == want, ("values", copy)
                assert not np.shares_memory(back, a), ("memory shared", copy)
            try:
                mf.to_torch(a, copy=False)
            except ValueError as err:
                assert "Unable to avoid copy" in str(err) and "negative stride" in str(err), err
            else:
                raise AssertionError("copy=False did not raise")
        else:
            t = mf.to_torch(a)
            back = mf.from_dlpack(t)
            assert back.tobytes() == want, "values"
            assert t.data_ptr() == a.ctypes.data and np.shares_memory(back, a), "not zero-copy"
            assert tuple(t.stride()) == tuple(s // a.itemsize for s in a.strides)
            assert mf.to_torch(a, copy=False).data_ptr() == a.ctypes.data
    print("ok")
""")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_to_torch_copies_negative_strides(dtype):
    run_child(_STRIDES_CHILD, dtype, *NEGATIVE)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_to_torch_keeps_positive_strides_zero_copy(dtype):
    run_child(_STRIDES_CHILD, dtype, *POSITIVE)
