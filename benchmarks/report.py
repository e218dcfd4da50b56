"""The benchmark's output: the text tables, the Markdown tables, and their place
in docs/benchmarks.md (one table per kind of CPU)."""
from __future__ import annotations

import math
import os
import platform
import textwrap
from pathlib import Path

import minifloat as mf
from minifloat import _core

from .harness import cpu_model, join_notes, n_text

WIDTH = 100                       # the text output fits this many columns
# the checkout's docs/benchmarks.md (this folder is never installed)
DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
DOCS_BEGIN = "<!-- minifloat bench: begin generated -->"
DOCS_END = "<!-- minifloat bench: end generated -->"


def _ms(s, estimated=False):
    if s is None:
        return "-"
    if estimated:
        return "~" + _ms(s)
    ms = s * 1e3
    for limit, fmt in ((100, "{:.0f}"), (10, "{:.1f}"), (1, "{:.2f}"), (0.01, "{:.3f}")):
        if ms >= limit:
            return fmt.format(ms)
    return f"{ms:.2g}"


def _ratio(r):
    if r is None or not math.isfinite(r):
        return "-"
    for limit, fmt in ((100, "{:.0f}x"), (10, "{:.1f}x"), (0.1, "{:.2f}x"), (0.001, "{:.3f}x")):
        if r >= limit:
            return fmt.format(r)
    return f"{r:.0e}x"


def _base(rows, case):
    """minifloat's row of a case (its first row at the default level)."""
    for r in rows:
        if r.case is case and r.column == "minifloat":
            return r
    return None


def _speedup(row, base):
    if row.seconds is None or base is None or base.seconds is None:
        return None
    return row.seconds / base.seconds


def _speedup_cell(row, base):
    """The speed-up as printed: "~" when a time in it is an estimate."""
    text = _ratio(_speedup(row, base))
    return "~" + text if text != "-" and (row.estimated or base.estimated) else text


def cases_of(rows):
    seen = []
    for r in rows:
        if r.case not in seen:
            seen.append(r.case)
    return seen


def _detail_note(row):
    bits = []
    if row.value is not None:
        bits.append(f"= {row.value:.6g}")
    elif row.err is not None:
        bits.append(f"err {row.err:.1g}")
    if row.wrong:
        bits.append("WRONG")
    if row.calls == 1:
        bits.append("1 call")
    return join_notes(*bits, row.rate, row.note)


def _summary_columns(rep):
    cols = ["ml_dtypes", "torch 1t"]
    if rep.opts.torch_threads > 1:
        cols.append("torch Nt")
    cols += ["numpy", "numkong"]
    # the columns only some cases have, last (uint16: the memory limit of add and
    # multiply; minifloat on one thread: what its threads bring)
    return cols + [c for c in ("numpy u16", "minifloat 1t") if any(r.column == c
                                                                    for r in rep.rows)]


def _col_title(rep, col):
    return {"torch Nt": f"torch {rep.opts.torch_threads}t", "numpy": "np f32",
            "minifloat 1t": "mf 1t", "numpy u16": "u16"}.get(col, col)


def _summary_cell(rep, case, col):
    rows = [r for r in rep.rows if r.case is case and r.column == col]
    if not rows:
        return "-"
    r = rows[0]                                   # the first listed way is the canonical one
    if r.seconds is None:
        return "n/a" if "not installed" not in r.note else "absent"
    return _speedup_cell(r, _base(rep.rows, case)) + ("!" if r.wrong else "")


def _title(rep, case):
    size = case.size(rep.env)
    return f"{case.title}" + (f" ({size})" if size else "")



def header_lines(rep):
    """The run's context, one fact a line (wrapped to WIDTH in the text output)."""
    o, env = rep.opts, rep.env
    cpu, ncpu = cpu_model(), os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = ncpu
    vers = dict(env.versions())
    lines = [
        f"minifloat benchmarks, {rep.started}: N = {n_text(o.n)}, dot n = {n_text(env.n_dot)}, "
        f"matmul {o.mm_sizes[0]}^3 and {o.mm_sizes[1]}^3; min of up to {o.repeat} repeats",
        f"machine: {cpu}, {ncpu} logical CPUs ({usable} usable), {platform.system()} "
        f"{platform.release().split('-')[0]}, Python {platform.python_version()}",
        f"load average at start/end: {' / '.join(f'{x:.2f}' for x in rep.load) or '?'}"
        " (other work on the machine adds noise)",
        f"minifloat {vers['minifloat']} kernel level {_core.get_kernel_level()} (of "
        f"{', '.join(_core.kernel_levels())}), sum and dot prefetching "
        f"{getattr(_core, 'get_read_prefetch', lambda: 0)()} bytes ahead; numpy {vers['numpy']}",
        f"ml_dtypes {vers['ml_dtypes']}, torch {vers['torch']}, numkong {vers['numkong']}",
        f"threads: minifloat rows at its {mf.get_num_threads()} (minifloat.get_num_threads(); "
        f"mf 1t: at 1); torch rows at 1 and {o.torch_threads} threads (GOMP_SPINCOUNT="
        f"{os.environ.get('GOMP_SPINCOUNT', 'unset')}: its OpenMP threads stop spinning soon "
        "after a call); numpy f32 matmul uses "
        "its BLAS's default threads (OPENBLAS_THREAD_TIMEOUT="
        f"{os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset')}: they stop spinning soon after "
        "a call); numkong calls run on one",
        "cores busy (CPU time / wall time over the timed calls): " + _cores_busy(rep),
    ]
    return lines


