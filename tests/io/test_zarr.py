"""Zarr v3 data types for every format (minifloat/zarr.py): names and JSON
forms from zarr-extensions, round trips bit-exact through compression,
sharding and both byte orders."""
import json
import subprocess
import sys
from importlib import metadata

import numpy as np
import pytest

import minifloat as mf

zarr = pytest.importorskip("zarr", minversion="3.1")
mfz = pytest.importorskip("minifloat.io.zarr")
from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ZstdCodec  # noqa: E402
from zarr.core.dtype import data_type_registry  # noqa: E402

FORMATS = {f["name"]: f for f in mf._core.formats()}

# zarr-extensions data-types/<name>/README.md: the code the constant "NaN"
# stands for (float8_e4m3fn is not there yet: minifloat's choice, the one NaN
# code with a clear sign bit, as its siblings)
SPEC_NAN = {"bfloat16": 0x7FC0, "float8_e3m4": 0x78, "float8_e4m3": 0x7C, "float8_e5m2": 0x7E,
            "float8_e4m3b11fnuz": 0x80, "float8_e4m3fnuz": 0x80, "float8_e5m2fnuz": 0x80,
            "float8_e8m0fnu": 0xFF, "float8_e4m3fn": 0x7F}
# names zarr-extensions defines (the rest follow its conventions, docs/zarr-dask.md)
EXTENSION_NAMES = {"bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
                   "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                   "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int2", "uint2", "int4",
                   "uint4"}


def every_code(name):
    f = FORMATS[name]
    codes = np.arange(1 << f["bits"], dtype=np.uint16 if f["itemsize"] == 2 else np.uint8)
    return codes.view(f["dtype"])


def same_codes(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    u = f"u{a.dtype.itemsize}"
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(u), np.ascontiguousarray(b).view(u))


def test_entry_points_are_the_format_table():
    eps = {ep.name: ep for ep in metadata.entry_points(group="zarr.data_type")
           if ep.value.startswith("minifloat.")}
    assert set(eps) == set(FORMATS)
    assert EXTENSION_NAMES <= set(FORMATS)
    for name, ep in eps.items():
        cls = ep.load()
        assert cls is mfz.data_types[name] and cls._zarr_v3_name == name
        assert type(cls.from_native_dtype(FORMATS[name]["dtype"]).to_native_dtype()) \
            is type(FORMATS[name]["dtype"])


@pytest.mark.parametrize("order", ["import zarr, minifloat", "import minifloat, zarr"])
def test_registered_in_either_import_order_without_user_code(order):
    code = f"""{order}
import numpy as np
from zarr.core.dtype import data_type_registry as r, get_data_type_from_native_dtype as get
import minifloat.io.zarr as mfz
for name, cls in mfz.data_types.items():
    assert r.contents[name] is cls, name
    assert type(get(np.dtype(getattr(minifloat, name)))) is cls
    assert type(r.match_json(name, zarr_format=3)) is cls
# zarr's own loading of the entry points (a zarr that calls it) changes nothing
r._lazy_load()
assert all(r.contents[n] is c for n, c in mfz.data_types.items())
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_minifloat_imports_without_zarr():
    code = """import sys
sys.modules["zarr"] = None      # as if zarr were not installed
import minifloat, numpy as np
assert np.asarray(1.5, minifloat.bfloat16) == 1.5
try:
    import minifloat.io.zarr
