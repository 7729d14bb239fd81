"""How long the notebooks are to read: `python -m playbook_utils.tools.notebook_stats [notebooks/*.ipynb]`.

Prints one row per notebook (code cells and lines, longest cell, markdown words, definitions), the totals, names
defined in more than one notebook, and whether the set keeps within the reading limits below.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

# What a newcomer can read in one sitting, for the whole notebooks/ folder together.
LIMITS = {
    "code_lines": 2200,
    "cells_over_30": 0,
    "cells_over_25": 5,
    "markdown_words": 9000,
    "names_in_several_notebooks": 0,
}


@dataclass
class NotebookStats:
    """The counts of one notebook (see the module docstring for the rules)."""

    name: str
    code_cells: int = 0
    code_lines: int = 0
    longest_cell: int = 0
    cells_over_25: int = 0
    cells_over_30: int = 0
    markdown_words: int = 0
    definitions: set[str] = field(default_factory=set)
    parse_errors: list[str] = field(default_factory=list)


def _source(cell) -> str:
    return "".join(cell.get("source", ""))


def definitions(code: str) -> set[str]:
    """Names of the functions and classes `code` defines (def, async def, class, name = lambda)."""
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    tree = ast.parse("\n".join(lines))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def notebook_stats(path) -> NotebookStats:
    """Count one .ipynb file; returns a `NotebookStats`."""
    path = Path(path)
    nb = json.loads(path.read_text())
    stats = NotebookStats(path.name)
    for k, cell in enumerate(nb.get("cells", [])):
        src = _source(cell)
        if cell.get("cell_type") == "markdown":
            stats.markdown_words += len(src.split())
        elif cell.get("cell_type") == "code":
            n = sum(1 for line in src.splitlines() if line.strip())
            stats.code_cells += 1
            stats.code_lines += n
            stats.longest_cell = max(stats.longest_cell, n)
            stats.cells_over_25 += n > 25
            stats.cells_over_30 += n > 30
            try:
                stats.definitions |= definitions(src)
            except SyntaxError as e:
                stats.parse_errors.append(f"cell {k}: {e.msg} (line {e.lineno})")
    return stats


WARNING_LINE = re.compile(r"Warning|WARN|\[W ")
_SHOWS_FIGURE = re.compile(r"savefig\(|\b(nb|kit)\.show\(")


def output_problems(path) -> list[str]:
    """What an executed notebook shows that a reader should not see, one line per problem: a traceback, raw stderr,
    a warning line, or a figure saved or shown without an inline image or a SKIPPED line. Used by the notebook tests."""
    nb = json.loads(Path(path).read_text())
    problems = []
    for k, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        outputs = cell.get("outputs", [])
        text = "".join(
            "".join(o.get("text", ""))
            for o in outputs
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        for o in outputs:
            if o.get("output_type") == "error":
                problems.append(f"cell {k}: traceback: {o.get('ename')}: {str(o.get('evalue'))[:120]}")
            elif o.get("output_type") == "stream" and o.get("name") == "stderr":
                problems.append(f"cell {k}: stderr: {''.join(o.get('text', '')).strip()[:120]}")
        problems += [
            f"cell {k}: warning line: {line.strip()[:120]}" for line in text.splitlines() if WARNING_LINE.search(line)
        ]
        images = sum("image/png" in o.get("data", {}) for o in outputs)
        if _SHOWS_FIGURE.search(_source(cell)) and not images and "SKIPPED" not in text:
            problems.append(f"cell {k}: makes a figure but shows no inline image")
    return problems


def shared_names(all_stats: list[NotebookStats]) -> dict[str, list[str]]:
    """{name: [notebooks]} for every function or class name defined in more than one notebook."""
    where: dict[str, list[str]] = {}
    for s in all_stats:
        for name in s.definitions:
            where.setdefault(name, []).append(s.name)
    return {name: sorted(nbs) for name, nbs in sorted(where.items()) if len(nbs) > 1}


def totals(all_stats: list[NotebookStats]) -> dict:
    """The whole set's figures, keyed as `LIMITS` is."""
    summed = ("code_lines", "cells_over_30", "cells_over_25", "markdown_words")
    sums = {k: sum(getattr(s, k) for s in all_stats) for k in summed}
    return {**sums, "names_in_several_notebooks": len(shared_names(all_stats))}


def format_table(all_stats: list[NotebookStats]) -> str:
    """The per-notebook table, the totals, the shared names and each limit with its verdict."""
    head = (
        f"{'notebook':42s} {'cells':>5s} {'code lines':>10s} {'longest':>7s} {'>25':>4s} {'>30':>4s} "
        f"{'md words':>8s} {'defs':>4s}"
    )
    rows = [head, "-" * len(head)]
    for s in all_stats:
        rows.append(
            f"{s.name:42s} {s.code_cells:5d} {s.code_lines:10d} {s.longest_cell:7d} {s.cells_over_25:4d} "
            f"{s.cells_over_30:4d} {s.markdown_words:8d} {len(s.definitions):4d}"
        )
    t = totals(all_stats)
    rows += [
        "-" * len(head),
        f"{'all ' + str(len(all_stats)) + ' notebooks':42s} {sum(s.code_cells for s in all_stats):5d} "
        f"{t['code_lines']:10d} {max((s.longest_cell for s in all_stats), default=0):7d} "
        f"{t['cells_over_25']:4d} {t['cells_over_30']:4d} {t['markdown_words']:8d} "
        f"{sum(len(s.definitions) for s in all_stats):4d}",
    ]
    shared = ", ".join(f"{n} ({', '.join(nbs)})" for n, nbs in shared_names(all_stats).items()) or "none"
    rows += ["", f"defined in more than one notebook: {shared}"]
    rows += [f"not parsed, definitions not counted: {s.name} {err}" for s in all_stats for err in s.parse_errors]
    rows.append("")
    for key, limit in LIMITS.items():
        rows.append(f"{key:28s} {t[key]:7d}  limit {limit:6d}  {'ok' if t[key] <= limit else 'OVER'}")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="notebooks or folders of them (default: notebooks/)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any limit is exceeded")
    args = parser.parse_args(argv)
    given = [Path(p) for p in args.paths] or [Path(__file__).resolve().parents[2] / "notebooks"]
    paths = [q for p in given for q in (sorted(p.glob("[0-9][0-9]_*.ipynb")) if p.is_dir() else [p])]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        parser.error(
            f"no such notebook: {', '.join(missing)}" if missing else f"no notebook in {', '.join(args.paths)}"
        )
    all_stats = [notebook_stats(p) for p in paths]
    print(format_table(all_stats))
    over = [k for k, v in totals(all_stats).items() if v > LIMITS[k]]
    return 1 if args.strict and over else 0


if __name__ == "__main__":
    sys.exit(main())
