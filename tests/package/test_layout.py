"""docs/design.md's Layout table names every folder of the repository: each
top-level folder and each folder of the C sources has its own row, and every
row names a path that exists, so the table cannot drift from the tree."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("git is not available")
    if out.returncode != 0 or not out.stdout.strip():
        pytest.skip("the tests are not in a git checkout of minifloat")
    return out.stdout.splitlines()


def layout_rows():
    with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            rows.update(re.findall(r"`([^`]+)`", first))
    return rows


def folders_that_need_a_row(files):
    need = set()
    for f in files:
        parts = f.split("/")[:-1]
        if not parts:
            continue
        need.add(parts[0] + "/")                      # every top-level folder
        if parts[0] == "src":                         # every folder of the C sources
            for i in range(2, len(parts) + 1):
                need.add("/".join(parts[:i]) + "/")
        if parts[0] == "minifloat" and len(parts) > 1:  # the package's subpackages
            need.add("/".join(parts[:2]) + "/")
    return need


def test_every_folder_has_its_row():
    files = tracked_files()
    rows = layout_rows()
    missing = sorted(d for d in folders_that_need_a_row(files) if d not in rows)
    assert missing == [], f"add a row to docs/design.md's Layout table for {missing}"


def test_every_row_names_a_path_that_exists():
    rows = layout_rows()
    assert "src/core/" in rows and "minifloat/" in rows
    gone = sorted(r for r in rows if not os.path.exists(os.path.join(ROOT, r.rstrip("/"))))
    assert gone == [], f"docs/design.md's Layout table names paths that do not exist: {gone}"


def test_no_two_source_files_of_one_folder_family_share_a_concept_name():
    # a name means one thing: outside the kernels' <family>/<isa>.c layout no
    # two C files share a file name (src/blocks.c beside src/kernels/blocks.c
    # was such a pair)
    files = [f for f in tracked_files() if f.startswith("src/") and f.endswith((".c", ".h"))]
    by_name = {}
    for f in files:
        if re.fullmatch(r"src/kernels/[a-z]+/[a-z0-9_]+\.[ch]", f):
            continue
        by_name.setdefault(os.path.basename(f), []).append(f)
    assert {n: p for n, p in by_name.items() if len(p) > 1} == {}
