"""Survey for docs/exchange.md ("Why patch_torch() converts to float32"):
third-party audio/image calls fed what ``tensor.numpy()`` returns for a
bfloat16 torch tensor under ``patch_torch("native")`` (a minifloat bfloat16
array), compared with the same call on ``tensor.float().numpy()``.

    python benchmarks/boundary_survey.py         # prints the markdown table

A call "behaves like float32" when it runs and its result (or the file it
writes) equals the float32 run's, value for value, after converting both
to float64.  Libraries that are not installed are reported as such.
"""
import importlib
import io
import os
import sys
import tempfile

import numpy as np

import minifloat


def _maybe(name):
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def _audio_signal():
    t = np.arange(4800) / 48000.0
    a = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.25 * np.sin(2 * np.pi * 3000 * t)
    a[:3] = [1.0, -1.0, 0.999]                  # full scale, as a normalised TTS output has
    return a.astype(np.float32)


def _image():
    rng = np.random.default_rng(0)
    return rng.random((16, 24, 3)).astype(np.float32)


def _write_read(write, read):
    """call write(path), return what read(path) gives back"""
    fd, path = tempfile.mkstemp(suffix=".wav")
    os.close(fd)
    try:
        write(path)
        return read(path)
    finally:
        os.unlink(path)


def calls():
    """(library, call, fn(x) -> result, kind of input)"""
    scipy_io = _maybe("scipy.io.wavfile")
    signal = _maybe("scipy.signal")
    ndimage = _maybe("scipy.ndimage")
    sf = _maybe("soundfile")
    librosa = _maybe("librosa")
    PIL = _maybe("PIL.Image")
    cv2 = _maybe("cv2")
    out = [
        ("scipy", "scipy.io.wavfile.write(f, 48000, a)", scipy_io and (
            lambda a: _write_read(lambda p: scipy_io.write(p, 48000, a),
                                  lambda p: scipy_io.read(p)[1])), "audio"),
        ("soundfile", "soundfile.write(f, a, 48000)", sf and (
            lambda a: _write_read(lambda p: sf.write(p, a, 48000, subtype="FLOAT"),
                                  lambda p: sf.read(p, dtype="float32")[0])), "audio"),
        ("librosa", "librosa.resample(a, orig_sr=48000, target_sr=16000)", librosa and (
            lambda a: librosa.resample(a, orig_sr=48000, target_sr=16000)), "audio"),
        ("librosa", "librosa.feature.melspectrogram(y=a, sr=48000)", librosa and (
            lambda a: librosa.feature.melspectrogram(y=a, sr=48000)), "audio"),
        ("librosa", "librosa.util.normalize(a)", librosa and (
            lambda a: librosa.util.normalize(a)), "audio"),
        ("scipy", "scipy.signal.resample_poly(a, 1, 3)", signal and (
            lambda a: signal.resample_poly(a, 1, 3)), "audio"),
        ("scipy", "scipy.signal.resample(a, 1600)", signal and (
            lambda a: signal.resample(a, 1600)), "audio"),
        ("scipy", "scipy.signal.lfilter([0.5, 0.5], [1.0], a)", signal and (
            lambda a: signal.lfilter([0.5, 0.5], [1.0], a)), "audio"),
        ("scipy", "scipy.signal.stft(a, 48000)", signal and (
            lambda a: signal.stft(a, 48000)[2]), "audio"),
        ("numpy", "np.fft.rfft(a)", lambda a: np.fft.rfft(a), "audio"),
        ("numpy", "(a * 32767).astype(np.int16)  (TTS save)",
         lambda a: (a * 32767).astype(np.int16), "audio"),
        ("numpy", "np.sqrt(np.mean(a ** 2))  (RMS level)",
         lambda a: np.sqrt(np.mean(a ** 2)), "audio"),
        ("PIL", "PIL.Image.fromarray(img[..., 0])  (float, mode F)", PIL and (
            lambda x: np.asarray(PIL.fromarray(x[..., 0]))), "image"),
        ("PIL", "PIL.Image.fromarray((img * 255).astype(np.uint8))", PIL and (
            lambda x: np.asarray(PIL.fromarray((x * 255).astype(np.uint8)))), "image"),
        ("cv2", "cv2.resize(img, (48, 32))", cv2 and (
            lambda x: cv2.resize(x, (48, 32))), "image"),
        ("cv2", "cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)", cv2 and (
            lambda x: cv2.cvtColor(x, cv2.COLOR_RGB2GRAY)), "image"),
        ("scipy", "scipy.ndimage.zoom(img, (2, 2, 1), order=1)", ndimage and (
            lambda x: ndimage.zoom(x, (2, 2, 1), order=1)), "image"),
        ("scipy", "scipy.ndimage.gaussian_filter(img, 1)", ndimage and (
            lambda x: ndimage.gaussian_filter(x, 1)), "image"),
    ]
    return out


def _as_f64(r):
    r = np.asarray(r)
    if r.dtype.kind == "c":
        return r.astype(np.complex128)
    return r.astype(np.float64)


def run_one(fn, x32):
    """'same', 'refuses: <error>' or 'differs: <how>'"""
    bf = x32.astype(minifloat.bfloat16)
    ref_in = bf.astype(np.float32)           # what .float().numpy() gives: the same values
    want = fn(ref_in)
    try:
        got = fn(bf)
    except Exception as e:                    # noqa: BLE001 (any refusal counts)
        msg = str(e).splitlines()[0] if str(e) else ""
        return f"refuses: {type(e).__name__}: {msg[:90]}"
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"differs: shape {g.shape} vs {w.shape}"
    gv, wv = _as_f64(g), _as_f64(w)
    if np.array_equal(gv, wv, equal_nan=True):
        note = "" if g.dtype == w.dtype else f" (result dtype {g.dtype}, float32 run {w.dtype})"
        return "same" + note
    bad = ~np.isclose(gv, wv, rtol=0, atol=0)
    i = int(np.flatnonzero(bad.ravel())[0])
    err = float(np.max(np.abs(gv - wv)))
    return (f"differs: {int(bad.sum())} of {bad.size} values, e.g. {g.ravel()[i]!r} vs "
            f"{w.ravel()[i]!r}; result dtype {g.dtype} (float32 run: {w.dtype}); max |diff| {err:.3g}")


def main():
    import warnings
    warnings.simplefilter("ignore")
    inputs = {"audio": _audio_signal(), "image": _image()}
    rows, same = [], 0
    for lib, call, fn, kind in calls():
        if not fn:
            rows.append((call, "not installed"))
            continue
        res = run_one(fn, inputs[kind])
        same += res.startswith("same")
        rows.append((call, res))
    print("| call, given `tensor.numpy()` of a bfloat16 tensor | with `patch_torch(\"native\")` |")
    print("|---|---|")
    for call, res in rows:
        print(f"| `{call}` | {res.replace('|', '/')} |")
    vers = []
    for m in ("numpy", "scipy", "soundfile", "librosa", "PIL", "cv2"):
        mod = _maybe(m)
        if mod is not None:
            vers.append(f"{m} {getattr(mod, '__version__', '?')}")
    print(f"\n{same} of {len(rows)} behave like `.float().numpy()`; with the default "
          f"(float32) all {len(rows)} do.  Versions: {', '.join(vers)}.")


if __name__ == "__main__":
    sys.exit(main())
