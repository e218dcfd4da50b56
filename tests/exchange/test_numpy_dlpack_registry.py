"""NumPy >= 2.5's own DLPack path for minifloat's formats: minifloat registers
them with np.dtypes.register_dlpack_dtype (at import, or after ml_dtypes'
import where ml_dtypes is installed: ml_dtypes 0.7 registers the same codes and
raises if one is taken), so np.from_dlpack and ndarray.__dlpack__ exchange
them with no minifloat call (zero-copy).  Where ml_dtypes registered first,
np.from_dlpack gives its arrays (same codes; minifloat.from_dlpack gives
minifloat's)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minifloat
from minifloat import _core, exchange

pytestmark = pytest.mark.skipif(
    not hasattr(np.dtypes, "register_dlpack_dtype"),
    reason="NumPy < 2.5 has no DLPack dtype registry (np.dtypes.register_dlpack_dtype); "
           "minifloat.from_dlpack / minifloat.dlpack do the exchange there")

FORMATS = _core.formats()
BYTE_FORMATS = [f for f in FORMATS if f["dlpack_bits"] == 8 * f["itemsize"]]
SUBBYTE_FORMATS = [f for f in FORMATS if f["dlpack_bits"] < 8 * f["itemsize"]]


def codes(f, n=64, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 1 << f["bits"], n, dtype=np.uint32)
    return c.astype(f"u{f['itemsize']}").view(f["dtype"])


def aligned(a, alignment=64):
    """A copy of `a` whose data is `alignment`-byte aligned (JAX views only those)."""
    buf = np.empty(a.nbytes + alignment, np.uint8)
    off = (-buf.ctypes.data) % alignment
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


#: hides an installed ml_dtypes from minifloat's import (as if it were absent)
HIDE_ML_DTYPES = """
import importlib.machinery as _m
_find = _m.PathFinder.find_spec
_m.PathFinder.find_spec = classmethod(
    lambda cls, name, path=None, target=None: None if name == "ml_dtypes" else _find(name, path, target))
"""


def run(code):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_every_byte_format_is_registered_at_import_without_ml_dtypes():
    out = run(HIDE_ML_DTYPES + """
import numpy as np, minifloat
from minifloat import exchange
names = {f["name"] for f in minifloat._core.formats() if f["dlpack_bits"] == 8 * f["itemsize"]}
assert set(exchange.numpy_registration) == names, exchange.numpy_registration
assert all(v is None for v in exchange.numpy_registration.values()), exchange.numpy_registration
a = np.arange(16, dtype=np.uint16).view(minifloat.bfloat16)
b = np.from_dlpack(a)
assert b.dtype == a.dtype and np.shares_memory(a, b)
print("ok")
""")
    assert out.strip() == "ok"


@pytest.mark.parametrize("first", ["minifloat", "ml_dtypes"])
def test_ml_dtypes_and_jax_import_beside_minifloat(first):
    """ml_dtypes 0.7 raises at its import if minifloat took its DLPack codes:
    minifloat registers after it, in either order; np.from_dlpack then gives
    ml_dtypes' arrays, zero-copy, and minifloat arrays still export."""
    pytest.importorskip("ml_dtypes")
    second = "ml_dtypes" if first == "minifloat" else "minifloat"
    out = run(f"""
import numpy as np
import {first}
import {second}
import minifloat, ml_dtypes
assert minifloat.exchange.numpy_registration      # done, after ml_dtypes
a = np.arange(16, dtype=np.uint16).view(minifloat.bfloat16)
b = np.from_dlpack(a)
assert np.shares_memory(a, b) and b.tobytes() == a.tobytes() and b.dtype.name == "bfloat16"
assert minifloat.from_dlpack(a).dtype == a.dtype
try:
    import jax
except ImportError:
    pass
print("ok")
""")
    assert out.strip() == "ok"


@pytest.mark.parametrize("f", BYTE_FORMATS, ids=lambda f: f["name"])
def test_np_from_dlpack_of_a_minifloat_array(f):
    a = codes(f).reshape(8, 8)
    for src in (a, a[::2, 1:]):
        b = np.from_dlpack(src)
        # minifloat's dtype, or ml_dtypes' of the same format where ml_dtypes
        # (imported here by JAX) registered the code first
        assert b.dtype.type.__name__ == f["name"] and b.shape == src.shape
        assert np.shares_memory(b, src)                       # zero-copy
        assert b.tobytes() == src.tobytes()
        assert minifloat.from_dlpack(src).dtype == f["dtype"]


def test_sub_byte_formats_are_not_exported_by_numpy():
    # NumPy's registry needs bits == 8 * itemsize; minifloat.dlpack packs them
    for f in SUBBYTE_FORMATS:
        with pytest.raises(BufferError):
            np.from_dlpack(np.zeros(4, f["dtype"]))
        assert minifloat.from_dlpack(minifloat.dlpack(np.zeros(4, f["dtype"]))).dtype == f["dtype"]


try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None
JAX_BYTE = [f for f in BYTE_FORMATS if jnp is not None and hasattr(jnp, f["name"])]
needs_jax = pytest.mark.skipif(jnp is None, reason="JAX is not installed")


@needs_jax
def test_jax_has_bfloat16_and_float8():
    assert {"bfloat16", "float8_e4m3fn", "float8_e5m2"} <= {f["name"] for f in JAX_BYTE}


@pytest.mark.parametrize("f", JAX_BYTE, ids=lambda f: f["name"])
def test_np_from_dlpack_of_a_jax_array(f):
    src = codes(f, seed=1).reshape(8, 8)
    j = jnp.asarray(src.view(f"u{f['itemsize']}")).view(getattr(jnp, f["name"]))
    a = np.from_dlpack(j)
    assert a.dtype.type.__name__ == f["name"] and a.shape == (8, 8)
    assert minifloat.from_dlpack(j).dtype == f["dtype"]
    assert a.ctypes.data == j.unsafe_buffer_pointer()         # zero-copy
    assert a.tobytes() == src.tobytes()


@pytest.mark.parametrize("f", JAX_BYTE, ids=lambda f: f["name"])
def test_jax_consumes_ndarray_dlpack(f):
    a = aligned(codes(f, seed=2).reshape(8, 8))
    j = jnp.from_dlpack(a)                                    # ndarray.__dlpack__
    assert j.dtype.name == f["name"] and j.shape == (8, 8)
    assert j.unsafe_buffer_pointer() == a.ctypes.data         # zero-copy
    assert np.asarray(j).view(f"u{f['itemsize']}").tobytes() == a.tobytes()
    assert jax.dlpack.from_dlpack(a).dtype.name == f["name"]
