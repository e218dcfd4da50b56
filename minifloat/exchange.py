"""Zero-copy exchange over DLPack with torch, JAX and anything else.

- :func:`from_dlpack` (in C): like ``np.from_dlpack``, and also for bfloat16 and
  every float8/float6/float4 and int4/int2/int1 DLPack type.
- :func:`asnumpy`: the one boundary call: any tensor or array-like -> ndarray.
- :func:`dlpack`: an exporter (``__dlpack__``/``__dlpack_device__``) for an
  ndarray of any minifloat or NumPy dtype; :func:`to_torch`, :func:`to_jax`,
  :func:`to_tensorflow`.
- :func:`as_ml_dtypes`: a minifloat array viewed as the ml_dtypes dtype of the
  same name, for constructors that know only ml_dtypes (``jnp.asarray``,
  ``tf.constant``).
- :func:`patch_torch` / :func:`unpatch_torch`: ``torch.Tensor.numpy()`` for
  bfloat16 and float8 tensors (float32 by default, the minifloat dtype with
  ``patch_torch("native")``).

torch, JAX, TensorFlow and ml_dtypes are imported only by the functions named
after them (and by :func:`patch_torch`), never at import time.  See docs/exchange.md.
"""
import importlib.machinery
import sys
import warnings

import numpy as np

from . import _core
from . import _neighbours
from ._neighbours import as_dtype

__all__ = ["from_dlpack", "asnumpy", "dlpack", "to_torch", "to_jax", "to_tensorflow",
           "as_ml_dtypes", "patch_torch", "unpatch_torch"]

from_dlpack = _core.from_dlpack

_KDLCPU = 1
#: TensorFlow aborts the process on DLPack data that is not aligned to this
_TF_ALIGN = 64

# Everything below is derived from the format table.
_FORMATS = _core.formats()
_BY_NAME = {f["name"]: f for f in _FORMATS}
#: formats stored in fewer bits than their one-byte storage (float6, float4, int4, ...)
_SUBBYTE = frozenset(f["name"] for f in _FORMATS if f["dlpack_bits"] < 8 * f["itemsize"])


def _mf_format(dtype):
    """The format-table row of a minifloat dtype, else None."""
    f = _BY_NAME.get(dtype.name)
    return f if f is not None and f["dtype"] == dtype else None


def _from_ml_dtypes(arr):
    """An ml_dtypes array as a zero-copy view with the minifloat dtype of the same
    name (the storage is the same); any other array unchanged."""
    d = arr.dtype
    if getattr(d.type, "__module__", None) == "ml_dtypes":
        f = _BY_NAME.get(d.type.__name__)
        if f is not None and f["itemsize"] == d.itemsize:
            return arr.view(f["dtype"])
    return arr


def _mf_format_of_type(dtype):
    """The format-table row whose scalar type is dtype's, byte order aside."""
    for f in _FORMATS:
        if f["dtype"].type is dtype.type:
            return f
    return None


def as_ml_dtypes(a):
    """``a`` viewed as the ml_dtypes dtype of the same name: the same memory, no copy.

    For the constructors that know ml_dtypes' types but not minifloat's:
    ``jnp.asarray(minifloat.as_ml_dtypes(a))``, ``tf.constant(...)``,
    ``tf.convert_to_tensor(...)`` (those constructors then copy, as they do for
    any ndarray; :func:`to_jax` and :func:`to_tensorflow` share memory).  Arrays of
    NumPy's own dtypes, and ml_dtypes arrays, are returned unchanged.  Raises
    ImportError without ml_dtypes, TypeError for a format ml_dtypes does not have
    (``float8_e4m3`` needs ml_dtypes >= 0.5; int2/int1 are minifloat's only) and
    ValueError for a byte-swapped array.
    """
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    f = _mf_format_of_type(arr.dtype)
    if f is None:
        return arr
    if not arr.dtype.isnative:
        raise ValueError(f"a byte-swapped {f['name']} array has no ml_dtypes view; swap it "
                         f"first: a.astype(a.dtype.newbyteorder('='))")
    try:
        import ml_dtypes
    except ImportError as err:
        raise ImportError("minifloat.as_ml_dtypes needs ml_dtypes (pip install ml_dtypes); "
                          "minifloat.to_jax / minifloat.to_tensorflow do not") from err
    t = getattr(ml_dtypes, f["name"], None)
    if t is None or np.dtype(t).itemsize != f["itemsize"]:
        kind = "np.float32" if f["kind"] == "float" else "np.int8"
        raise TypeError(f"ml_dtypes {getattr(ml_dtypes, '__version__', '')} has no "
                        f"{f['name']} dtype; convert first, e.g. a.astype({kind})")
    return arr.view(t)