def _cores_busy(rep):
    out = []
    for col in ["minifloat"] + _summary_columns(rep):
        v = [r.cpu * r.seconds for r in rep.rows if r.column == col and math.isfinite(r.cpu)]
        w = [r.seconds for r in rep.rows if r.column == col and math.isfinite(r.cpu)]
        if w:
            out.append(f"{_col_title(rep, col)} {sum(v) / sum(w):.1f}")
    return ", ".join(out) or "?"



def _detail_table(rep):
    """The detailed table: (title, None) per case, then (row, cells) per library and way."""
    out = []
    for case in cases_of(rep.rows):
        base = _base(rep.rows, case)
        out.append((_title(rep, case), None))
        first = True
        for r in (r for r in rep.rows if r.case is case):
            is_base = first and r.column == "minifloat"
            first = False
            out.append((r, (r.who, r.how, _ms(r.seconds, r.estimated),
                            "" if is_base else _speedup_cell(r, base), _detail_note(r))))
    return out


def _level_table(rep):
    levels = _core.kernel_levels()
    rows = []
    for case in cases_of(rep.rows):
        t = {r.level: r for r in rep.rows if r.case is case and r.level}
        rows.append([case.label(rep.env)] + [_ms(t[lv].seconds, t[lv].estimated) if lv in t
                                             else "-" for lv in levels])
    return ["case"] + list(levels), rows


def _summary_table(rep):
    cols = _summary_columns(rep)
    head = ["case", "minifloat ms"] + [_col_title(rep, c) for c in cols]
    rows = []
    for case in cases_of(rep.rows):
        base = _base(rep.rows, case)
        rows.append([case.label(rep.env), _ms(base.seconds, base.estimated) if base else "-"] +
                    [_summary_cell(rep, case, c) for c in cols])
    return head, rows


def _result_lines(rep):
    """The scalar results next to each other, for the cases that show them."""
    out = []
    for case, exact in rep.exact.items():
        firsts = {}                           # the first row of each library
        for r in rep.rows:
            if r.case is case and r.column and r.column != "torch Nt":
                firsts.setdefault(r.column, r)
        got = [f"{r.who} {r.value:.6g}" + (" (WRONG)" if r.wrong else "")
               for r in firsts.values() if r.value is not None]
        out.append(f"{case.name} results: exact {exact:.6g}; " + ", ".join(got))
    return out


LEGEND = [
    "speed-up = that library's time / minifloat's time in this run (above 1: minifloat faster).",
    "n/a: the library cannot do it; absent: not installed; !: wrong result (see details).",
    "For casts the np f32 column is a plain float32 copy (memcpy), the physical reference.",
    "u16: NumPy's uint16 add (add, multiply) or .sum() (ckpt inspect) of the same bytes: memory speed.",
    "mf 1t: minifloat on one thread (minifloat.set_num_threads(1)).",
]
ESTIMATE_LEGEND = "~: not run, estimated from the library's best GF/s in this run (--max-call)."
LEVELS_LEGEND = "Kernel-level rows: speed-up = that level's time / the default level's time."


def _legend(rep):
    return (LEGEND + [ESTIMATE_LEGEND] * any(r.estimated for r in rep.rows)
            + [LEVELS_LEGEND] * bool(rep.opts.levels))


def _fmt_cols(head, rows, align):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    # two spaces between columns, one where that would pass WIDTH (wide cells)
    sep = "  " if sum(widths) + 2 * (len(widths) - 1) <= WIDTH else " "

    def line(vals):
        return sep.join(str(v).ljust(w) if a == "<" else str(v).rjust(w)
                         for v, w, a in zip(vals, widths, align)).rstrip()
    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]


