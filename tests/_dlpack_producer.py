"""The test-only DLPack producer: build it on first use and import it.

tests/dlpack_producer/producer.c makes DLPack capsules by hand (any version,
flags, device, dtype, shape, strides, malformed ones included) and counts its
deleter's calls; the importer's tests, the fuzz targets and the GPU tests use
it.  It is not part of the installed package.  load() compiles it with a C
compiler against Python's headers and the package's DLPack headers
(src/dlpack/dlpack.h, capsule.h) into a cache directory keyed by what goes into the build
(sources, compiler, flags, interpreter), so the build runs once per change,
and imports it (module ``dlpack_test_producer``)::

    import _dlpack_producer                 # tests/ on sys.path
    producer = _dlpack_producer.load()
    cap = producer.make_capsule(data=buf, shape=(4,), dtype=(2, 32, 1))

From outside tests/ (a benchmark script), put the folder on sys.path first::

    sys.path.insert(0, os.path.join(REPO, "tests"))

Environment:

* ``CC``: the compiler (default: the one Python was built with, from
  sysconfig, else cc, gcc or clang, whichever is on PATH);
* ``MINIFLOAT_TEST_CFLAGS``: extra compiler flags (.ci/sanitizer-leg builds the
  producer with the sanitizers the package is built with);
* ``MINIFLOAT_TEST_BUILD_DIR``: the cache directory (default
  ``$XDG_CACHE_HOME/minifloat-tests`` or ``~/.cache/minifloat-tests``, else one
  under the temp directory).
"""
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading

MODULE = "dlpack_test_producer"
_HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(_HERE, "dlpack_producer", "producer.c")
ABI_DIR = os.path.join(os.path.dirname(_HERE), "src", "dlpack")
HEADERS = [os.path.join(ABI_DIR, "dlpack.h"), os.path.join(ABI_DIR, "capsule.h")]

_lock = threading.Lock()
_module = None


def _compiler():
    cands = []
    if os.environ.get("CC"):
        cands.append(shlex.split(os.environ["CC"]))
    if sysconfig.get_config_var("CC"):
        cands.append(shlex.split(sysconfig.get_config_var("CC")))
    cands += [["cc"], ["gcc"], ["clang"]]
    for cmd in cands:
        if cmd and shutil.which(cmd[0]):
            return cmd
    raise RuntimeError("the test-only DLPack producer (tests/dlpack_producer/producer.c) needs a "
                       "C compiler: none of $CC, sysconfig's CC, cc, gcc, clang is on PATH")


def _command(cc, out):
    includes = {sysconfig.get_paths()["include"], sysconfig.get_paths()["platinclude"]}
    cmd = cc + ["-std=c11", "-O1", "-g", "-fPIC", "-Wall", "-Wno-unused-parameter",
                "-Wno-missing-field-initializers", "-Wno-cast-function-type"]
    cmd += [f"-I{d}" for d in sorted(includes)] + [f"-I{ABI_DIR}"]
    cmd += shlex.split(os.environ.get("MINIFLOAT_TEST_CFLAGS", ""))
    if sys.platform == "darwin":
        cmd += ["-bundle", "-undefined", "dynamic_lookup"]
    else:
        cmd += ["-shared"]
    return cmd + [SOURCE, "-o", out]


def _cache_dir():
    d = os.environ.get("MINIFLOAT_TEST_BUILD_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = os.path.join(base, "minifloat-tests")
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    return os.path.join(tempfile.gettempdir(), f"minifloat-tests-{os.getuid()}"
                        if hasattr(os, "getuid") else "minifloat-tests")


def build():
    """Compile the producer if its cached build is missing; return the path."""
    if sys.platform == "win32":
        raise RuntimeError("the test-only DLPack producer is built with a Unix C compiler "
                           "(cc/gcc/clang); Windows is not supported by tests/_dlpack_producer.py")
    cc = _compiler()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256()
    for path in (SOURCE, *HEADERS):
        with open(path, "rb") as f:
            key.update(f.read())
    key.update(repr((_command(cc, "OUT"), sys.version, suffix)).encode())
    folder = os.path.join(_cache_dir(), f"{MODULE}-{key.hexdigest()[:20]}")
    out = os.path.join(folder, MODULE + suffix)
    if os.path.exists(out):
        return out
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{threading.get_ident()}{suffix}")
    # The compiler is not under test: without the sanitizer runtime a leg
    # preloads for the tests (it would check the compiler instead)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONMALLOC")}
    cmd = _command(cc, tmp)
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or not os.path.exists(tmp):
        raise RuntimeError("building the test-only DLPack producer failed (it needs a C "
                           "compiler and Python's headers, e.g. python3-dev):\n  "
                           + shlex.join(cmd) + "\n" + r.stdout)
    os.replace(tmp, out)        # atomic: concurrent builds (pytest-xdist) each write their own
    return out


def load():
    """The producer module (built on first use; the same module afterwards)."""
    global _module
    with _lock:
        if _module is None:
            _module = sys.modules.get(MODULE)
        if _module is None:
            path = build()
            spec = importlib.util.spec_from_file_location(MODULE, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[MODULE] = mod
            _module = mod
        return _module
