"""The minifloat command line.

    minifloat info              version, formats, kernel level
    minifloat bench [options]   the benchmark (see minifloat.bench)
"""
import argparse
import sys


def _cmd_info(args):
    import numpy as np

    import minifloat
    from minifloat import _core

    print(f"minifloat {minifloat.__version__} (NumPy {np.__version__}, Python {sys.version.split()[0]})")
    print(f"kernel level: {_core.get_kernel_level()}   (available here: {', '.join(_core.kernel_levels())};"
          f" set MINIFLOAT_KERNEL_LEVEL to force one)")
    print()
    rows = []
    for f in _core.formats():
        if f["kind"] == "float":
            fi = minifloat.finfo(f["type"])
            rows.append((f["name"], str(f["bits"]), str(f["exp_bits"]), str(f["mant_bits"]),
                         f"{float(fi.max):.6g}", f"{float(fi.smallest_normal):.6g}",
                         f"{float(fi.eps):.6g}",
                         f"{'inf ' if f['has_inf'] else ''}{'nan' if f['has_nan'] else ''}".strip() or "-",
                         f"{f['dlpack_code']}"))
        else:
            rows.append((f["name"], str(f["bits"]), "-", "-", str(f["max"]), "-", "-",
                         f"int [{f['min']}, {f['max']}]", f"{f['dlpack_code']}"))
    head = ("format", "bits", "exp", "mant", "max", "smallest normal", "eps", "specials", "DLPack")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*head))
    print(fmt.format(*("-" * w for w in widths)))
    for r in rows:
        print(fmt.format(*r))
    return 0


def _cmd_bench(args):
    from . import bench

    return bench.main(args.bench_args)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="minifloat", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    p_info = sub.add_parser("info", help="version, formats and their parameters, kernel level")
    p_info.set_defaults(func=_cmd_info)
    p_bench = sub.add_parser("bench", help="time minifloat against numpy, ml_dtypes, torch, numkong",
                             add_help=False)
    p_bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    p_bench.set_defaults(func=_cmd_bench)
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["info"])
    return args.func(args)
