"""Living next to ml_dtypes and JAX ("Be a good neighbour").

Import order matters here, so every check runs in a fresh interpreter:
minifloat must not import ml_dtypes or jax, must leave ml_dtypes' names in
np.sctypeDict to ml_dtypes (JAX resolves "bfloat16" through them), and must
add the casts and mixed-operand promotion with ml_dtypes' arrays whichever
of the two is imported first.
"""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ml_dtypes")

ORDERS = ["minifloat_first", "ml_dtypes_first"]


def run(*parts, env=None):
    """Run the parts (each dedented) as one program in a fresh interpreter."""
    code = "\n".join(textwrap.dedent(p) for p in parts)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, **(env or {})))
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def imports(order, other="ml_dtypes"):
    if order == "minifloat_first":
        return f"import numpy as np\nimport minifloat as mf\nimport {other}\n"
    return f"import numpy as np\nimport {other}\nimport minifloat as mf\n"


def test_import_alone_brings_neither_ml_dtypes_nor_jax_and_names_are_ours():
    out = run("""
        import sys, numpy as np, minifloat as mf
        assert not any(m in sys.modules for m in ("ml_dtypes", "jax", "torch")), \\
            [m for m in ("ml_dtypes", "jax", "torch") if m in sys.modules]
        for t in mf.scalar_types:
            dt = np.dtype(t.__name__)
            assert dt is np.dtype(t) and np.sctypeDict[t.__name__] is t, t
            assert np.dtype(dt.str) is dt and np.dtype(str(dt)) is dt
            assert np.zeros(2, t.__name__).dtype is dt
        a = np.ones(1000, mf.bfloat16)     # reductions take the name (patch "reductions")
        assert a.sum(dtype="bfloat16") == 1000 and np.sum(a, dtype="bfloat16") == 1000
        assert np.prod(a, dtype="bfloat16") == 1
        assert mf._neighbours.linked == ()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_a_name_someone_else_holds_is_left_alone():
    out = run("""
        import numpy as np
        np.sctypeDict["bfloat16"] = np.float32      # any prior owner
        import minifloat as mf
        assert np.sctypeDict["bfloat16"] is np.float32
        assert np.sctypeDict["float8_e4m3fn"] is mf.float8_e4m3fn
        assert np.dtype(mf.bfloat16).type is mf.bfloat16
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("order", ORDERS)
def test_names_are_ml_dtypes_once_it_is_imported(order):
    out = run(imports(order), """
        import sys
        for t in mf.scalar_types:
            n = t.__name__
            theirs = getattr(ml_dtypes, n)
            assert np.dtype(n).type is theirs and np.sctypeDict[n] is theirs, n
            # minifloat's own type always means minifloat's dtype
            assert np.dtype(t).type is t and np.zeros(1, dtype=t).dtype.type is t
            assert mf.finfo(n) is mf.finfo(t) if t().dtype.kind == "f" else True
        # the finder has gone, and ml_dtypes kept its own loader
        assert not any(type(f).__module__ == "minifloat._neighbours" and f.name == "ml_dtypes"
                       for f in sys.meta_path)
        assert type(ml_dtypes.__loader__).__module__ != "minifloat._neighbours"
        assert type(ml_dtypes.__spec__.loader).__module__ != "minifloat._neighbours"
        assert len(mf._neighbours.linked) == len(mf.scalar_types)
        print("ok")
    """)
    assert out.strip() == "ok"


JAX_CHECKS = """
    import jax, jax.numpy as jnp
    assert jnp.zeros(3, "bfloat16").dtype == jnp.bfloat16
    assert jnp.ones(3).astype("float8_e4m3fn").dtype == jnp.float8_e4m3fn
    assert jax.random.normal(jax.random.key(0), (3,), dtype="bfloat16").dtype == jnp.bfloat16
    assert jnp.zeros(3, "int4").dtype == jnp.int4
    j = jnp.array([1.0, 2.0, 3.0, float("nan")], "bfloat16")
    m = np.array([1.0, 2.5, 3.0, float("nan")], mf.bfloat16)
    for got in (np.asarray(j) == m, m == np.asarray(j)):
        assert got.tolist() == [True, False, True, False], got
    assert (np.asarray(j) != m).tolist() == [False, True, False, True]
    assert not np.array_equal(np.asarray(j), m) and np.array_equal(np.asarray(j)[:1], m[:1])
    print("ok")
"""


@pytest.mark.parametrize("order", ORDERS)
def test_jax_string_dtypes_with_minifloat(order):
    pytest.importorskip("jax")
    out = run(imports(order, other="jax"), JAX_CHECKS)
    assert out.strip() == "ok"


@pytest.mark.parametrize("order", ORDERS + ["extension_module_first"])
def test_link_comes_before_any_dtype_comparison(order):
    """NumPy remembers "no cast" for a pair of DTypes the first time anything
    compares them (dtype ==, a dict or set holding both: ml_dtypes 0.7's
    import fills np.finfo's cache), and a cast cannot be added to such a pair
    afterwards: the link runs as soon as both DTypes exist, so imports in any
    order warn nothing, and casts and mixed operands work after user code
    that compares the dtypes."""
    if order == "extension_module_first":
        head = "import numpy as np\nimport minifloat as mf\nimport ml_dtypes._ml_dtypes_ext\n"
    else:
        head = imports(order)
    out = run("import warnings\nwarnings.simplefilter('error')\n" + head, """
        import ml_dtypes
        assert mf._neighbours.linked, "not linked"
        names = [f["name"] for f in mf._core.formats() if hasattr(ml_dtypes, f["name"])]
        both = {np.dtype(getattr(t, n)) for n in names for t in (mf, ml_dtypes)}
        assert all(np.dtype(getattr(ml_dtypes, n)) != np.dtype(getattr(mf, n)) for n in names)
        warnings.resetwarnings()            # the imports warned nothing
        for n in names:
            ml_t, mf_t = getattr(ml_dtypes, n), getattr(mf, n)
            a = np.arange(4).astype(np.float32).astype(ml_t)
            b = a.astype(mf_t)
            assert b.dtype.type is mf_t and (b.astype(ml_t).view(np.uint8 if a.itemsize == 1
                                                                 else np.uint16)
                                             == a.view(np.uint8 if a.itemsize == 1
                                                       else np.uint16)).all(), n
            assert (a + b).dtype.type is mf_t, n
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("order", ORDERS)
def test_casts_both_ways_bit_exact(order):
    out = run(imports(order), """
        from minifloat import _core
        def codes_of(x):
            return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)
        for f in _core.formats():
            n, u = f["name"], np.uint16 if f["itemsize"] == 2 else np.uint8
            ml_t, mf_t = getattr(ml_dtypes, n), getattr(mf, n)
            codes = np.arange(1 << f["bits"], dtype=u)
            a_ml, a_mf = codes.view(ml_t), codes.view(mf_t)
            # same format: the codes are kept (NaN payloads included)
            assert (a_ml.astype(mf_t).view(u) == codes).all(), n
            assert (a_mf.astype(ml_t).view(u) == codes).all(), n
            assert np.asarray(a_ml, dtype=mf_t).dtype.type is mf_t
            assert np.can_cast(ml_t, mf_t) and np.can_cast(mf_t, ml_t)
            # another format: as minifloat's own cast between the two formats
            other = "bfloat16" if n != "bfloat16" else "float8_e5m2"
            with np.errstate(all="ignore"):
                want = codes_of(a_mf.astype(getattr(mf, other)))
                assert (codes_of(a_ml.astype(getattr(mf, other))) == want).all(), n
                assert (codes_of(a_mf.astype(getattr(ml_dtypes, other))) == want).all(), n
        print("ok")
    """)
    assert out.strip() == "ok"


MIXED = """
    import operator
    rng = np.random.default_rng(7)
    ARITH = [operator.add, operator.sub, operator.mul, operator.truediv]
    CMP = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]
    FORMATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
               "float8_e8m0fnu", "float6_e2m3fn", "float4_e2m1fn", "int4", "uint2"]
    def codes(x):
        return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)
    for n in FORMATS:
        f = next(f for f in mf._core.formats() if f["name"] == n)
        ml_t, mf_t = getattr(ml_dtypes, n), getattr(mf, n)
        u = np.uint16 if f["itemsize"] == 2 else np.uint8
        if f["itemsize"] == 2:
            a, b = rng.integers(0, 1 << 16, 20000).astype(u), rng.integers(0, 1 << 16, 20000).astype(u)
        else:
            c = np.arange(1 << f["bits"], dtype=u)
            a = np.repeat(c, c.size)                  # every pair of codes
            b = np.tile(c, c.size)
        x_mf, y_mf, x_ml, y_ml = a.view(mf_t), b.view(mf_t), a.view(ml_t), b.view(ml_t)
        ops = ARITH if f["kind"] == "float" else ARITH[:3]
        with np.errstate(all="ignore"):
            for op in ops:
                want = op(x_mf, y_mf)
                for got in (op(x_ml, y_mf), op(x_mf, y_ml)):
                    assert got.dtype == want.dtype and got.dtype.type is mf_t, (n, op, got.dtype)
                    assert (codes(got) == codes(want)).all(), (n, op)
            for op in CMP:
                want = op(x_mf, y_mf)
                for got in (op(x_ml, y_mf), op(x_mf, y_ml)):
                    assert got.dtype == np.bool_ and (got == want).all(), (n, op)
            same = b.copy(); same[::2] = a[::2]
            assert np.array_equal(x_ml[:5], x_mf[:5]) == np.array_equal(x_mf[:5], x_mf[:5])
            assert np.array_equal(x_ml, same.view(mf_t)) == np.array_equal(x_mf, same.view(mf_t))
            assert np.array_equal(x_mf, same.view(ml_t)) == np.array_equal(x_mf, same.view(mf_t))
            if f["kind"] == "float":
                # isclose converts y to result_type(y, 1.0): the format for
                # minifloat's y, float64 for ml_dtypes' y (ml_dtypes' rule)
                for eq_nan in (False, True):
                    assert (np.isclose(x_ml, y_mf, equal_nan=eq_nan)
                            == np.isclose(x_mf, y_mf, equal_nan=eq_nan)).all(), n
                    assert (np.isclose(x_mf, y_ml, equal_nan=eq_nan)
                            == np.isclose(x_ml, y_ml, equal_nan=eq_nan)).all(), n
    # result_type: minifloat's of the same format, either order
    for n in FORMATS:
        assert np.result_type(getattr(ml_dtypes, n), getattr(mf, n)).type is getattr(mf, n)
        assert np.result_type(getattr(mf, n), getattr(ml_dtypes, n)).type is getattr(mf, n)
    # different formats across the two families: == and != compare values;
    # arithmetic works in either order, never all-False
    p = np.array([1.0, 2.0, 3.0], ml_dtypes.float8_e4m3fn)
    q = np.array([1.0, 2.0, 4.0], mf.bfloat16)
    assert (p == q).tolist() == [True, True, False] == (q == p).tolist()
    assert (p != q).tolist() == [False, False, True] == (q != p).tolist()
    assert (q + p).dtype.type is mf.bfloat16
    # (ml_dtypes first: before ml_dtypes 0.7 NumPy's legacy resolver picks the
    # float32 loop, which holds the exact sum; with 0.7, and minifloat first:
    # bfloat16, rounded once)
    want = q + p.astype(mf.float8_e4m3fn)
    got = p + q
    if tuple(int(v) for v in ml_dtypes.__version__.split(".")[:2]) >= (0, 7):
        assert got.dtype.type is mf.bfloat16, got.dtype
    else:
        assert got.dtype == np.float32, got.dtype
        assert got.tolist() == (q.astype(np.float32) + p.astype(np.float32)).tolist()
    assert got.astype(mf.bfloat16).view(np.uint16).tolist() == want.view(np.uint16).tolist()
    print("ok")
"""


@pytest.mark.parametrize("order", ORDERS)
def test_mixed_operands_equal_same_dtype_results(order):
    out = run(imports(order), MIXED)
    assert out.strip() == "ok"


def test_no_ml_dtypes_switch_never_links():
    out = run(imports("minifloat_first"), """
        import sys
        assert mf._neighbours.linked == ()
        assert not any(type(f).__module__ == "minifloat._neighbours" and f.name == "ml_dtypes"
                       for f in sys.meta_path)
        assert np.dtype("bfloat16").type is ml_dtypes.bfloat16     # names: the same rule
        try:
            np.zeros(2, ml_dtypes.bfloat16).astype(mf.bfloat16)
        except TypeError:
            print("ok")
    """, env={"MINIFLOAT_NO_ML_DTYPES": "1"})
    assert out.strip() == "ok"
