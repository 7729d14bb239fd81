"""Whether a folder of executed notebooks (default: the newest GPU reference) is a reference of today's code.

`python -m playbook_utils.tools.reference_audit [FOLDER] [--pattern GLOB]` prints one line per notebook; exit 0
when every one is current (passed, today's code cells and media, no problem shown), 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tokenize
from pathlib import Path

from playbook_utils.bench import media
from playbook_utils.tools import notebook_stats
from playbook_utils.tools.results import newest_gpu_reference

ROOT = Path(__file__).resolve().parents[2]


def code_cells(path) -> list[str]:
    """The code cells' sources of the notebook at `path`, without the cell papermill injects its parameters into."""
    nb = json.loads(Path(path).read_text())
    return [
        "".join(c.get("source", ""))
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code" and "injected-parameters" not in c.get("metadata", {}).get("tags", [])
    ]


def program(source: str):
    """What a code cell runs and says: its syntax tree and its comments, so that a cell only re-wrapped (a long line
    split, two lines joined) is the same program; the text itself where it is not plain Python (a magic, `!cmd`)."""
    try:
        comments = [
            t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT
        ]
        return ast.dump(ast.parse(source)), comments
    except (SyntaxError, tokenize.TokenError, ValueError):
        return source


def changed_since(commit: str | None, paths, root=ROOT) -> int | None:
    """How many of `paths` (files or folders, relative to `root`) differ between `commit` and the working tree;
    None where there is no commit or git cannot tell (a checkout without that commit, no git)."""
    if not commit:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "diff", "--name-only", commit, "--", *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return len(out.stdout.split()) if out.returncode == 0 else None


def audit(folder, notebooks_dir=None, root=ROOT, pattern: str = "[0-9]*") -> list[dict]:
    """A row per notebook of `notebooks_dir` (default root/notebooks) matching `pattern`: {'notebook', 'status',
    'seconds', 'date', 'commit', 'copy', 'same_code' (each cell the same `program`), 'same_text', 'changed_since',
    'media_version', 'problems', 'current'}."""
    folder = Path(folder)
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else Path(root) / "notebooks"
    try:
        rows = {r["notebook"]: r for r in json.loads((folder / "summary.json").read_text())["notebooks"]}
    except (OSError, ValueError, KeyError):
        rows = {}
    out = []
    for nb in sorted(notebooks_dir.glob(f"{pattern}.ipynb")):
        row, copy = rows.get(nb.name, {}), folder / nb.name
        ran, today = (code_cells(copy), code_cells(nb)) if copy.exists() else (None, [])
        machine = row.get("machine") or {}
        commit = machine.get("commit")
        a = {
            "notebook": nb.name,
            "status": row.get("status", "no row"),
            "seconds": row.get("seconds"),
            "date": machine.get("date_utc"),
            "commit": commit,
            "copy": copy.exists(),
            "same_code": ran is not None and [*map(program, ran)] == [*map(program, today)],
            "same_text": ran == today,
            "changed_since": changed_since(commit, ["playbook_utils", nb.relative_to(root)], root),
            "media_version": machine.get("media_version"),
            "problems": notebook_stats.output_problems(copy) if copy.exists() else [],
        }
        same_media = a["media_version"] == media.MEDIA_VERSION
        a["current"] = a["status"] == "passed" and bool(commit) and a["same_code"] and same_media and not a["problems"]
        out.append(a)
    return out


def grouped(problems: list[str]) -> list[str]:
    """`output_problems`' lines with those of one cell and kind counted in one line ('cell 24: 60 warning lines, the
    first: ...'), so that one decoder warning printed 60 times reads as one line."""
    kinds: dict = {}
    for p in problems:
        cell, _, rest = p.partition(": ")
        kind, _, text = rest.partition(": ")
        kinds.setdefault((cell, kind), []).append(text)
    return [
        (f"{cell}: {kind}" + (f": {texts[0]}" if texts[0] else ""))
        if len(texts) == 1
        else f"{cell}: {len(texts)} {kind}s, the first: {texts[0]}"
        for (cell, kind), texts in kinds.items()
    ]


def format_rows(rows: list[dict]) -> str:
    """The audit as lines: one per notebook, then its problems indented, then a count."""
    lines = []
    for a in rows:
        since = {None: "unknown", 0: "none"}.get(a["changed_since"], str(a["changed_since"]))
        code = ["no executed copy", "code differs", "code as today, re-wrapped", "code as today"][
            a["copy"] + a["same_code"] + a["same_text"]
        ]
        lines.append(
            f"{'current ' if a['current'] else 'STALE   '} {a['notebook']:40s} {a['status']:8s} "
            f"{a['seconds'] or 0:7.1f} s  {(a['date'] or 'no date')[:16]:16s} "
            f"commit {(a['commit'] or 'none')[:10]:10s} "
            + code
            + f", files changed since: {since}"
            + ("" if a["media_version"] == media.MEDIA_VERSION else f", media {a['media_version'] or 'before 4'}")
        )
        lines += [f"    {p}" for p in grouped(a["problems"])]
    done = sum(a["current"] for a in rows)
    lines.append(
        f"{done} of {len(rows)} notebooks current (passed, stamped with a commit, today's code and media, no problem)"
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=None, help="default: the newest GPU reference")
    parser.add_argument("--pattern", default="[0-9]*", help="the notebooks to audit, a glob: '2[0-2]*' for 20-22")
    args = parser.parse_args(argv)
    rows = audit(args.folder or newest_gpu_reference() or ROOT / "results" / "h200", pattern=args.pattern)
    print(format_rows(rows))
    return 0 if rows and all(a["current"] for a in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