# --------------------------------------------------------------------- export

class DLPackExporter:
    """What :func:`dlpack` returns: an ndarray behind the DLPack protocol.

    ``__dlpack__`` follows the array API standard (2023.12): with ``max_version``
    >= (1, 0) it returns a "dltensor_versioned" capsule (READ_ONLY set for a
    non-writeable array, IS_COPIED when it copied, IS_SUBBYTE_TYPE_PADDED for the
    one-value-per-byte sub-byte formats), else a legacy "dltensor" capsule.
    """

    __slots__ = ("array", "_copy_default")

    def __init__(self, array, _copy_default=None):
        self.array = array
        self._copy_default = _copy_default

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy is None:
            copy = self._copy_default
        if (max_version is not None and self.array.dtype in _SUBBYTE_DTYPES
                and _padded_unread_by_caller()):
            # JAX (0.12) asks for DLPack 1.3 but reads a sub-byte tensor as
            # packed whatever IS_SUBBYTE_TYPE_PADDED says: silently wrong
            # values.  It reads packed data right, so it gets the packed copy
            # (DLPack 1.0: no padded flag; BufferError with copy=False).
            max_version = (1, 0)
            copy = True if copy is None else copy
        return _core._dlpack_export(self.array, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        return (_KDLCPU, 0)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.array, dtype=dtype, copy=copy)

    def __repr__(self):
        return f"minifloat.dlpack(<ndarray shape={self.array.shape} dtype={self.array.dtype}>)"


_SUBBYTE_DTYPES = frozenset(f["dtype"] for f in _core.formats()
                            if f["dlpack_bits"] < 8 * f["itemsize"])


def _padded_unread_by_caller():
    """Whether ``__dlpack__``'s caller is a consumer known to ignore the
    IS_SUBBYTE_TYPE_PADDED flag of a versioned capsule (JAX)."""
    caller = sys._getframe(2).f_globals.get("__name__", "")
    return caller == "jax" or caller.startswith("jax.")


def _exportable(a):
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    arr = _from_ml_dtypes(arr)
    _core._dlpack_dtype(arr.dtype)   # BufferError now, rather than in the consumer
    return arr


def dlpack(a):
    """An exporter of ``a`` (an ndarray of any minifloat or NumPy dtype, an
    ml_dtypes array, or anything ``np.asarray`` takes) with ``__dlpack__`` and
    ``__dlpack_device__``: ``torch.from_dlpack(minifloat.dlpack(a))`` and
    ``jax.dlpack.from_dlpack(minifloat.dlpack(a))`` view ``a``'s memory.

    Raises BufferError for dtypes DLPack cannot describe (object, str, datetime,
    longdouble, byte-swapped).
    """
    return DLPackExporter(_exportable(a))


def _negative_stride(arr):
    """Whether the DLPack export of ``arr`` has a negative stride (axes of
    length 0 or 1 are exported with their C-order stride, so they never do)."""
    return arr.size > 1 and any(s < 0 and n > 1 for n, s in zip(arr.shape, arr.strides))


def _compact(arr):
    """Whether ``arr``'s elements lie densely in some axis order (C order, F
    order, any transpose): no gaps, no overlap, no zero or negative stride.
    JAX's DLPack import takes only those ("trivial (compact) striding")."""
    if arr.size <= 1:
        return True
    expect = arr.itemsize
    for s, n in sorted((s, n) for n, s in zip(arr.shape, arr.strides) if n > 1):
        if s != expect:
            return False
        expect *= n
    return True


def _strides_need_copy(consumer, why):
    """The error for copy=False where ``consumer`` cannot take the strides (as
    NumPy words it: ValueError, "Unable to avoid copy")."""
    return ValueError(f"Unable to avoid copy while creating an array as requested: {consumer} "
                      f"cannot take this array's strides ({why}); pass copy=None or copy=True "
                      f"to let minifloat make a C-contiguous copy, or pass "
                      f"np.ascontiguousarray(a)")


