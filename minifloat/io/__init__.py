"""Files: minifloat arrays in and out of the formats others read.

    npyio         save/load/savez: .npy and .npz without pickle
    safetensors   the safetensors format: load, open (lazy), save, write
    checkpoint    what `minifloat inspect` and `minifloat convert` do with a
                  safetensors checkpoint: inspect_file, convert_file
    layouts       the quantized layouts of the model hubs (DeepSeek FP8 block,
                  gpt-oss MXFP4, compressed-tensors, ModelOpt, MLX, ...):
                  which stored tensors make one logical tensor; decoding
    packed_int    the values of integer weights packed into 32-bit words
                  (compressed-tensors pack-quantized, MLX affine), for layouts
    requantize    float weights into those layouts (`convert --to`), as
                  each layout's reference quantizer computes them
    zarr          zarr v3 data types (imports zarr; registered when zarr is
                  imported)
    dask          float32-accurate reductions of dask arrays (imports dask)

Each submodule loads at first use (``minifloat.io.safetensors`` after a plain
``import minifloat``), so optional dependencies are imported only by the
module that needs them.

Where new readers go: a checkpoint *layout* (how a model hub stores a
quantized tensor in safetensors) is a matter of recognising tensor names,
dtypes and metadata in a file that ``safetensors`` already reads, and of
dequantizing them; that is ``layouts`` (one entry per layout), used by
``checkpoint``'s inspect and convert.  ``safetensors`` stays the file format
only.
"""
from .._lazy import attach as _attach

# no __all__: `from minifloat.io import *` must not import zarr and dask
__getattr__, __dir__ = _attach(__name__, ["npyio", "safetensors", "checkpoint", "layouts",
                                             "packed_int", "requantize", "zarr",
                                             "dask"])
