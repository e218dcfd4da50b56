"""The checkout's benchmarks/ for the tests.  It is not installed: it sits next to
tests/, in the checkout that holds this folder."""
import importlib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def benchmarks(module):
    """benchmarks.<module>, imported from the checkout (skips the test, or the test
    module, when the tests are not in a checkout)."""
    if not os.path.isfile(os.path.join(BENCHMARKS, "__init__.py")):
        pytest.skip("the tests are not in a minifloat checkout (no benchmarks/ folder)",
                    allow_module_level=True)
    if "benchmarks" not in sys.modules:
        # the root on sys.path just for this import: the package takes it off again
        # before it imports minifloat (the root's minifloat/ is the unbuilt source)
        sys.path.insert(0, ROOT)
        try:
            importlib.import_module("benchmarks")
        finally:
            while ROOT in sys.path:
                sys.path.remove(ROOT)
    pkg = sys.modules["benchmarks"]
    assert os.path.realpath(os.path.dirname(pkg.__file__)) == os.path.realpath(BENCHMARKS), (
        f"another package named benchmarks was imported: {pkg.__file__}")
    return importlib.import_module(f"benchmarks.{module}")
