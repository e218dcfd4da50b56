import numpy as np
import pytest

import minifloat

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs)


def test_import_and_basic_arithmetic():
    a = np.array([1.5, 2.25], dtype=minifloat.bfloat16)
    assert (a + a).dtype == np.dtype(minifloat.bfloat16)
    assert (a + a).astype(np.float32).tolist() == [3.0, 4.5]


def test_cli_info_and_broken_pipe():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "minifloat", "info"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "bfloat16" in out.stdout and "kernel level" in out.stdout
    # a reader that goes away early (`minifloat info | head`) is not an error:
    # stdout raising BrokenPipeError on write, as a closed pipe does
    code = (
        "import io, os, sys\n"
        "class Closed(io.TextIOWrapper):\n"
        "    def write(self, s):\n"
        "        raise BrokenPipeError(32, 'Broken pipe')\n"
        "sys.stdout = Closed(open(os.devnull, 'wb'))\n"
        "from minifloat.cli import main\n"
        "rc = main(['info'])\n"
        "sys.stderr.write('rc=%d' % rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "rc=0" in out.stderr
