"""Every input the fuzzers (fuzz/run, docs/hardening.md) ever found failing,
replayed through the same targets: each must now end in one of NumPy's
exceptions or a clean result, with the DLPack deleter run exactly once."""
import os

import pytest

import _fuzz_targets

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "fuzz_corpus")


def _cases():
    out = []
    for target in sorted(_fuzz_targets.TARGETS):
        d = os.path.join(CORPUS, target)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            out.append(pytest.param(target, os.path.join(d, name), id=f"{target}/{name}"))
    return out


@pytest.mark.parametrize("target,path", _cases())
def test_fuzz_regression(target, path):
    with open(path, "rb") as f:
        data = f.read()
    _fuzz_targets.TARGETS[target](data)


def test_corpus_is_not_empty():
    # the corpus is found (a packaging or path mistake must not pass silently)
    assert any(t == "dlpack" for t, *_ in (c.values for c in _cases()))


@pytest.mark.parametrize("target", sorted(_fuzz_targets.TARGETS))
def test_targets_take_any_bytes(target):
    # the byte reader never runs dry: empty and short inputs are valid inputs
    for data in (b"", b"\x00", b"\xff" * 7, bytes(range(256))):
        _fuzz_targets.TARGETS[target](data)
