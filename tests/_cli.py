"""Running the real `minifloat` console script from the tests (the CLI tests
of checkpoints and block formats share it)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _script():
    exe = Path(sys.executable).parent / "minifloat"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("minifloat")
    return [found] if found else [sys.executable, "-m", "minifloat"]


def run(*args, check=True, timeout=None):
    """`minifloat ARGS...` in a subprocess; with check, it must succeed
    without a traceback.  With a timeout, a hang fails the test."""
    out = subprocess.run(_script() + [str(a) for a in args], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, timeout=timeout)
    if check:
        assert out.returncode == 0, out.stderr
        assert "Traceback" not in out.stderr
    return out
