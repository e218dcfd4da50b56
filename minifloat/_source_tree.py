"""A clear error for ``import minifloat`` in minifloat's own source tree.

Run from the source root, ``import minifloat`` finds the source package
(``minifloat/``), which has no compiled ``_core``: Python's message would be
"cannot import name '_core' from partially initialized module 'minifloat'
(most likely due to a circular import)", which points the wrong way.
"""
import glob
import importlib.machinery
import os


def check_not_source_tree():
    """Raise ImportError with directions when this package is a source
    checkout without a built ``_core``; return otherwise (the caller re-raises
    the original error)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(pkg)
    if any(glob.glob(os.path.join(pkg, "_core" + suffix))       # not _core.pyi, the stub
           for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        return                      # a built core that failed to load: its own error
    if not (os.path.isfile(os.path.join(root, "meson.build"))
            and os.path.isfile(os.path.join(root, "src", "core", "module.c"))):
        return
    raise ImportError(
        f"Error importing minifloat: you should not try to import minifloat from its source "
        f"directory ({root}): the package there has no compiled core (minifloat._core). "
        f"Install it with `pip install .` (or `pip install --no-build-isolation .`), then "
        f"leave the source tree (cd elsewhere) and start Python from there.") from None