except ImportError:
    print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_import_minifloat_imports_neither_zarr_nor_dask():
    code = "import sys, minifloat; print(sorted(m for m in ('zarr', 'dask', 'xarray') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_a_name_someone_else_registered_is_left_alone():
    class Theirs:
        pass
    saved = dict(data_type_registry.contents)
    try:
        data_type_registry.contents["bfloat16"] = Theirs
        done = mfz.register()
        assert data_type_registry.contents["bfloat16"] is Theirs
        assert "bfloat16" not in done and "float8_e4m3fn" in done
    finally:
        data_type_registry.contents.clear()
        data_type_registry.contents.update(saved)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_code_round_trips_with_compression_and_sharding(tmp_path, name):
    a = np.resize(every_code(name), 768).reshape(-1, 16)            # >= 2 shards
    for i, kw in enumerate([dict(compressors=ZstdCodec()), dict(compressors=BloscCodec()),
                            dict(compressors=GzipCodec(), shards=(16, 16)),
                            dict(compressors=None, shards=(16, 8))]):
        z = zarr.create_array(tmp_path / f"a{i}.zarr", shape=a.shape, chunks=(8, 8),
                              dtype=a.dtype, **kw)
        z[...] = a
        meta = json.loads((tmp_path / f"a{i}.zarr" / "zarr.json").read_text())
        assert meta["data_type"] == name
        back = zarr.open_array(tmp_path / f"a{i}.zarr", mode="r")
        same_codes(back[...], a)
        same_codes(back[3:7, 1:9], a[3:7, 1:9])


@pytest.mark.parametrize("endian", ["little", "big"])
def test_bfloat16_chunks_in_either_byte_order(tmp_path, endian):
    a = every_code("bfloat16")[::97].copy()                        # includes NaNs and infs
    z = zarr.create_array(tmp_path / "a.zarr", shape=a.shape, chunks=a.shape, dtype=a.dtype,
                          serializer=BytesCodec(endian=endian), compressors=None)
    z[...] = a
    meta = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())
    assert meta["codecs"] == [{"name": "bytes", "configuration": {"endian": endian}}]
    raw = (tmp_path / "a.zarr" / "c" / "0").read_bytes()
    assert raw == a.view(np.uint16).astype("<u2" if endian == "little" else ">u2").tobytes()
    back = zarr.open_array(tmp_path / "a.zarr", mode="r")[...]
    same_codes(back.astype(back.dtype.newbyteorder("=")), a)


def test_big_endian_in_memory_array_is_stored(tmp_path):
    a = np.array([1.5, -2.0, np.inf, np.nan], mf.bfloat16)
    be = a.astype(a.dtype.newbyteorder(">"))
    z = zarr.create_array(tmp_path / "a.zarr", shape=a.shape, chunks=(4,), dtype=be.dtype,
                          compressors=None)
    z[...] = be
    back = zarr.open_array(tmp_path / "a.zarr", mode="r")[...]
    same_codes(back.astype(a.dtype), a)


@pytest.mark.parametrize("name", ["float4_e2m1fn", "int4", "uint2", "float6_e3m2fn", "int1"])
def test_stored_upper_bits_are_ignored(tmp_path, name):
    # zarr-extensions: a sub-byte value is one byte whose upper bits are arbitrary
    f = FORMATS[name]
    junk = np.array([0b10101010, 0b01010101, 0xFF, 0], np.uint8) & ~np.uint8((1 << f["bits"]) - 1)
    codes = (np.arange(4, dtype=np.uint8) & ((1 << f["bits"]) - 1))
    z = zarr.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(4,), dtype=np.uint8,
                          compressors=None, fill_value=0)
    z[...] = codes | junk
    meta_path = tmp_path / "a.zarr" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["data_type"] = name
    meta_path.write_text(json.dumps(meta))
    back = zarr.open_array(tmp_path / "a.zarr", mode="r")[...]
    np.testing.assert_array_equal(back.astype(np.float64), codes.view(f["dtype"]).astype(np.float64))


def fill_json(tmp_path, name, fill):
    z = zarr.create_array(tmp_path / "f.zarr", shape=(4,), chunks=(2,), dtype=FORMATS[name]["dtype"],
                          fill_value=fill, overwrite=True)
    meta = json.loads((tmp_path / "f.zarr" / "zarr.json").read_text())
    return z, meta["fill_value"]


@pytest.mark.parametrize("name", [n for n in FORMATS if FORMATS[n].get("has_nan")])
def test_nan_fill_value_is_the_extension_constant(tmp_path, name):
    assert FORMATS[name]["nan_code"] == SPEC_NAN[name]
    z, js = fill_json(tmp_path, name, np.nan)
    assert js == "NaN"
    back = zarr.open_array(tmp_path / "f.zarr", mode="r")[...]       # nothing written
    assert int(back.view(f"u{back.dtype.itemsize}")[0]) == SPEC_NAN[name]
    dt = mfz.data_types[name]()
    assert int(np.asarray(dt.from_json_scalar("NaN", zarr_format=3)).view(f"u{back.dtype.itemsize}")) \
        == SPEC_NAN[name]


