import numpy as np

import minifloat


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
    # a reader that goes away early is not an error
    p = subprocess.Popen([sys.executable, "-m", "minifloat", "info"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()
    assert p.wait() == 0
    assert b"Traceback" not in p.stderr.read()
