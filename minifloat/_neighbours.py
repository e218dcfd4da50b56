"""Living next to ml_dtypes (and JAX, which uses ml_dtypes' types).

Two rules (docs/design.md, "Good neighbours"):

* Names.  ``np.dtype("bfloat16")`` looks the name up in ``np.sctypeDict``.
  minifloat adds its names there only where the name is free: a name that
  ml_dtypes (or anyone) registered first is left alone.  ml_dtypes, imported
  after minifloat, writes its names over ours (ml_dtypes 0.6 does so itself;
  :func:`_give_way` makes sure of it).  So once ml_dtypes is imported, in
  either order, the names are ml_dtypes' (JAX needs that); without
  ml_dtypes they are minifloat's.  ``minifloat.bfloat16`` (the type, or
  ``np.dtype(minifloat.bfloat16)``) always means minifloat's.

* Imports.  minifloat never imports ml_dtypes.  When the user does, before
  or after minifloat, ``_core._link_ml_dtypes`` adds the casts between the
  two families and the promoters for mixed operands.  An ml_dtypes imported
  later is noticed by a finder at the front of ``sys.meta_path`` that looks
  at one name only, "ml_dtypes._ml_dtypes_ext" (the extension module that
  creates ml_dtypes' DTypes): it wraps that module's loader to call the link
  right after the module has run, before the rest of ml_dtypes' ``__init__``
  (whose dtype comparisons would otherwise fix "no cast" in NumPy's cache
  first), then takes itself out of ``sys.meta_path``; a second finder for
  "ml_dtypes" hands the names over once the package has run (and links then,
  should the extension module be named otherwise).  ml_dtypes itself runs
  unchanged (its modules' ``__loader__`` and ``__spec__.loader`` are their
  own).  With ml_dtypes imported first, minifloat links before anything else
  in its own import.

``MINIFLOAT_NO_ML_DTYPES=1`` turns the link off (no casts, no promoters, no
finder); the names rule still holds.

* zarr.  The same kind of finder, for "zarr": when zarr is imported (before or
  after minifloat), it imports minifloat.io.zarr, which registers minifloat's
  zarr v3 data types (see there why that needs no user code).

* scipy.special.  The same kind of finder, for "scipy.special": once it is
  imported (before or after minifloat), each of its unary ufuncs gets a loop
  for the float formats (``_core._add_special_loops``), built on the loop
  NumPy runs for float16 (its result type, the same bits), that looks large calls
  up in a table of every code's result on all threads while
  ``scipy.special.geterr()`` is all "ignore" (docs/design.md, "scipy.special's
  ufuncs").  minifloat never imports scipy.
"""
import os
import sys

import numpy as np

from . import _core

_ML = "ml_dtypes"
_ML_EXT = "ml_dtypes._ml_dtypes_ext"   # the extension module that creates the DTypes

#: the format names linked with ml_dtypes (empty until ml_dtypes is imported)
linked = ()


_DTYPES = {f["name"]: f["dtype"] for f in _core.formats()}


def as_dtype(spec):
    """np.dtype(spec), except that a format name means minifloat's format: in
    minifloat's own functions (finfo, convert, asnumpy, ...) "bfloat16" is
    minifloat.bfloat16 whoever holds the name in np.sctypeDict."""
    if isinstance(spec, str) and spec in _DTYPES:
        return _DTYPES[spec]
    return np.dtype(spec)


def link_disabled():
    v = os.environ.get("MINIFLOAT_NO_ML_DTYPES", "")
    return v not in ("", "0")


def register_names(scalar_types):
    """Put minifloat's names in np.sctypeDict where no one else has."""
    for t in scalar_types:
        np.sctypeDict.setdefault(t.__name__, t)


def _give_way(ml, scalar_types):
    """ml_dtypes' names over minifloat's (ml_dtypes 0.6 writes them itself)."""
    for t in scalar_types:
        theirs = getattr(ml, t.__name__, None)
        if theirs is not None and np.sctypeDict.get(t.__name__) is t:
            np.sctypeDict[t.__name__] = theirs


