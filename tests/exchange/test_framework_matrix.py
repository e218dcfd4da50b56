"""The framework matrix (docs/exchange.md): torch, JAX, MLX, TensorFlow
and Paddle, every dtype each has that minifloat has, both directions,
contiguous and strided, through minifloat (``from_dlpack``/``dlpack``) and, on
NumPy >= 2.5, through the array itself (``np.from_dlpack``/``ndarray.__dlpack__``).

Each framework runs in its own subprocess (tests/_framework_matrix.py):
TensorFlow and Paddle crash when both are loaded in one process, and TensorFlow
aborts the process on unaligned DLPack data, so a framework is never imported
here; one that is not installed is skipped (``find_spec``, which does not import
it).  The main CI leg has torch and JAX; .ci/framework-legs installs MLX,
TensorFlow and Paddle on NumPy 2.4 and 2.5.

Every cell compares values bit for bit; a cell the subprocess could not complete
is "WRONG: ..." and fails here.  EXPECTED pins what each framework does for the
formats every version of it has (a cell of a format a newer version adds is
checked for values only).
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

MATRIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_framework_matrix.py")
NUMPY_REGISTRY = hasattr(np.dtypes, "register_dlpack_dtype")

ZC, RO, COPY = "zero-copy", "zero-copy (read-only)", "copy"

# (direction, layout, route) -> result, per framework and format.  "numpy" routes
# are checked on NumPy >= 2.5 only.  A value starting with "refused" matches any
# refusal.
_BOTH_WAYS_ZC = {("import", lay, r): ZC for lay in ("contiguous", "strided")
                 for r in ("minifloat", "numpy")}
_BOTH_WAYS_ZC.update({("export", lay, r): ZC for lay in ("contiguous", "strided")
                      for r in ("minifloat", "numpy")})


def _legacy_compact():
    # JAX, TensorFlow: legacy capsules (read-only imports; slicing makes a new
    # contiguous array); they import compact (row-major) data only
    e = {("import", lay, r): RO for lay in ("contiguous", "strided")
         for r in ("minifloat", "numpy")}
    e.update({("export", "contiguous", r): ZC for r in ("minifloat", "numpy")})
    e.update({("export", "strided", r): "refused" for r in ("minifloat", "numpy")})
    return e


EXPECTED = {
    "torch": {n: dict(_BOTH_WAYS_ZC) for n in
              ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
               "float8_e5m2fnuz", "float8_e8m0fnu")},
    "jax": {**{n: _legacy_compact() for n in
               ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3",
                "float8_e8m0fnu")},
            # JAX exports float4 packed (minifloat unpacks: a copy); JAX 0.10
            # imports no sub-byte type over DLPack (minifloat.to_jax copies
            # through jnp.asarray), JAX 0.12 imports packed float4 (and ignores
            # the padded flag, so minifloat gives it the packed copy)
            "float4_e2m1fn": {**{("import", lay, "minifloat"): COPY
                                 for lay in ("contiguous", "strided")},
                              **{("export", lay, "minifloat"): ("refused", COPY)
                                 for lay in ("contiguous", "strided")}}},
    "tensorflow": {"bfloat16": _legacy_compact()},
    "paddle": {n: dict(_BOTH_WAYS_ZC) for n in ("bfloat16", "float8_e4m3fn", "float8_e5m2")},
    # MLX's CPU build copies every DLPack import; it exports legacy capsules
    "mlx": {"bfloat16": {**{("import", lay, r): RO for lay in ("contiguous", "strided")
                            for r in ("minifloat", "numpy")},
                         **{("export", lay, r): COPY for lay in ("contiguous", "strided")
                            for r in ("minifloat", "numpy")}}},
}

#: formats each framework must have (older versions may lack the others)
REQUIRED = {"torch": {"bfloat16", "float8_e4m3fn", "float8_e5m2"},
            "jax": {"bfloat16", "float8_e4m3fn", "float8_e5m2"},
            "mlx": {"bfloat16"},
            "tensorflow": {"bfloat16"},
            "paddle": {"bfloat16", "float8_e4m3fn", "float8_e5m2"}}

MODULE = {"torch": "torch", "jax": "jax", "mlx": "mlx", "tensorflow": "tensorflow",
          "paddle": "paddle"}


def run_matrix(fw):
    if importlib.util.find_spec(MODULE[fw]) is None:
        pytest.skip(f"{fw} is not installed (torch and JAX: the main CI leg; MLX, "
                    f"TensorFlow, Paddle: .ci/framework-legs)")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu",
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, MATRIX, fw], capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, (f"the {fw} matrix process failed (exit {proc.returncode}):\n"
                                  f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _matches(got, want):
    if isinstance(want, tuple):                 # any of these (framework versions differ)
        return any(_matches(got, w) for w in want)
    if want.startswith("refused"):
        return got.startswith("refused")
    return got == want


@pytest.mark.parametrize("fw", list(MODULE))
def test_framework_matrix(fw):
    res = run_matrix(fw)
    cells = res["cells"]
    wrong = [c for c in cells if c["result"].startswith("WRONG")]
    assert not wrong, wrong
    have = {c["dtype"] for c in cells}
    assert REQUIRED[fw] <= have, f"{fw} {res['version']} lacks {REQUIRED[fw] - have}"
    mismatched = []
    for c in cells:
        want = EXPECTED.get(fw, {}).get(c["dtype"], {}).get(
            (c["direction"], c["layout"], c["route"]))
        if want is not None and not _matches(c["result"], want):
            mismatched.append((c["dtype"], c["direction"], c["layout"], c["route"],
                               c["result"], f"expected {want}"))
    assert not mismatched, "\n".join(map(str, mismatched))
    routes = {c["route"] for c in cells}
    # NumPy's route: with NumPy's registry, unless ml_dtypes is installed and
    # the framework did not import it (minifloat then leaves the registry to
    # ml_dtypes' import: docs/exchange.md)
    assert res["numpy_route"] == (NUMPY_REGISTRY and (res["ml_dtypes_imported"]
                                                     or not res["ml_dtypes_installed"])), res
    assert routes == ({"minifloat", "numpy"} if res["numpy_route"] else {"minifloat"})
    extra = res.get("extra", {})
    assert not [v for v in extra.values() if v.startswith("WRONG")], extra
    if fw == "tensorflow":
        assert extra["aligned"] == ZC
        assert extra["unaligned"] == extra["strided"] == COPY
        assert extra["unaligned copy=False"].startswith("refused: BufferError")
        assert extra["dlpack copy=True of unaligned"] == COPY


# ----------------------------------------------------- as_ml_dtypes (no framework)

def test_as_ml_dtypes_is_a_view_of_the_same_name():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import minifloat as mf

    for f in mf._core.formats():
        t = getattr(ml_dtypes, f["name"], None)
        a = np.arange(8, dtype=np.uint8).astype(f"u{f['itemsize']}").view(f["dtype"])
        if t is None:
            with pytest.raises(TypeError, match=f"no {f['name']} dtype"):
                mf.as_ml_dtypes(a)
            continue
        v = mf.as_ml_dtypes(a)
        assert v.dtype == np.dtype(t) and np.shares_memory(v, a)
        assert v.view(f"u{f['itemsize']}").tolist() == a.view(f"u{f['itemsize']}").tolist()
        assert v[::2].base is not None
        assert mf.as_ml_dtypes(a[::2]).strides == a[::2].strides
        back = mf.asnumpy(v)                       # and back: the minifloat dtype, a view
        assert back.dtype == f["dtype"] and np.shares_memory(back, a)


def test_as_ml_dtypes_values_and_passthrough():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import minifloat as mf

    x = np.array([1.5, -2.0, 3.25], np.float32)
    v = mf.as_ml_dtypes(x.astype(mf.bfloat16))
    assert v.dtype == ml_dtypes.bfloat16
    assert v.astype(np.float32).tolist() == [1.5, -2.0, 3.25]
    assert mf.as_ml_dtypes(x) is x                             # NumPy's dtypes unchanged
    m = x.astype(ml_dtypes.float8_e4m3fn)
    assert mf.as_ml_dtypes(m) is m                             # ml_dtypes arrays unchanged
    assert mf.as_ml_dtypes([1.0, 2.0]).dtype == np.float64     # array-likes: np.asarray
    swapped = x.astype(mf.bfloat16).astype(np.dtype(mf.bfloat16).newbyteorder(">")) \
        if np.dtype(mf.bfloat16).newbyteorder(">") != np.dtype(mf.bfloat16) else None
    if swapped is not None:
        with pytest.raises(ValueError, match="byte-swapped"):
            mf.as_ml_dtypes(swapped)


def test_as_ml_dtypes_feeds_jax_constructor():
    jnp = pytest.importorskip("jax.numpy")
    import minifloat as mf

    a = np.array([1.5, -2.0, 3.25], np.float32).astype(mf.float8_e4m3fn)
    j = jnp.asarray(mf.as_ml_dtypes(a))
    assert j.dtype.name == "float8_e4m3fn"
    assert np.asarray(j.astype(jnp.float32)).tolist() == [1.5, -2.0, 3.25]