def _torch_dtype_for(torch, name):
    """torch's dtype of the same name as a minifloat format, or None."""
    dt = getattr(torch, name, None)
    return dt if isinstance(dt, torch.dtype) else None


def to_torch(a, *, copy=None):
    """``a`` as a torch tensor, sharing its memory (``torch.from_dlpack`` of
    :func:`dlpack`).

    torch has bfloat16 and five float8 types (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz,
    e8m0fnu); other minifloat formats raise TypeError, except float4_e2m1fn,
    which torch keeps only packed two per byte: it becomes a float4_e2m1fn_x2
    tensor of shape ``a.shape[:-1] + (a.shape[-1] // 2,)`` (a packed copy; value
    2k in the low nibble of byte k).  torch ignores DLPack's READ_ONLY flag, so a
    non-writeable ``a`` is copied (BufferError with ``copy=False``).

    Strides: torch views any layout with non-negative strides (slices with gaps,
    transposes, zero strides), but its DLPack import aborts the whole process on
    a negative stride (``a[::-1]``; torch 2.13: "Storage size calculation
    overflowed"), NumPy's own arrays included.  So an ``a`` with a negative
    stride becomes a C-contiguous copy (``copy=None``), or ValueError with
    ``copy=False`` (as NumPy raises when a copy would be needed).
    """
    import torch

    arr = _exportable(a)
    f = _mf_format(arr.dtype)
    if f is not None and (f["name"] in _SUBBYTE or _torch_dtype_for(torch, f["name"]) is None):
        x2 = _torch_dtype_for(torch, f["name"] + "_x2")
        if f["name"] in _SUBBYTE and x2 is not None and 2 * f["dlpack_bits"] == 8:
            if copy is False:
                raise BufferError(f"torch keeps {f['name']} only packed two values per byte "
                                  f"({x2}); packing needs a copy: pass copy=None or copy=True")
            if arr.ndim == 0 or arr.shape[-1] % 2:
                raise ValueError(f"torch's {x2} packs pairs along the last axis, which must "
                                 f"have even length; got shape {arr.shape}")
            packed = _core._pack_subbyte(arr).reshape(arr.shape[:-1] + (arr.shape[-1] // 2,))
            return torch.from_numpy(packed).view(x2)
        kind = "np.float32" if f["kind"] == "float" else "np.int8"
        raise TypeError(f"torch has no {f['name']} dtype that DLPack can reach; convert "
                        f"first, e.g. a.astype({kind})")
    exporter = DLPackExporter(arr)
    if _negative_stride(arr):
        if copy is False:
            raise _strides_need_copy("torch", "a negative stride, on which torch's DLPack "
                                     "import aborts the process")
        exporter = DLPackExporter(arr, True)     # the export is a C-contiguous copy
    if not arr.flags.writeable:
        if copy is False:
            raise BufferError("the array is read-only and torch ignores DLPack's READ_ONLY "
                              "flag (it would write into it); pass copy=None or copy=True")
        copy = True
    return torch.from_dlpack(exporter, copy=copy)


def to_jax(a, *, copy=None):
    """``a`` as a JAX array (``jax.dlpack.from_dlpack`` of :func:`dlpack`).

    JAX imports bfloat16 and all nine float8 formats over DLPack, zero-copy when
    the data is 64-byte aligned (else it copies; with ``copy=False`` it raises).
    JAX asks for legacy capsules, which cannot say "read-only": a non-writeable
    array is exported as a copy.  JAX 0.10 imports no sub-byte type over DLPack
    (float6 codes are unknown to it, packed float4 and 4/2/1-bit integers are
    refused), so those go through ``jnp.asarray`` of an ml_dtypes view (a copy;
    JAX has the types it knows from ml_dtypes).  ``copy=False`` raises
    BufferError wherever a copy is needed.

    Strides: JAX imports only compact layouts (C order or any transpose of it)
    and raises for the others (gaps ``a[:, ::2]``, zero strides, negative
    strides ``a[::-1]``: "Only DLPack tensors with trivial (compact) striding
    are supported").  Such an ``a`` is exported as a 64-byte-aligned
    C-contiguous copy (which JAX views), or ValueError with ``copy=False`` (as
    NumPy raises when a copy would be needed).
    """
    import jax.dlpack

    arr = _exportable(a)
    f = _mf_format(arr.dtype)
    if f is not None and f["name"] in _SUBBYTE:
        if copy is False:
            raise BufferError(f"JAX cannot import {f['name']} over DLPack; the copy through "
                              f"jax.numpy needs copy=None or copy=True")
        import jax.numpy as jnp
        import ml_dtypes   # a dependency of JAX

        ml_type = getattr(ml_dtypes, f["name"], None)
        if ml_type is None:
            raise TypeError(f"JAX has no {f['name']} dtype; convert first, e.g. "
                            f"a.astype(np.float32)")
        try:
            return jnp.asarray(arr.view(ml_type))
        except Exception as err:   # e.g. JAX 0.10's CPU backend has no float6 or int1
            raise TypeError(f"JAX could not make a {f['name']} array ({type(err).__name__}: "
                            f"{str(err).splitlines()[0]}); convert first, e.g. "
                            f"a.astype(np.float32)") from err
    copy_default = None
    if not _compact(arr):
        if copy is False:
            raise _strides_need_copy("JAX", "it imports only compact layouts: C order or a "
                                     "transpose, no gaps, no zero or negative strides")
        copy_default = True                      # the export is a C-contiguous copy
    if not arr.flags.writeable:
        if copy is False:
            raise BufferError("JAX takes legacy DLPack capsules, which cannot mark an array "
                              "read-only, so a read-only array is exported as a copy; pass "
                              "copy=None or copy=True")
        copy_default = True
    return jax.dlpack.from_dlpack(DLPackExporter(arr, copy_default), copy=copy)


def to_tensorflow(a, *, copy=None):
    """``a`` as a TensorFlow tensor (``tf.experimental.dlpack.from_dlpack``),
    sharing its memory when TensorFlow can.

    TensorFlow knows bfloat16 and the float8 types it has (float8_e4m3fn,
    float8_e5m2, ...); other formats raise TypeError.  TensorFlow aborts the whole
    process (``Check failed: IsAligned()``) at the first operation on a DLPack
    import whose data is not 64-byte aligned, and it takes legacy capsules
    (which cannot say "read-only").  So an array that is not 64-byte aligned,
    not C-contiguous or not writeable is exported as a 64-byte-aligned
    C-contiguous copy (``copy=False`` raises BufferError instead; ValueError,
    as NumPy raises when a copy would be needed, for a negative stride, which
    DLPack consumers differ on: torch aborts, JAX refuses); otherwise the
    tensor views ``a``.  ``copy=True`` always copies.
    """
    import tensorflow as tf

    arr = _exportable(a)
    f = _mf_format(arr.dtype)
    if f is not None and not isinstance(getattr(tf, f["name"], None), tf.DType):
        kind = "np.float32" if f["kind"] == "float" else "np.int8"
        raise TypeError(f"TensorFlow {tf.__version__} has no {f['name']} dtype; convert "
                        f"first, e.g. a.astype({kind})")
    if copy is False and _negative_stride(arr):
        raise _strides_need_copy("TensorFlow", "a negative stride; it takes row-major data only")
    why = None
    if arr.ctypes.data % _TF_ALIGN and arr.size:
        why = f"its data is not {_TF_ALIGN}-byte aligned (TensorFlow would abort the process)"
    elif not arr.flags.c_contiguous:
        why = "it is not C-contiguous (TensorFlow takes row-major data only)"
    elif not arr.flags.writeable:
        why = "it is read-only (TensorFlow takes legacy capsules, which cannot say so)"
    if why is not None and copy is False:
        raise BufferError(f"TensorFlow cannot share this array's memory: {why}; pass "
                          f"copy=None or copy=True for an aligned copy")
    cap = _core._dlpack_export(arr, None, None, None, True if (copy or why) else None)
    return tf.experimental.dlpack.from_dlpack(cap)


# --------------------------------------------------------------------- import

def _is_dlpack_producer(x):
    return hasattr(type(x), "__dlpack__") or type(x).__name__ == "PyCapsule"


def asnumpy(x, dtype=None, *, copy=None):
    """``x`` as an ndarray: the one boundary call for library authors.

    ``x`` may be a torch/JAX/CuPy/TensorFlow/numkong tensor, anything with
    ``__dlpack__`` or ``__array__``, an ndarray (ml_dtypes arrays become the
    minifloat dtype of the same name, as a view), or any array-like.  DLPack
    producers are imported with :func:`from_dlpack`; memory that is not
    addressable from the CPU (CUDA, ROCm, ...) is copied to the host by the
    producer unless ``copy=False`` (then BufferError).

    ``dtype`` converts after the import, in one pass (no conversion when the
    dtype already matches).  ``copy=True`` always returns new memory,
    ``copy=False`` never copies (BufferError/ValueError when it would have to),
    ``None`` copies only when needed.
    """
    if dtype is not None:
        dtype = as_dtype(dtype)
    # with a conversion coming, import without copying: the conversion is the copy
    imp_copy = copy if dtype is None else (False if copy is False else None)
    if isinstance(x, np.ndarray):
        arr, fresh = _from_ml_dtypes(x), False
    elif _is_dlpack_producer(x):
        try:
            arr = from_dlpack(x, device=None if copy is False else "cpu", copy=imp_copy)
            fresh = imp_copy is True or arr.base is None   # base None: unpacked or copied
        except BufferError as err:
            if not hasattr(type(x), "__array__"):
                raise
            try:   # a producer that refuses DLPack for this dtype may still convert
                arr = _from_ml_dtypes(np.asarray(x, copy=imp_copy))
            except Exception:
                raise err from None
            fresh = imp_copy is True
    else:
        arr, fresh = _from_ml_dtypes(np.asarray(x, copy=imp_copy)), imp_copy is True
    if dtype is not None and arr.dtype != dtype:
        if copy is False:
            raise ValueError(f"Unable to avoid copy while creating an array as requested: "
                             f"converting {arr.dtype} to {dtype} makes a new array; pass "
                             f"copy=None to allow it")
        return arr.astype(dtype)
    if copy and not fresh:
        return arr.copy()
    return arr


# --------------------------------------------------------------- torch patch

class Float32ConversionWarning(UserWarning):
    """``tensor.numpy()`` under :func:`patch_torch`'s default returned a float32
    copy of a bfloat16/float8 tensor (once per process)."""


#: the default's warning has been shown in this process
_float32_warned = False


_ABSENT = object()


class _TorchPatch:
    """One activation of :func:`patch_torch`; a context manager that undoes it."""

    def __init__(self, torch, mode, warn):
        self._torch = torch
        self.mode = mode
        self.warn = warn
        cls = torch.Tensor
        self._prev = cls.__dict__.get("numpy", _ABSENT)
        original = torch._C.TensorBase.numpy
        handled = {}
        for f in _FORMATS:
            dt = _torch_dtype_for(torch, f["name"])
            if dt is not None and f["kind"] == "float" and f["name"] not in _SUBBYTE:
                handled[dt] = f["name"]
        self.dtypes = handled
        patch = self

        def numpy(self, *, force=False):
            name = handled.get(self.dtype)
            if name is None:
                return original(self, force=force)
            t = self
            if force:
                t = t.detach().cpu().resolve_neg()
            elif t.requires_grad:
                raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                                   "Use tensor.detach().numpy() instead.")
            elif t.device.type != "cpu":
                raise TypeError(f"can't convert {t.device} device type tensor to numpy. "
                                "Use Tensor.cpu() to copy the tensor to host memory first.")
            elif t.is_neg():
                raise RuntimeError("Can't call numpy() on Tensor that has negative bit set. "
                                   "Use tensor.resolve_neg().numpy() instead.")
            arr = from_dlpack(t)
            if patch.mode == "float32":
                global _float32_warned
                if patch.warn and not _float32_warned:
                    _float32_warned = True
                    warnings.warn(
                        f"torch.Tensor.numpy() converted a {name} tensor to a float32 copy "
                        "(minifloat.patch_torch() default): the values are exact, writes to "
                        "the copy do not reach the tensor. Use "
                        "minifloat.patch_torch(\"native\") to keep the dtype (a zero-copy "
                        f"minifloat.{name} array), or minifloat.patch_torch(\"float32\") to "
                        "convert without this warning. Shown once per process.",
                        Float32ConversionWarning, stacklevel=2)
                arr = arr.astype(np.float32)
            return arr

        numpy.__doc__ = original.__doc__
        numpy._minifloat_patch = self
        self._func = numpy
        cls.numpy = numpy

    def undo(self):
        """Restore what torch.Tensor.numpy was before this patch (if this patch is
        still the active one)."""
        cls = self._torch.Tensor
        if cls.__dict__.get("numpy") is self._func:
            if self._prev is _ABSENT:
                del cls.numpy
            else:
                cls.numpy = self._prev

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
        return False

    def __repr__(self):
        return f"<minifloat.patch_torch(mode={self.mode!r})>"


def patch_torch(mode=None):
    """Make ``torch.Tensor.numpy()`` (and so ``np.asarray(tensor)``) work on
    bfloat16 and float8 tensors, everywhere, including inside third-party code.

    Default (``mode=None``): a float32 copy (the values are exact), with one
    :class:`Float32ConversionWarning` per process that names
    ``patch_torch("native")``.  Code that receives ``tensor.numpy()`` expects
    a NumPy float type: many audio and image calls refuse bfloat16 arrays, and
    ``(a * 32767).astype(np.int16)`` wraps +1.0 to -32768 in bfloat16 (the
    survey in docs/exchange.md).
    mode="native": a zero-copy array of the minifloat dtype, sharing memory like
    ``numpy()`` does for other dtypes.  mode="float32": the default's float32
    copy, without the warning.  Other dtypes behave exactly as before.
    :func:`asnumpy` is not affected (it always returns the minifloat dtype).
    Returns a handle usable as a context manager (leaving the ``with`` block
    undoes the patch); :func:`unpatch_torch` undoes all patches.
    """
    if mode not in (None, "native", "float32"):
        raise ValueError(f"mode must be 'native' or 'float32' (or None: float32 with a "
                         f"warning), got {mode!r}")
    import torch

    return _TorchPatch(torch, mode or "float32", warn=mode is None)


def unpatch_torch():
    """Undo every :func:`patch_torch`: ``torch.Tensor.numpy`` is torch's own again.
    Does nothing (and imports nothing) when torch was never imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    cls = torch.Tensor
    while True:
        patch = getattr(cls.__dict__.get("numpy"), "_minifloat_patch", None)
        if patch is None:
            return
        patch.undo()


# ------------------------------------------------- NumPy >= 2.5 registration

def _register_with_numpy(register):
    """Register every minifloat dtype NumPy's DLPack registry can hold with
    ``register((code, bits), dtype)`` (``np.dtypes.register_dlpack_dtype``).

    NumPy's registry requires bits == 8 * itemsize, so the sub-byte formats
    (float6, float4, int4/2/1: one value per byte, which np.from_dlpack would
    not unpack) stay with :func:`from_dlpack`.  A registration NumPy refuses (the
    (code, bits) is already taken, e.g. by another library) is recorded, not
    raised: returns {name: None if registered else the error message}.
    """
    result = {}
    for f in _FORMATS:
        if f["dlpack_bits"] != 8 * f["itemsize"]:
            continue
        try:
            register((f["dlpack_code"], f["dlpack_bits"]), f["dtype"])
        except ValueError as err:
            result[f["name"]] = str(err)
        else:
            result[f["name"]] = None
    return result


#: what the registration did (empty when NumPy has no registry, and until
#: ml_dtypes is imported where it is installed: see below)
numpy_registration = {}


def _register_now(_module=None):
    global numpy_registration
    numpy_registration = _register_with_numpy(np.dtypes.register_dlpack_dtype)


if hasattr(np.dtypes, "register_dlpack_dtype"):
    if "ml_dtypes" not in sys.modules and importlib.machinery.PathFinder.find_spec("ml_dtypes"):
        # ml_dtypes 0.7 registers the same (code, bits) at its import and
        # raises if one is taken: registering first would break `import
        # ml_dtypes` (and `import jax`).  So where ml_dtypes is installed,
        # minifloat registers after it: NumPy then keeps ml_dtypes' dtype for
        # each (code, bits) (np.from_dlpack gives ml_dtypes arrays) and still
        # records minifloat's dtype -> (code, bits), so minifloat arrays export.
        _neighbours.after_import("ml_dtypes", _register_now)
    else:
        _register_now()
