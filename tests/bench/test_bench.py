"""Smoke tests of the benchmark (benchmarks/ in the checkout, `python -m benchmarks`):
it runs at tiny sizes and prints the tables.

No timing is asserted: the machine is shared and numbers are noise at these sizes."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minifloat
from _checkout import BENCHMARKS, ROOT, benchmarks

run = benchmarks("run")
report = benchmarks("report")
harness = benchmarks("harness")
cases = benchmarks("cases")

QUICK = ["--quick", "--repeat", "1"]
HAVE_ML = importlib.util.find_spec("ml_dtypes") is not None
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def run_bench(capsys, *args):
    assert run.main(QUICK + list(args)) == 0
    return capsys.readouterr().out


def summary_rows(out):
    """{case label: cells} of the text summary table."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("case "))
    # the dashes under the header give each column's span, whether the
    # columns are two spaces apart or closed up to one (wide cells)
    spans = [m.span() for m in re.finditer(r"-+", lines[start + 1])]
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip() or line.startswith("speed-up"):
            break
        cells = [line[a:b].strip() for a, b in spans]
        while cells and not cells[-1]:
            cells.pop()
        rows[cells[0]] = cells[1:]
    return rows


def head_cells(out):
    """The summary table's column names."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("case "))
    return [lines[start][a:b].strip() for a, b in
            (m.span() for m in re.finditer(r"-+", lines[start + 1]))]


def test_registry():
    names = [c.name for c in cases.CASES]
    assert len(names) == len(set(names))
    for want in ("cast f32->bf16 out", "cast f32->bf16 astype", "cast bf16->f32 out",
                 "cast f32->e4m3fn astype",
                 "cast e5m2->f32 out", "add bf16", "multiply bf16", "sum bf16",
                 "sum bf16 axis=0", "dot bf16", "matmul bf16 small", "matmul bf16 large",
                 "exp bf16", "log bf16", "tanh bf16", "dlpack import bf16", "block matmul"):
        assert want in names
    assert [c.name for c in cases.select_cases("matmul")] == ["matmul bf16 small",
                                                              "matmul bf16 large",
                                                              "matmul bf16 x16",
                                                              "matmul bf16 stack",
                                                              "block matmul"]
    for want in ("matvec bf16", "vecmat bf16", "v @ a bf16"):
        assert want in names
    assert len(cases.select_cases("e4m3fn,e5m2")) == 8
    assert cases.select_cases(None) == cases.CASES


def test_full_quick_run(capsys):
    out = run_bench(capsys)
    assert all(len(line) <= report.WIDTH for line in out.splitlines()), "wider than 100 columns"
    assert "minifloat speed-up vs each library" in out
    assert "kernel level" in out
    rows = summary_rows(out)
    env = harness.Env(2**14, (32, 64))
    expected = [c.label(env) for c in cases.CASES if c.available()]
    assert list(rows) == expected
    for cells in rows.values():
        # minifloat ms, peers (torch at 1 and maybe N threads), then numpy u16 (add,
        # multiply) and minifloat at one thread where it has more
        assert len(cells) in (5, 6, 7, 8)
        assert float(cells[0]) > 0                             # minifloat always runs
        for c in cells[1:]:
            assert re.fullmatch(r"~?[0-9.e+-]+x!?|n/a|absent|-", c), c
    head = " ".join(head_cells(out))
    numkong = head_cells(out).index("numkong") - 1
    # numkong has no exp ("absent": numkong is not installed, e.g. on aarch64 here)
    assert rows["exp bf16"][numkong] == ("n/a" if importlib.util.find_spec("numkong") else "absent")
    # a case with no numkong run at all (the stack of products): the same, never
    # "absent" (not installed) while numkong is installed
    stack = next(v for k, v in rows.items() if k.startswith("matmul bf16 stack"))
    assert stack[numkong] == rows["exp bf16"][numkong]
    assert "u16" in head
    assert rows["exp bf16"][numkong + 1] == "-"               # no uint16 reference
    assert re.fullmatch(r"[0-9.]+x", rows["add bf16"][numkong + 1])
    if minifloat.get_num_threads() > 1:
        assert "mf 1t" in head and re.fullmatch(r"[0-9.]+x", rows["add bf16"][numkong + 2])


def test_structure_and_results():
    opts = run.parse_args(QUICK + ["--cases", "sum bf16,dot"])
    rep = run.run(opts)
    names = [c.name for c in report.cases_of(rep.rows)]
    assert names == ["sum bf16", "sum bf16 axis=0", "dot bf16"]
    for case in report.cases_of(rep.rows):
        first = next(r for r in rep.rows if r.case is case)
        assert first.who == "minifloat" and first.seconds > 0
        assert not first.wrong and first.err < 1e-2
    sums = {r.who: r for r in rep.rows if r.case.name == "sum bf16"}
    exact = next(v for c, v in rep.exact.items() if c.name == "sum bf16")
    assert sums["minifloat"].value == pytest.approx(exact, rel=1e-2)
    if HAVE_ML:                            # accumulates in bfloat16: stuck at 256
        assert sums["ml_dtypes"].wrong and sums["ml_dtypes"].value < exact / 4
    if HAVE_TORCH:
        assert not sums["torch 1t"].wrong
    text = report.render_text(rep)
    assert "sum bf16 results: exact" in text


def test_without_peers(monkeypatch, capsys):
    monkeypatch.setattr(harness, "import_peer", lambda name: None)
    out = run_bench(capsys, "--cases", "bf16->f32,add,exp,matmul bf16 small")
    assert "ml_dtypes not installed" in out and "torch not installed" in out
    # without torch there is no multi-threaded torch column: ml_dtypes, torch 1t, numpy, numkong
    for cells in summary_rows(out).values():
        assert [cells[1], cells[2], cells[4]] == ["absent"] * 3
        assert cells[3] != "absent"


def test_levels(capsys):
    out = run_bench(capsys, "--levels", "--cases", "add bf16")
    assert "minifloat ms at each kernel level" in out
    for level in minifloat._core.kernel_levels():
        assert f"[{level}]" in out


def test_markdown_and_write_docs(tmp_path, capsys):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\nprose\n\n{report.DOCS_BEGIN}\nold table\n{report.DOCS_END}\n"
                   "\nafter\n")
    out = run_bench(capsys, "--cases", "sum bf16", "--markdown", "--write-docs", str(doc))
    assert "| case | minifloat ms |" in out
    text = doc.read_text()
    assert "prose" in text and "after" in text and "old table" not in text
    # the older unkeyed block became this kind of CPU's block
    begin, end = report._markers(report.machine_kind())
    assert report.DOCS_BEGIN not in text
    assert text.count(begin) == 1 and text.count(end) == 1 and "| sum bf16 |" in text
    assert "machine:" in text and "numpy" in text


def test_write_docs_keeps_one_table_per_kind_of_cpu(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nprose\n")
    report.write_docs(doc, "table A1", "avx2")
    report.write_docs(doc, "table B", "avx512bf16")
    report.write_docs(doc, "table A2", "avx2")
    text = doc.read_text()
    assert "table A1" not in text and "table A2" in text and "table B" in text
    assert text.index("table A2") < text.index("table B")       # replaced where it was
    assert text.count("### Latest run on") == 2
    assert "AVX2 and without AVX-512" in text and "AVX-512 BF16" in text
    assert not list(tmp_path.glob("*.tmp"))


def test_feature_detection(monkeypatch, capsys):
    monkeypatch.delattr(minifloat, "from_dlpack", raising=False)
    out = run_bench(capsys, "--cases", "dlpack")
    assert "skipped: dlpack import bf16" in out
    if HAVE_TORCH:                         # a stand-in importer: the case appears and runs
        monkeypatch.setattr(minifloat, "from_dlpack",
                            lambda t: np.from_dlpack(t.float()), raising=False)
        out = run_bench(capsys, "--cases", "dlpack")
        assert "dlpack import bf16" in summary_rows(out)
        # torch makes the tensor: its cells are not "absent" (the legend's "not
        # installed"); another peer's may be, where it is not installed
        lines = out.splitlines()
        head = next(l for l in lines if l.startswith("case "))
        row = next(l for l in lines if l.startswith("dlpack import bf16"))
        cells = dict(zip(re.split(r"\s{2,}", head.strip()), re.split(r"\s{2,}", row.strip())))
        torch_cells = [v for k, v in cells.items() if k.startswith("torch ")]  # 1t, Nt
        assert torch_cells and "absent" not in torch_cells, cells
        assert not [l for l in out.splitlines()
                    if l.split()[:1] == ["torch"] and "not installed" in l]


def test_failures_do_not_stop_the_run(monkeypatch, capsys):
    def broken_setup(env):
        raise RuntimeError("no")

    boom = [harness.Case("boom run", "a run that raises",
                         lambda env: harness.Plan([harness.Run("minifloat", "1/0",
                                                               lambda: 1 / 0)])),
            harness.Case("boom setup", "a setup that raises", broken_setup)]
    monkeypatch.setattr(cases, "CASES", boom)
    out = run_bench(capsys)
    # once, or twice with the row of minifloat at one thread
    assert out.count("fails: ZeroDivisionError") == 1 + (minifloat.get_num_threads() > 1)
    assert "fails: RuntimeError" in out


def _python(args, cwd, flags=(), keep_path=True):
    """A child Python; PYTHONPATH keeps only entries outside the checkout (a
    package installed with --target and PYTHONPATH, as on a lent GPU machine),
    none at all with keep_path=False."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    root = os.path.realpath(ROOT)
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and keep_path and not os.path.realpath(p).startswith(root)]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    return subprocess.run([sys.executable, *flags, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli(tmp_path, capsys):
    # from the checkout root (whose minifloat/ is the unbuilt source) and as a script
    for args, cwd in ((["-m", "benchmarks", "--list"], ROOT),
                      ([os.path.join(BENCHMARKS, "run.py"), "--list"], tmp_path)):
        out = _python(args, cwd)
        assert out.returncode == 0, out.stderr
        assert "matmul bf16 large" in out.stdout
    assert run.main(["--cases", "no such case"]) == 2


def test_times_the_installed_package():
    """From the checkout root the benchmarks import the installed minifloat, not the
    source folder there; without one they say so (not Python's circular-import message)."""
    out = _python(["-c", "import benchmarks, minifloat; print(minifloat.__file__)"], ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == minifloat.__file__
    out = _python(["-m", "benchmarks", "--list"], ROOT, flags=["-S"],   # no site-packages
                  keep_path=False)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "the benchmarks time the installed minifloat" in last and "pip install" in last
    assert "circular import" not in out.stderr


@pytest.mark.parametrize("argv", [["--size", "abc"], ["--formats", "nope"], ["--bogus-option"]])
def test_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        run.main(argv)
    assert e.value.code not in (0, None)


def test_the_cli_has_no_bench_subcommand(capsys):
    from minifloat import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--list"])
    assert e.value.code == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_dlpack_import_cost_runs():
    res = benchmarks("dlpack_import").import_cost(number=50, repeat=1, large=1 << 10)
    assert res["mf.from_dlpack(ndarray f32)"] > 0


def test_max_call_estimates(capsys):
    out = run_bench(capsys, "--cases", "dot,matmul", "--max-call", "1e-9")
    rows = summary_rows(out)
    assert rows["matmul bf16 large 64^3"][0].startswith("~")        # estimated, not run
    assert "not run: est. at" in out and "~: not run" in out


def test_summary_columns_fit_the_width():
    """Cells that happen to be wide (e.g. 0.046x under u16) must not push the
    summary table past WIDTH: the columns close up to one space."""
    head = ["case", "minifloat ms", "ml_dtypes", "torch 1t", "torch 2t", "np f32", "numkong",
            "u16", "mf 1t"]
    rows = [["cast f32->e4m3fn astype", "0.313", "n/a", "2.91x", "2.80x", "n/a", "absent",
             "0.046x", "0.021x"]]
    lines = report._fmt_cols(head, rows, "<" + ">" * 8)
    widths = [max(len(h), len(c)) for h, c in zip(head, rows[0])]
    assert sum(widths) + 2 * 8 > report.WIDTH                        # two spaces would not fit
    assert all(len(line) <= report.WIDTH for line in lines)
    assert lines[2].split() == rows[0][:1][0].split() + rows[0][1:]
    narrow = report._fmt_cols(head[:3], [r[:3] for r in rows], "<>>")
    assert "  " in narrow[2].split("cast f32->e4m3fn astype")[1]     # room: two spaces
