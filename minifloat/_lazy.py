"""Submodules loaded at first use (PEP 562), so that ``import minifloat``
imports only what its top-level names need and never an optional dependency
(zarr, dask, ...), while every public submodule is still an attribute:
``minifloat.io.safetensors`` works after a plain ``import minifloat``."""
import importlib


def attach(package, submodules, aliases=None):
    """``__getattr__`` and ``__dir__`` for the package named ``package``.

    submodules: names of its submodules, imported when first read.
    aliases:    {name: full module name}: a name of the package that stands
                for a module living elsewhere (``minifloat.safetensors`` for
                ``minifloat.io.safetensors``).
    """
    submodules = frozenset(submodules)
    aliases = dict(aliases or {})
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name):
        if name in submodules:
            target = f"{package}.{name}"
        elif name in aliases:
            target = aliases[name]
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        namespace[name] = module        # later reads skip __getattr__
        return module

    def __dir__():
        return sorted(set(namespace) | submodules | set(aliases))

    return __getattr__, __dir__
