"""Block-scaled formats: minifloat.quantize / dequantize against the spec written as
vectorized NumPy (with any library's element cast) and torchao's eager torch code."""
import numpy as np

import minifloat as mf

from ..harness import Plan, Run

BLOCK_BENCH = {   # name: (format, element name (minifloat/ml_dtypes, torch), emax, max)
    "mxfp8": ("mxfp8_e4m3", "float8_e4m3fn", 8, 448.0),
    "mxfp4": ("mxfp4", "float4_e2m1fn", 2, 6.0),
    "nvfp4": ("nvfp4", "float4_e2m1fn", 2, 6.0),
}


def _np_pack4(c):
    c = c.reshape(-1, 2)
    return c[:, 0] | (c[:, 1] << 4)


def _np_unpack4(b):
    out = np.empty((b.size, 2), np.uint8)
    out[:, 0] = b & 0xF
    out[:, 1] = b >> 4
    return out.reshape(-1)


def np_block_quantize(x, fmt, elem_dtype, emax, max_pos, e4m3_dtype=None):
    """The obvious vectorized NumPy code (x: float32, size a multiple of the
    block): OCP MX floor scales / TransformerEngine's NVFP4 scales (cast to
    e4m3_dtype), the elements cast to elem_dtype (minifloat's or ml_dtypes')."""
    f32 = np.float32
    if fmt == "nvfp4":
        xb = x.reshape(-1, 16)
        amax = np.max(np.abs(xb), axis=1)
        s_enc = f32(448 * 6) / np.max(amax)
        sdb = np.minimum(amax * (s_enc * f32(1 / 6)), f32(448))
        scales = sdb.astype(e4m3_dtype)
        with np.errstate(divide="ignore"):
            rcp = np.minimum(f32(1) / (scales.astype(f32) * (f32(1) / s_enc)),
                             np.finfo(f32).max)
        v = np.clip(xb * rcp[:, None], -max_pos, max_pos)
        return _np_pack4(v.astype(elem_dtype).view(np.uint8)), scales, f32(1) / s_enc
    xb = x.reshape(-1, 32)
    amax = np.max(np.abs(xb), axis=1)
    e = np.clip(((amax.view(np.int32) >> 23) & 0xFF) - 127 - emax, -127, 127)
    scale = np.ldexp(f32(1), e).astype(f32)
    v = np.clip(xb / scale[:, None], -max_pos, max_pos)
    codes = v.astype(elem_dtype).view(np.uint8)
    if np.dtype(elem_dtype).itemsize == 1 and max_pos == 6.0:
        codes = _np_pack4(codes)
    return codes, (e + 127).astype(np.uint8), None


def np_block_dequantize(codes, scales, fmt, elem_dtype, tensor_scale):
    f32 = np.float32
    if fmt in ("mxfp4", "nvfp4"):
        codes = _np_unpack4(codes)
    vals = codes.view(elem_dtype).astype(f32)
    if fmt == "nvfp4":
        return ((vals.reshape(-1, 16) * scales.astype(f32)[:, None]) * tensor_scale).reshape(-1)
    s = np.ldexp(f32(1), scales.astype(np.int32) - 127).astype(f32)
    return (vals.reshape(-1, 32) * s[:, None]).reshape(-1)



def _torch_block_quantize(torch, x, fmt, tdt, emax, max_pos):
    """torchao-style eager torch (FLOOR scales; float4 elements have no torch cast:
    the scaled values are what the kernel would round)"""
    if fmt == "nvfp4":
        xb = x.reshape(-1, 16)
        amax = xb.abs().amax(1)
        s_enc = 448.0 * 6.0 / amax.max()
        scales = torch.clamp(amax * (s_enc / 6.0), max=448.0).to(torch.float8_e4m3fn)
        rcp = 1.0 / (scales.float() / s_enc)
        return torch.clamp(xb * rcp[:, None], -max_pos, max_pos), scales
    xb = x.reshape(-1, 32)
    amax = xb.abs().amax(1)
    e = torch.clamp(((amax.view(torch.int32) >> 23) & 0xFF) - 127 - emax, -127, 127)
    scale = torch.exp2(e.float())
    v = torch.clamp(xb / scale[:, None], -max_pos, max_pos)
    if tdt is not None:
        v = v.to(tdt)
    return v, scale.to(torch.float8_e8m0fnu)


def build_block(name, dequant, env):
    fmt, elem, emax, max_pos = BLOCK_BENCH[name]
    n = env.n - env.n % 32
    x = env.f32("x", n)[:n]
    x2 = x.reshape(-1, 4096) if n % 4096 == 0 else x.reshape(1, -1)
    q = mf.quantize(x2, fmt)
    runs = []
    if dequant:
        runs.append(Run("minifloat", "q.dequantize()", q.dequantize))
    else:
        runs.append(Run("minifloat", f"minifloat.quantize(x, '{fmt}')",
                        lambda: mf.quantize(x2, fmt)))

    def np_run(who, lib, note):
        edt, sdt = getattr(lib, elem), lib.float8_e4m3fn
        if dequant:
            codes, scales, ts = np_block_quantize(x, fmt, edt, emax, max_pos, sdt)
            return Run(who, "NumPy spec code, element cast",
                       lambda: np_block_dequantize(codes, scales, fmt, edt, ts), note=note)
        return Run(who, "NumPy spec code, element cast",
                   lambda: np_block_quantize(x, fmt, edt, emax, max_pos, sdt), note=note)

    if env.ml is not None:
        runs.append(np_run("ml_dtypes", env.ml, "ml_dtypes casts"))
    if env.torch is not None:
        torch = env.torch
        tx = torch.from_numpy(x)
        tdt = getattr(torch, elem, None) if elem != "float4_e2m1fn" else None
        if dequant:
            v, sc = _torch_block_quantize(torch, tx, fmt, tdt, emax, max_pos)
            if fmt == "nvfp4":
                runs.append(Run("torch", "(v.float() * scale.float()) * ts",
                                lambda: (v.float() * sc.float()[:, None]) * 0.5))
            else:
                runs.append(Run("torch", "v.float() * scale.float()",
                                lambda: v.float() * sc.float()[:, None]))
        else:
            runs.append(Run("torch", "torchao-style eager code",
                            lambda: _torch_block_quantize(torch, tx, fmt, tdt, emax, max_pos),
                            note="" if tdt is not None else "no fp4 cast: ends scaled"))
    runs.append(np_run("numpy", mf, "minifloat casts"))
    if env.nk is not None:
        runs.append(Run("numkong", "no block-scaled formats", None))
    return Plan(runs, nbytes=n * 4 + n * (1 if name == "mxfp8" else 0.5))