@pytest.mark.parametrize("name", list(FORMATS))
def test_fill_values_json(tmp_path, name):
    f = FORMATS[name]
    dt = mfz.data_types[name]()
    if f["kind"] != "float":
        for v in (f["min"], f["max"]):
            _, js = fill_json(tmp_path, name, v)
            assert js == v and type(js) is int
            assert int(dt.from_json_scalar(v, zarr_format=3)) == v
        for bad in (f["min"] - 1, f["max"] + 1):
            with pytest.raises(ValueError, match="out of range"):
                dt.cast_scalar(bad)
        with pytest.raises(TypeError):
            dt.from_json_scalar("NaN", zarr_format=3)
        return
    # a finite value is a JSON number, exactly
    v = float(f["max"])
    _, js = fill_json(tmp_path, name, v)
    assert js == v
    assert float(dt.from_json_scalar(js, zarr_format=3)) == v
    for const, value in (("Infinity", np.inf), ("-Infinity", -np.inf), ("NaN", np.nan)):
        has = f["has_nan"] if const == "NaN" else f["has_inf"]
        if const == "-Infinity" and not f["has_sign"]:
            has = False
        if has:
            assert dt.to_json_scalar(value, zarr_format=3) == const
            got = float(dt.from_json_scalar(const, zarr_format=3))
            assert (np.isnan(got) and np.isnan(value)) or got == value
        else:
            with pytest.raises(ValueError, match="not supported"):
                dt.from_json_scalar(const, zarr_format=3)
            with pytest.raises(ValueError, match="not supported"):
                zarr.create_array(tmp_path / "x.zarr", shape=(1,), dtype=f["dtype"], fill_value=value,
                                  overwrite=True)
    # any code as a hex string (two digits a byte), read back exactly
    width = 2 * f["itemsize"]
    for code in (0, f["max_code"], (1 << f["bits"]) - 1):
        got = dt.from_json_scalar("0x" + format(code, f"0{width}x"), zarr_format=3)
        assert int(np.asarray(got).view(f"u{f['itemsize']}")) == code
    with pytest.raises(ValueError, match="hex"):
        dt.from_json_scalar("0x" + "0" * (width + 2), zarr_format=3)


def test_other_nans_and_negative_zero_keep_their_codes(tmp_path):
    dt = mfz.data_types["bfloat16"]()
    other = np.array([0x7FC1, 0xFFC0], np.uint16).view(mf.bfloat16)
    assert [dt.to_json_scalar(v, zarr_format=3) for v in other] == ["0x7fc1", "0xffc0"]
    z, js = fill_json(tmp_path, "bfloat16", other[0])
    assert js == "0x7fc1"
    back = zarr.open_array(tmp_path / "f.zarr", mode="r")[...]
    assert int(back.view(np.uint16)[0]) == 0x7FC1
    z, js = fill_json(tmp_path, "float8_e4m3fn", -0.0)
    assert js == 0 and str(js) == "-0.0"
    assert int(zarr.open_array(tmp_path / "f.zarr", mode="r")[...].view(np.uint8)[0]) == 0x80


def test_zarr_format_2_is_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="zarr v3 data type.*zarr_format=3"):
        zarr.create_array(tmp_path / "a.zarr", shape=(4,), dtype=mf.bfloat16, zarr_format=2)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_code_is_a_fill_value_that_round_trips_through_strict_json(name):
    dt = mfz.data_types[name]()
    values = every_code(name)
    if name == "bfloat16":
        values = values[::7]
    u = f"u{values.dtype.itemsize}"
    for v in values:
        js = dt.to_json_scalar(v, zarr_format=3)
        text = json.dumps(js, allow_nan=False)          # never a bare NaN/Infinity
        back = dt.from_json_scalar(json.loads(text), zarr_format=3)
        assert np.asarray(back).view(u) == np.asarray(v).view(u), (name, js)
