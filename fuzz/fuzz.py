"""Coverage-guided fuzzing of minifloat's input parsers with atheris
(libFuzzer): run through fuzz/run, which builds an instrumented minifloat.

    python fuzz/fuzz.py TARGET [libFuzzer flags...]

TARGET is one of tests/fuzz/_fuzz_targets.TARGETS (dlpack, npy, safetensors,
layouts, config).
"""
import os
import sys

import atheris

here = os.path.dirname(os.path.abspath(__file__))
# the targets (tests/fuzz/) and the test-only DLPack producer's builder (tests/)
sys.path.insert(0, os.path.join(here, "..", "tests"))
sys.path.insert(0, os.path.join(here, "..", "tests", "fuzz"))

# coverage: minifloat's C code (built with -fsanitize=fuzzer-no-link) and its
# Python modules; the harness itself is not instrumented (it only costs time)
with atheris.instrument_imports(include=["minifloat"]):
    import minifloat  # noqa: F401
import _fuzz_targets  # noqa: E402


def main():
    target = sys.argv.pop(1)
    if target == "dlpack":
        import _dlpack_producer
        _dlpack_producer.load()      # build the test-only producer before fuzzing starts
    check = _fuzz_targets.TARGETS[target]
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
