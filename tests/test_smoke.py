import numpy as np

import minifloat


def test_import_and_basic_arithmetic():
    a = np.array([1.5, 2.25], dtype=minifloat.bfloat16)
    assert (a + a).dtype == np.dtype(minifloat.bfloat16)
    assert (a + a).astype(np.float32).tolist() == [3.0, 4.5]
