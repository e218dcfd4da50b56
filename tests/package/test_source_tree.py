"""``import minifloat`` in the source tree gives a clear error, not
Python's "partially initialized module ... circular import" message."""
import glob
import os
from importlib.machinery import EXTENSION_SUFFIXES
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not os.path.isfile(os.path.join(ROOT, "meson.build")),
                    reason="the tests are not in a minifloat source checkout")
@pytest.mark.skipif(any(glob.glob(os.path.join(ROOT, "minifloat", "_core" + s)) for s in EXTENSION_SUFFIXES),
                    reason="this source tree has a built core (in-place build)")
def test_import_from_source_root_explains():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import minifloat"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: Error importing minifloat: you should not try to "
                           "import minifloat from its source directory"), out.stderr
    assert "pip install ." in last and "circular import" not in out.stderr


def test_import_elsewhere_works(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import minifloat; print(minifloat.bfloat16(1))"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1.0"