def render_text(rep):
    out = [w for line in header_lines(rep)
           for w in textwrap.wrap(line, WIDTH, subsequent_indent="    ")] + [""]
    head, rows = _summary_table(rep)
    out.append("minifloat speed-up vs each library (one run)")
    out += _fmt_cols(head, rows, "<" + ">" * (len(head) - 1))
    out += _legend(rep)
    out += [w for line in _result_lines(rep)
            for w in textwrap.wrap(line, WIDTH, subsequent_indent="    ")] + [""]
    if rep.opts.levels:
        head, rows = _level_table(rep)
        out.append("minifloat ms at each kernel level")
        out += _fmt_cols(head, rows, "<" + ">" * (len(head) - 1)) + [""]
    out.append("details: who, what is timed, ms (min), speed-up of minifloat, result / notes")
    for row, vals in _detail_table(rep):
        if vals is None:
            out.append(row[:WIDTH])
            continue
        who, how, ms, ratio, note = vals
        line = f"  {who:<14.14} {how:<32.32} {ms:>8} {ratio:>7}  {note}"
        out.append(line if len(line) <= WIDTH else line[:WIDTH - 1] + "~")
    for case, why in rep.skipped:
        out.append(f"skipped: {case.name} ({why})")
    return "\n".join(out)


def _md_table(head, rows):
    esc = [[str(x).replace("|", "\\|") for x in r] for r in [head] + rows]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in esc[1:]]


def render_markdown(rep):
    out = [f"- {line}" for line in header_lines(rep)] + [""]
    head, rows = _summary_table(rep)
    out += _md_table(head, rows) + [""]
    out += [f"{line}  " for line in _legend(rep) + _result_lines(rep)] + [""]
    if rep.opts.levels:
        out += ["minifloat ms at each kernel level:", ""]
        out += _md_table(*_level_table(rep)) + [""]
    drows, last = [], None
    for row, vals in _detail_table(rep):
        if vals is None:
            continue
        label = row.case.label(rep.env)
        who = f"minifloat {vals[0].strip()}" if row.level else vals[0]
        drows.append([label if label != last else "", who] + list(vals[1:]))
        last = label
    out += ["<details><summary>Details: every way each library was timed, with results</summary>",
            ""]
    out += _md_table(["case", "who", "what is timed", "ms", "speed-up", "result / notes"], drows)
    out += ["", "</details>"]
    for case, why in rep.skipped:
        out.append(f"\nskipped: {case.name} ({why})")
    return "\n".join(out)


# The kinds of CPU docs/benchmarks.md keeps a table for, by best kernel level
MACHINE_KINDS = {
    "serial": "a CPU without a SIMD level",
    "avx2": "x86 with AVX2 and without AVX-512 (e.g. AMD Zen 3)",
    "avx512": "x86 with AVX-512 and without AVX-512 BF16",
    "avx512bf16": "x86 with AVX-512 BF16 (e.g. AMD Zen 4, Intel Sapphire Rapids)",
    "avx512bf16-zen5": "AMD Zen 5 (AVX-512 BF16 on 512-bit data paths)",
}


def machine_kind():
    """The best kernel level this CPU and build run: the key of its table in the docs.
    A Zen 5 keeps a table of its own beside the Zen 4's: the same level, twice the
    vector width per cycle."""
    level = _core.kernel_levels()[-1]
    if level == "avx512bf16" and "Zen 5" in cpu_model():
        return "avx512bf16-zen5"
    return level


def _markers(key):
    return (f"<!-- minifloat bench: begin generated, {key} -->",
            f"<!-- minifloat bench: end generated, {key} -->")


def write_docs(path, markdown, key=None):
    """Put a run's Markdown into the docs, between the markers of its kind of CPU
    (`key`, see MACHINE_KINDS) so that each kind keeps its own table; a file with
    only the older unkeyed markers has that block replaced; a kind not there yet
    gets a section of its own at the end.  Written atomically."""
    path = Path(path)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    begin, end = _markers(key) if key else (DOCS_BEGIN, DOCS_END)
    if begin not in text and DOCS_BEGIN in text and DOCS_END in text:
        pre, rest = text.split(DOCS_BEGIN, 1)
        text = pre + begin + rest.split(DOCS_END, 1)[0] + end + rest.split(DOCS_END, 1)[1]
    block = f"{begin}\n{markdown}\n{end}"
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        post = rest.split(end, 1)[1]
        text = pre + block + post
    else:
        title = MACHINE_KINDS.get(key, f"kernel level {key}") if key else "this machine"
        text = text.rstrip("\n") + f"\n\n### Latest run on {title}\n\n" + block + "\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)