def _link_casts(mod):
    """The casts and promoters with ml_dtypes' DTypes, from ``mod`` (ml_dtypes
    or its extension module, which creates the DTypes).  Once: later calls
    return at once (the C side links once per process)."""
    global linked, _tried
    if _tried or link_disabled():
        return
    _tried = True
    try:
        linked = _core._link_ml_dtypes(mod)
    except Exception as err:   # never fail `import ml_dtypes` (nor minifloat's import)
        import warnings
        warnings.warn(f"minifloat could not link to ml_dtypes ({err!r}): no casts or mixed "
                      f"operations between their arrays", RuntimeWarning, stacklevel=3)


_tried = False


def _link(ml, scalar_types):
    _give_way(ml, scalar_types)
    _link_casts(ml)


class _Loader:
    """The module's own loader, then the finder's callback once the module has run."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        # from here on ml_dtypes sees only its own loader
        module.__spec__.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        self._finder.remove()
        self._finder.on_load(sys.modules.get(module.__name__, module))


class _Finder:
    """A sys.meta_path entry that answers for one module name only
    ("ml_dtypes._ml_dtypes_ext", "ml_dtypes" or "zarr"; None for every other
    name, at the cost of one comparison)."""

    def __init__(self, name, on_load):
        self.name = name
        self.callbacks = [on_load]

    def on_load(self, module):
        for callback in self.callbacks:
            callback(module)

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, self)
        return spec

    def remove(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def _watch(name, on_load):
    """on_load(module) now if the module is loaded, else once it is imported
    (after the callbacks given before it for the same name)."""
    mod = sys.modules.get(name)
    if mod is not None:
        on_load(mod)
        return
    for f in sys.meta_path:
        if isinstance(f, _Finder) and f.name == name:
            f.callbacks.append(on_load)
            return
    sys.meta_path.insert(0, _Finder(name, on_load))


def after_import(name, on_load):
    """on_load(module) once the module ``name`` has been imported (now if it is)."""
    _watch(name, on_load)


def _zarr_imported(zarr_module):
    try:
        import zarr.core.dtype     # noqa: F401  zarr-python >= 3.1 has a data type registry
    except ImportError:
        return                     # zarr 2 (or 3.0): nothing to register with
    try:
        import minifloat.io.zarr   # noqa: F401  registers the data types at its import
    except Exception as err:   # never fail `import zarr` (nor minifloat's import)
        import warnings
        warnings.warn(f"minifloat could not register its zarr data types ({err!r}); "
                      f"import minifloat.io.zarr to see why", RuntimeWarning, stacklevel=2)


def install(scalar_types):
    """Early in minifloat's import, before anything compares dtypes: the names;
    the link to ml_dtypes now if it is loaded, else as soon as it is."""
    register_names(scalar_types)
    if sys.modules.get(_ML) is None and not link_disabled():
        # the link as soon as ml_dtypes' DTypes exist: NumPy remembers "no
        # cast" for a pair of DTypes the first time anything compares them
        # (dtype ==, a dict of dtypes: ml_dtypes 0.7 fills np.finfo's cache
        # at its import), and a cast cannot be added to such a pair later
        _watch(_ML_EXT, _link_casts)
    if sys.modules.get(_ML) is not None or not link_disabled():
        _watch(_ML, lambda ml: _link(ml, scalar_types))


def _scipy_special_imported(special):
    try:
        geterr = getattr(special, "geterr", None)
        for obj in list(vars(special).values()):   # vars: no module __getattr__ (deprecations)
            if isinstance(obj, np.ufunc) and obj.nin == 1 and obj.nout == 1:
                _core._add_special_loops(obj, geterr)
    except Exception as err:   # never fail `import scipy.special` (nor minifloat's import)
        import warnings
        warnings.warn(f"minifloat could not add its loops to scipy.special's ufuncs ({err!r}); "
                      f"they run NumPy's route, as for float16", RuntimeWarning, stacklevel=2)


def install_scipy_special():
    """At the end of minifloat's import: loops on scipy.special's unary ufuncs
    now if it is loaded, else once it is."""
    _watch("scipy.special", _scipy_special_imported)


def install_zarr():
    """At the end of minifloat's import: zarr's data types now if zarr is
    loaded, else once it is (minifloat.io.zarr registers them)."""
    _watch("zarr", _zarr_imported)
