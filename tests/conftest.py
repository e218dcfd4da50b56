import contextlib
import glob
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

# The test modules live in feature folders (dtype/, casts/, ...) and import
# shared helpers by module name: _refs and _family_refs from this folder,
# and a few modules of their own folder (test_exchange, _fuzz_targets).
# pytest's default import mode puts each test module's folder on sys.path
# as it imports it; --import-mode=importlib does not, so put this folder and
# every test folder there up front.  The names of the test modules are
# unique across folders, so the order does not matter.
_HERE = os.path.dirname(os.path.abspath(__file__))
# the checkout these tests are in (docs/ and examples/ are read from there)
REPO_ROOT = Path(_HERE).parent
for _d in [_HERE] + sorted(e.path for e in os.scandir(_HERE)
                           if e.is_dir() and glob.glob(os.path.join(e.path, "test_*.py"))):
    if _d not in sys.path:
        sys.path.insert(0, _d)

# The exchange tests hand JAX arrays to minifloat on the CPU.  A CUDA build of
# JAX (a GPU machine) would put them in device memory, which the CPU cannot
# view, so JAX runs on the CPU here and in the children the tests start (they
# inherit the environment).  tests/exchange/test_gpu.py takes JAX's GPU arrays
# in a child of its own, without this setting.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import minifloat  # noqa: E402
from minifloat import _core  # noqa: E402

LEVELS = _core.kernel_levels()

NUMPY_VERSION = np.lib.NumpyVersion(np.__version__)
# NumPy >= 2.5 prints arrays of non-NumPy scalar types with str() of each
# element (numpy#30798); older NumPy formats them as floats (aligned columns)
NUMPY_PRINTS_ELEMENTS_WITH_STR = NUMPY_VERSION >= "2.5.0.dev0"
# NumPy >= 2.5 computes np.dot / ndarray.dot of a user dtype with its dotfunc
NUMPY_DOT_USES_DOTFUNC = NUMPY_VERSION >= "2.5.0.dev0"
# NumPy >= 2.4: numpy.testing and ndarray.conjugate know a user dtype is numeric
NUMPY_KNOWS_USER_NUMERIC = NUMPY_VERSION >= "2.4.0.dev0"
# set by .ci/arm-legs, whose Python leg runs under qemu-user (every
# instruction emulated, 10-50x slower): the heaviest tests check fewer thread
# counts there (each still runs every path and every level)
EMULATED = os.environ.get("MINIFLOAT_TESTS_EMULATED") == "1"


def pytest_configure(config):
    # pytest-run-parallel's marker, known without the plugin too
    config.addinivalue_line("markers", "thread_unsafe: not run in many threads at once "
                            "by pytest-run-parallel (the test reads process-wide state)")
    # the subset that .ci/arm-legs runs under qemu by default (kernels, casts,
    # matmul, the integer formats, smoke): set with a module's pytestmark
    config.addinivalue_line("markers", "arm: run by the Arm Python leg of CI under qemu "
                            "(.ci/arm-legs; the whole suite with MINIFLOAT_ARM_FULL=1)")
    # Tests start fresh interpreters with `python -c`, whose sys.path begins
    # with the working directory: from the repository root that would import
    # the source folder minifloat/ (no compiled core) instead of the installed
    # package.  Run the session from a neutral directory.
    os.chdir(tempfile.mkdtemp(prefix="minifloat-tests-"))


@contextlib.contextmanager
def kernel_level(name):
    """Run a block with the kernels of one level forced."""
    prev = _core.set_kernel_level(name)
    try:
        yield
    finally:
        _core.set_kernel_level(prev)


@pytest.fixture(params=LEVELS)
def each_level(request):
    """Parametrize a test over every kernel level this CPU supports."""
    with kernel_level(request.param):
        yield request.param


@pytest.fixture
def threads():
    """minifloat.set_num_threads for the test, the count restored after."""
    prev = _core.set_num_threads(None)
    _core.set_num_threads(prev)
    yield minifloat.set_num_threads
    minifloat.set_num_threads(prev)


FLOAT_FORMATS = [f["name"] for f in _core.formats() if f["kind"] == "float"]
INT_FORMATS = [f["name"] for f in _core.formats() if f["kind"] != "float"]


def mf_type(name):
    return getattr(minifloat, name)


@pytest.fixture(scope="session")
def dlpack_producer():
    """The test-only DLPack producer (tests/dlpack_producer/producer.c), built
    on first use by _dlpack_producer.py: capsules made by hand."""
    helper = sys.modules.get("_dlpack_producer")
    if helper is None:     # by path: --import-mode=importlib leaves tests/ off sys.path
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dlpack_producer.py")
        spec = importlib.util.spec_from_file_location("_dlpack_producer", path)
        helper = importlib.util.module_from_spec(spec)
        sys.modules["_dlpack_producer"] = helper
        spec.loader.exec_module(helper)
    return helper.load()
