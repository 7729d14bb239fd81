"""Run the playbook's notebooks headlessly through papermill: `python -m playbook_utils.run_notebooks`.

    python -m playbook_utils.run_notebooks --mode smoke --output playbook-output/smoke
    python -m playbook_utils.run_notebooks --mode full --pattern '0*' --device cuda

Each notebook gets its `parameters` cell overridden (SMOKE, DEVICE, VIDEO_DIR, OUTPUT_DIR),
is executed into the output folder, and its `<stem>.json` is read back for the summary.
One failing notebook does not stop the rest; the exit status is 1 when any failed.
`make playbook`, the tests and nightly validation all call this.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
import traceback
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"


def notebook_requirements(path) -> list[str]:
    """What a notebook declares it needs (metadata 'playbook' -> 'requires'), e.g. ['cuda', 'nvdec']."""
    meta = json.loads(Path(path).read_text()).get("metadata", {})
    return list(meta.get("playbook", {}).get("requires", []))


def matches(name: str, patterns: list[str] | None) -> bool:
    """True when notebook file `name` fits any glob or substring in `patterns` (always when None).

    Used by `select` and by nightly validation, which filters the baseline the same way.
    """
    if not patterns:
        return True
    stem = Path(name).stem
    return any(fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(stem, pat) or pat in stem for pat in patterns)


def select(notebook_dir, patterns: list[str] | None) -> list[Path]:
    """Notebooks in `notebook_dir` whose file name matches any glob in `patterns` (all when None)."""
    found = sorted(Path(notebook_dir).glob("[0-9][0-9]_*.ipynb"))
    return [p for p in found if matches(p.name, patterns)]


def run_one(path: Path, output: Path, mode: str, device: str, video_dir: str | None,
            timeout: float | None, capabilities: dict) -> dict:
    """Execute one notebook; return its summary row (never raises for a notebook failure)."""
    import papermill as pm

    requires = notebook_requirements(path)
    missing = [r for r in requires if not capabilities.get(r, False)]
    params = {"SMOKE": mode == "smoke", "DEVICE": device, "VIDEO_DIR": video_dir, "OUTPUT_DIR": str(output)}
    row = {"notebook": path.name, "requires": requires, "missing": missing, "status": "passed",
           "error": None, "seconds": None, "headline": {}, "skipped": []}
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(path), str(output / path.name), parameters=params, kernel_name="python3",
                            execution_timeout=timeout, progress_bar=False, cwd=str(output))
    except Exception as e:  # papermill wraps the notebook's own error; record it and go on
        row["status"] = "failed"
        ename, evalue = getattr(e, "ename", type(e).__name__), getattr(e, "evalue", str(e))
        row["error"] = f"{ename}: {str(evalue).strip().splitlines()[0] if str(evalue).strip() else ''}"[:500]
        if not hasattr(e, "ename"):
            row["traceback"] = traceback.format_exc(limit=5)
    row["seconds"] = round(time.perf_counter() - start, 1)
    result = output / f"{path.stem}.json"
    if result.exists():
        data = json.loads(result.read_text())
        row["headline"] = data.get("headline", {})
        row["skipped"] = data.get("skipped", [])
    elif row["status"] == "passed":
        row["status"] = "failed"
        row["error"] = f"the notebook finished without writing {result.name}"
    return row


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def write_summary(rows: list[dict], output: Path, mode: str, machine: dict) -> Path:
    """Write summary.md and summary.json into `output`; return the markdown path."""
    from playbook_utils.results import reference_numbers

    doc = {"mode": mode, "machine": machine, **reference_numbers(output), "notebooks": rows}
    (output / "summary.json").write_text(json.dumps(doc, indent=1))
    lines = [f"# Playbook run ({mode} mode)", "",
             f"Machine: {machine.get('gpu', 'no GPU')}; {machine.get('cpu')}; {machine.get('date_utc')} UTC", "",
             "| notebook | status | seconds | headline | skipped here |", "|---|---|---|---|---|"]
    elsewhere = [r for r in rows if r.get("machine") and r["machine"] != machine]
    if elsewhere:   # rows merged from an earlier run on another machine keep that machine's stamp
        lines[3:3] = [f"{r['notebook']} ran on: {r['machine'].get('gpu', 'no GPU')}; {r['machine'].get('cpu')}; "
                      f"{r['machine'].get('date_utc')} UTC  " for r in elsewhere]
    for r in rows:
        head = "<br>".join(f"{k}: {_fmt(v)}" for k, v in r["headline"].items()) or "-"
        skipped = "<br>".join(r["skipped"]) or "-"
        status = r["status"] if r["status"] == "passed" else f"**{r['status']}**: {r['error']}"
        lines.append(f"| {r['notebook']} | {status} | {r['seconds']} | {head} | {skipped} |")
    failed = [r["notebook"] for r in rows if r["status"] != "passed"]
    lines += ["", f"{len(rows) - len(failed)} passed, {len(failed)} failed"]
    path = output / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["smoke", "full"], default="smoke")
    ap.add_argument("--pattern", action="append", help="glob or substring of notebook names; repeatable")
    ap.add_argument("--output", default=None, help="folder for executed notebooks, JSON and summary")
    ap.add_argument("--notebooks", default=str(NOTEBOOK_DIR), help="folder holding the notebooks")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--video-dir", default=None, help="your own videos instead of the generated media")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per cell (default: none)")
    args = ap.parse_args(argv)

    from playbook_utils import env

    output = Path(args.output or f"playbook-output/{args.mode}").resolve()
    output.mkdir(parents=True, exist_ok=True)
    notebooks = select(args.notebooks, args.pattern)
    if not notebooks:
        print(f"no notebooks match {args.pattern} in {args.notebooks}", file=sys.stderr)
        return 2
    rep = env.report(probe_libraries=False)
    caps = env.capabilities(rep)
    gpu = rep["gpu"]["devices"][0]["name"] if rep["gpu"]["available"] else "no GPU"
    machine = {"gpu": gpu, "cpu": f"{rep['cpu_model']} x{rep['cpu_usable_cores']}", "date_utc": rep["date_utc"],
               "capabilities": caps}
    print(f"running {len(notebooks)} notebook(s) in {args.mode} mode on {gpu}; output: {output}", flush=True)
    rows = []
    for nb in notebooks:
        row = run_one(nb, output, args.mode, args.device, args.video_dir, args.timeout, caps)
        note = f" (needs {', '.join(row['missing'])}: not here, those parts skipped)" if row["missing"] else ""
        print(f"  {row['status']:6s} {nb.name} in {row['seconds']} s{note}"
              + (f"\n         {row['error']}" if row["error"] else ""), flush=True)
        rows.append({**row, "machine": machine})   # a row keeps its machine when merged with other runs' rows
    summary = write_summary(rows, output, args.mode, machine)
    print(f"summary: {summary}")
    return 1 if any(r["status"] != "passed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
