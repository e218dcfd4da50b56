"""What the installed package ships: the library, nothing of the workbench (the
benchmarks live in the checkout's benchmarks/ folder, the test helpers in tests/)."""
import importlib.metadata
import re

import pytest

from minifloat import _core

# what only timing code calls
TIMING = re.compile(r"\b(perf_counter|process_time|timeit)\b")


def shipped():
    """The installed package's files (RECORD), without the dist-info and scripts."""
    files = [f for f in importlib.metadata.files("minifloat") or ()
             if f.parts[:1] == ("minifloat",)]
    if not any(f.parts == ("minifloat", "__init__.py") for f in files):
        pytest.skip("an editable install: the package's files are the checkout's")
    return files


def test_no_benchmark_module_is_shipped():
    names = [str(f) for f in shipped()]
    assert not [n for n in names if re.search(r"(^|/)bench[^/]*$", n)]
    assert not [n for n in names if "benchmarks" in n.split("/")[:-1]]


def test_no_shipped_module_times_anything():
    timing = [str(f) for f in shipped() if f.suffix == ".py" and TIMING.search(f.read_text())]
    assert timing == []


def test_core_has_no_test_producer():
    # the DLPack test producer is tests/dlpack_producer, built for the tests only
    assert [n for n in dir(_core) if n.startswith("_test") or "capsule" in n] == []
