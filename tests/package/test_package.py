"""The package's surface: what `import minifloat` loads, which submodules it
reaches, the version, and the type stub of the C core (minifloat/_core.pyi)."""
import ast
import importlib.metadata
import importlib.resources
import importlib.util
import subprocess
import sys

import pytest

import minifloat as mf

# packages minifloat works with but never needs: `import minifloat` imports none
OPTIONAL = ("zarr", "dask", "distributed", "xarray", "safetensors", "torch", "jax", "tqdm",
            "matplotlib", "ml_dtypes", "numkong")
# public submodules whose import needs an optional package
NEEDS = {"minifloat.io.zarr": "zarr", "minifloat.io.dask": "dask"}


def run(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_minifloat_imports_no_optional_package():
    code = f"""import sys
import minifloat
print(sorted(m for m in {OPTIONAL!r} if m in sys.modules))
print(sorted(m for m in sys.modules if m.startswith("minifloat.")))"""
    loaded, own = run(code).splitlines()
    assert loaded == "[]"
    # the lazy ones stay unloaded until read
    for name in ("minifloat.io.safetensors", "minifloat.io.checkpoint", "minifloat.io.zarr",
                 "minifloat.io.dask", "minifloat.cli"):
        assert repr(name) not in own


def public_submodules():
    """Every public module of the installed package, by walking its files."""
    names = []
    todo = [(importlib.resources.files("minifloat"), "minifloat")]
    while todo:
        folder, prefix = todo.pop()
        for entry in folder.iterdir():
            stem = entry.name.split(".")[0]
            if stem.startswith("_"):
                continue
            if entry.is_dir() and (entry / "__init__.py").is_file():
                names.append(f"{prefix}.{stem}")
                todo.append((entry, f"{prefix}.{stem}"))
            elif entry.name.endswith(".py"):
                names.append(f"{prefix}.{stem}")
    return sorted(names)


def test_every_public_submodule_is_an_attribute():
    names = public_submodules()
    assert {"minifloat.io", "minifloat.io.safetensors", "minifloat.io.checkpoint",
            "minifloat.io.npyio", "minifloat.casting", "minifloat.cli"} <= set(names)
    names = [n for n in names if n not in NEEDS or importlib.util.find_spec(NEEDS[n])]
    # in a fresh process: here earlier tests have imported most of them already
    code = f"""import functools, minifloat
for name in {names!r}:
    mod = functools.reduce(getattr, name.split(".")[1:], minifloat)
    assert mod.__name__ == name, (name, mod)
    assert name.rpartition(".")[2] in dir(functools.reduce(getattr, name.split(".")[1:-1], minifloat))
print("ok")"""
    assert run(code).strip() == "ok"


def test_io_modules_keep_their_earlier_names():
    for name in ("safetensors", "checkpoint", "npyio"):
        assert getattr(mf, name) is importlib.import_module(f"minifloat.io.{name}")
        assert name in dir(mf)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mf.nope
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mf.io.nope


def test_cast_and_its_earlier_name():
    assert mf.convert is mf.cast
    assert "cast" in mf.__all__ and "convert" in mf.__all__


def test_version_comes_from_the_build():
    assert mf.__version__ == mf._core.__version__ == importlib.metadata.version("minifloat")
    out = run("import sys; from minifloat.cli import main; sys.argv = ['minifloat', 'info']; main()")
    assert out.startswith(f"minifloat {mf.__version__} ")


def stub_names():
    """Top-level names the stub declares, less its @type_check_only helpers."""
    tree = ast.parse((importlib.resources.files("minifloat") / "_core.pyi").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            if not any(isinstance(d, ast.Name) and d.id == "type_check_only"
                       for d in node.decorator_list):
                names.add(node.name)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    return names


def test_core_stub_names_exactly_what_core_has():
    assert (importlib.resources.files("minifloat") / "py.typed").is_file()
    have = {n for n in dir(mf._core) if not n.startswith("__")}
    stub = stub_names()
    assert "__version__" in stub
    stub = {n for n in stub if not n.startswith("__")}
    assert sorted(have - stub) == [], "in _core, missing from minifloat/_core.pyi"
    assert sorted(stub - have) == [], "in minifloat/_core.pyi, not in _core"


def test_core_stub_agrees_with_the_module():
    """mypy's stubtest: every signature and type of the stub against the built
    module (mypy is not a test dependency: skipped where it is missing)."""
    pytest.importorskip("mypy.stubtest")
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "minifloat._core"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
