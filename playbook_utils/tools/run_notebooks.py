"""Run the playbook's notebooks headlessly through papermill (`make playbook`, the tests and nightly call this).

    python -m playbook_utils.tools.run_notebooks --mode smoke|full [--pattern '0*'] [--param KEY=VALUE]

Writes the executed copies, each `<stem>.json` and summary.md/.json into `--output`; exit 1 when any failed.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from playbook_utils import env, handover
from playbook_utils.bench import media
from playbook_utils.bench.harness import PROGRESS_FILE
from playbook_utils.bench.verdicts import percent
from playbook_utils.decoders import base
from playbook_utils.tools import setup_env
from playbook_utils.tools.results import reference_for, reference_numbers

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"


def notebook_parameters(path) -> list[str]:
    """The names the notebook's cell tagged `parameters` assigns, in order (what `--param` may set)."""
    for cell in json.loads(Path(path).read_text()).get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"])
            try:
                body = ast.parse(source).body
            except SyntaxError:  # e.g. an IPython magic: the plain `NAME = ...` lines still count
                return list(dict.fromkeys(re.findall(r"^([A-Za-z_]\w*)\s*=[^=]", source, re.M)))
            assigned = [node for node in body if isinstance(node, (ast.Assign, ast.AnnAssign))]
            targets = [t for n in assigned for t in (n.targets if isinstance(n, ast.Assign) else [n.target])]
            return list(dict.fromkeys(t.id for t in targets if isinstance(t, ast.Name)))
    return []


OWN_PARAMETERS = {"SMOKE": "--mode", "OUTPUT_DIR": "--output"}  # set by the runner's own options only


def parse_params(items: list[str] | None) -> dict:
    """`--param KEY=VALUE` arguments as {KEY: value}: a value that is a Python literal (50, 0.5, True, None,
    [1, 2], "text") becomes that object, anything else stays a string. Raises ValueError naming a malformed
    item or a KEY the runner's own options set."""
    params = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(
                f"--param {item!r}: expected KEY=VALUE with KEY a parameter name, e.g. WORKLOAD=sequential"
            )
        if key in OWN_PARAMETERS:
            raise ValueError(f"--param {key}: set it with {OWN_PARAMETERS[key]}")
        try:
            params[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            params[key] = text
    return {k: caller_path(v) if k.endswith(PATH_SUFFIXES) and isinstance(v, str) else v for k, v in params.items()}


PATH_SUFFIXES = ("_DIR", "_PATH", "_FILE")  # parameters that name a file or a folder


def caller_path(path: str | None) -> str | None:
    """`path` made absolute from the folder the command was typed in (`~` expanded): the notebooks run in the output
    folder, where a relative path (`--video-dir ../videos`, `--param CACHE_DIR=data`) would point elsewhere."""
    return None if path is None else str(Path(path).expanduser().resolve())


def params_per_notebook(notebooks: list[Path], params: dict) -> tuple[dict, list[str]]:
    """({notebook name: the `params` its parameters cell defines}, one line per KEY some notebooks lack).
    Raises ValueError when no notebook in `notebooks` defines a KEY (a misspelt name)."""
    defined = {p.name: set(notebook_parameters(p)) for p in notebooks}
    notes = []
    for key in params:
        have = [p.stem for p in notebooks if key in defined[p.name]]
        lack = [p.stem for p in notebooks if key not in defined[p.name]]
        if not have:
            raise ValueError(f"--param {key}: not a parameter of {', '.join(p.stem for p in notebooks)}")
        if lack:
            where = ", ".join(lack) if len(lack) <= 3 else f"the other {len(lack)} notebooks"
            notes.append(f"--param {key}: a parameter of {', '.join(have)} only; left out of {where}")
    return {p.name: {k: v for k, v in params.items() if k in defined[p.name]} for p in notebooks}, notes


# A path a workshop can read in under two hours: the machine (00), the media (01), TorchCodec and PyNvVideoCodec
# (12, 13), the head-to-head (20), the whole loaders against the NVDEC ceiling (21) and the choice for your files (22).
WORKSHOP = ("00", "01", "12", "13", "20", "21", "22")


def matches(name: str, patterns: list[str] | None) -> bool:
    """True when notebook file `name` fits any glob or substring in `patterns` (always when None); `select` and
    nightly validation (for the baseline too) filter with it."""
    if not patterns:
        return True
    stem = Path(name).stem
    return any(fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(stem, pat) or pat in stem for pat in patterns)


def select(notebook_dir, patterns: list[str] | None) -> list[Path]:
    """Notebooks in `notebook_dir` whose file name matches any glob in `patterns` (all when None)."""
    return [p for p in sorted(Path(notebook_dir).glob("[0-9][0-9]_*.ipynb")) if matches(p.name, patterns)]


def kernel_config(kernel_name: str = "python3", encrypt: bool = True):
    """The kernel manager settings (a traitlets Config) each notebook's kernel starts with: CurveZMQ-encrypted TCP
    sockets where supported (and `encrypt`), else the ipc transport (Unix sockets, no network port)."""
    import zmq
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    if encrypt and "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        try:
            declared = KernelSpecManager().get_kernel_spec(kernel_name).metadata.get("supported_encryption")
        except Exception:  # no such kernelspec: papermill reports it when it starts the kernel
            declared = None
        if "curve" in ([declared] if isinstance(declared, str) else declared or []):
            return Config({"KernelManager": {"transport_encryption": "auto"}})
    return Config({"KernelManager": {"transport": "ipc"}})


def run_one(
    path: Path,
    output: Path,
    mode: str,
    device: str,
    video_dir: str | None,
    timeout: float | None,
    capabilities: dict,
    extra: dict | None = None,
) -> dict:
    """Execute one notebook, its parameters cell overridden by the runner's options and `extra` (from
    `--param`); return its summary row (never raises for a notebook failure)."""
    import papermill as pm

    # what the notebook declares it needs (metadata 'playbook' -> 'requires'), e.g. ['cuda', 'nvdec']
    requires = list(json.loads(path.read_text()).get("metadata", {}).get("playbook", {}).get("requires", []))
    missing = [r for r in requires if not capabilities.get(r, False)]
    params = {
        "SMOKE": mode == "smoke",
        "DEVICE": device,
        "VIDEO_DIR": video_dir,
        **(extra or {}),
        "OUTPUT_DIR": str(output),
    }
    row = {
        "notebook": path.name,
        "requires": requires,
        "missing": missing,
        "status": "passed",
        "error": None,
        "seconds": None,
        "headline": {},
        "skipped": [],
    }
    start = time.perf_counter()
    (output / "logs").mkdir(exist_ok=True)
    progress = output / "logs" / f"{path.stem}.progress"
    progress.unlink(missing_ok=True)
    os.environ[PROGRESS_FILE] = str(progress)  # the kernel inherits it: its progress bars are shown here
    watcher = ProgressEcho(progress)
    try:
        for attempt in (1, 2):
            try:
                pm.execute_notebook(
                    str(path),
                    str(output / path.name),
                    parameters=params,
                    kernel_name="python3",
                    execution_timeout=timeout,
                    progress_bar=False,
                    cwd=str(output),
                    config=kernel_config("python3"),
                )
                break
            except RuntimeError as e:
                # a kernel that died before it ran a cell (two kernels took the same TCP port): another is safe
                if attempt == 2 or "Kernel died before replying to kernel_info" not in str(e):
                    raise
                print(f"       {path.stem}: its kernel died before it started ({e}); starting another")
    except Exception as e:  # papermill wraps the notebook's own error; record it and go on
        row["status"] = "failed"
        ename, evalue = getattr(e, "ename", type(e).__name__), getattr(e, "evalue", str(e))
        row["error"] = f"{ename}: {str(evalue).strip().splitlines()[0] if str(evalue).strip() else ''}"[:500]
        if not hasattr(e, "ename"):
            row["traceback"] = traceback.format_exc(limit=5)
    finally:
        watcher.stop()
        os.environ.pop(PROGRESS_FILE, None)
    row["seconds"] = round(time.perf_counter() - start, 1)
    result = output / f"{path.stem}.json"
    if result.exists():
        data = json.loads(result.read_text())
        row["headline"] = data.get("headline", {})
        row["skipped"] = data.get("skipped", [])
        if modules := (data.get("handed_over") or {}).get("modules"):  # 22's code to take home, written beside
            row["take_home"] = list(modules)
        # {path: cause} of the reader's files the notebook could not open, and of those a loader sweep skipped
        own = data["unreadable"] if isinstance(data.get("unreadable"), dict) else {}
        if unreadable := {**own, **failed_reading(data)}:
            row["unreadable"] = unreadable
    elif row["status"] == "passed":
        row["status"] = "failed"
        row["error"] = f"the notebook finished without writing {result.name}"
    return row


class ProgressEcho:
    """Shows on this console, every few seconds, the latest state of the progress bar a notebook's kernel writes to
    `path` (`bench.harness.progress_bar`), so that a long headless cell says how far it got."""

    def __init__(self, path: Path, every: float = 10.0):
        self.path, self.every, self.shown = Path(path), every, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def latest(self) -> str:
        """The bar's last state in the file ('' when none)."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return ""
        states = [s.strip() for s in text.replace("\n", "\r").split("\r") if s.strip()]
        return states[-1] if states else ""

    def _run(self):
        while not self._stop.wait(self.every):
            now = self.latest()
            if now and now != self.shown:
                print(f"       {now}", flush=True)
                self.shown = now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


MARKER = ".playbook-run"  # in every folder the runner writes into (and the previous/ it makes): its own


def mark(folder: Path) -> None:
    """Mark `folder` as one the runner writes into, unless it is marked already. The marker lists what the folder
    held before (`theirs`): `set_aside` never moves those entries, even where a name looks like a notebook's."""
    marker = Path(folder) / MARKER
    if marker.exists():
        return
    theirs = sorted(p.name for p in Path(folder).iterdir())
    note = "written by playbook_utils.tools.run_notebooks; the entries in 'theirs' were here before its first run"
    marker.write_text(json.dumps({"note": note, "theirs": theirs}, indent=1) + "\n")


def earlier_rows(output: Path, notebooks) -> list[dict]:
    """The rows of the run whose summary.json is in `output` (and of the runs it kept under `earlier`) for the
    notebooks not in `notebooks`, each stamped with the machine it ran on; [] where there is none."""
    try:
        doc = json.loads((output / "summary.json").read_text())
    except (OSError, ValueError):
        return []
    names, kept = {nb.name for nb in notebooks}, {}
    for r in [{"machine": doc.get("machine", {}), **r} for r in doc.get("notebooks", [])] + doc.get("earlier", []):
        if r.get("notebook") not in names:
            kept.setdefault(r["notebook"], r)
    return list(kept.values())


RUN_FILES = ("summary.json", "summary.md", "constraints.txt")  # what a run writes beside its notebooks' own files


def _theirs(folder: Path) -> set:
    """The entries `folder` held before the runner's first run there: its marker's 'theirs' (none for an empty
    marker), or every entry of a folder not yet marked."""
    marker = folder / MARKER
    if not marker.exists():
        return {p.name for p in folder.iterdir()}
    try:
        return set(json.loads(marker.read_text()).get("theirs", []))
    except (OSError, ValueError, AttributeError):
        return set()


def _notebooks_own(name: str, notebooks: list[Path]) -> bool:
    """Whether an entry named `name` starts with the number of one of `notebooks` ('22_...'): that notebook's file."""
    return name[:2].isdigit() and name[:3] in {nb.name[:3] for nb in notebooks}


def in_the_way(output: Path, notebooks: list[Path]) -> list[str]:
    """The reader's entries in `output` (`_theirs`) that a run of `notebooks` would write over or move: its summary,
    constraints, logs and previous/, the notebooks' own files (their number first: .ipynb, .json, .png, folders) and
    the modules 22 hands over."""
    ours = {*RUN_FILES, "logs", "previous", *(p.name for p in handover.FOLDER.glob("*.py"))}

    def numbered(n: str) -> bool:
        kind = Path(n).suffix in (".ipynb", ".json", ".png") or (output / n).is_dir()
        return _notebooks_own(n, notebooks) and kind

    return sorted(n for n in _theirs(output) if n in ours or numbered(n))


def set_aside(output: Path, notebooks: list[Path]) -> str | None:
    """Move the previous run in `output` (its summary, constraints.txt, and the files of the notebooks about to run
    again) into `output/previous/`; return the line that says so, or None when there was no run. Raises ValueError,
    before anything moves, for a folder the runner did not make (`MARKER`)."""
    summary = output / "summary.json"
    if not summary.exists():
        return None
    previous = output / "previous"
    if not (output / MARKER).exists():
        raise ValueError(
            f"--output {output}: it holds a summary.json, but this runner did not make it (no {MARKER} there); "
            f"nothing was moved. Choose another --output, or, if an earlier version of the runner made this "
            f"folder, create an empty {output / MARKER} and run again"
        )
    if previous.exists() and not (previous / MARKER).exists():
        raise ValueError(
            f"--output {output}: {previous} was not made by this runner (no {MARKER} in it), and a run there "
            f"would replace it; nothing was moved. Move it elsewhere, or, if the runner made it, create an empty "
            f"{previous / MARKER} and run again"
        )
    try:
        doc = json.loads(summary.read_text())
        what = f"a {doc.get('mode')} run of {(doc.get('machine') or {}).get('date_utc')} UTC"
    except (OSError, ValueError, AttributeError):
        what = "an earlier run"
    theirs = _theirs(output)
    replaced = previous.exists()
    shutil.rmtree(previous, ignore_errors=True)
    previous.mkdir()
    (previous / MARKER).write_text(json.dumps({"note": "made by playbook_utils.tools.run_notebooks", "theirs": []}))
    numbers = {nb.name[:3] for nb in notebooks}
    moving = [output / n for n in RUN_FILES if (output / n).exists()]
    moving += [p for p in output.iterdir() if _notebooks_own(p.name, notebooks)]
    if "22_" in numbers:  # the modules an earlier 22 handed over, perhaps edited there since: kept, not overwritten
        moving += [output / m.name for m in handover.FOLDER.glob("*.py") if (output / m.name).exists()]
    moving = [p for p in moving if p.name not in theirs]
    logs = [] if "logs" in theirs else [p for p in (output / "logs").glob("[0-9][0-9]_*") if p.name[:3] in numbers]
    for p in moving:
        shutil.move(str(p), str(previous / p.name))
    for p in logs:
        (previous / "logs").mkdir(exist_ok=True)
        shutil.move(str(p), str(previous / "logs" / p.name))
    again = len({p.name[:3] for p in moving if p.name[:2].isdigit()})
    files = f" and the files of the {again} notebook(s) run again" if again else ""
    return f"{output} held {what}: its summary{files} moved to {previous}/" + (
        " (replacing the run kept there)" if replaced else ""
    )


def expected_seconds(output: Path, mode: str) -> tuple[dict, str | None]:
    """({notebook name: seconds it last took when it passed}, their source): the previous run of `mode` in `output`,
    else the reference run (`results.reference_for`); ({}, None) when neither can be read."""
    reference = reference_for("cpu" if mode == "smoke" else "gpu") / "summary.json"
    for path in (Path(output) / "summary.json", reference):
        try:
            doc = json.loads(path.read_text())
            if doc.get("mode") != mode:
                continue
            # a failed run stops early: its seconds say nothing about how long the notebook takes
            times = {
                r["notebook"]: r["seconds"]
                for r in doc["notebooks"]
                if r.get("seconds") and r.get("status") == "passed"
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        machine = doc.get("machine") or {}
        where = (
            f"the last {mode} run in this folder"
            if path.parent == Path(output)
            else f"{path.parent.relative_to(ROOT)} ({machine.get('gpu', 'no GPU')}; {machine.get('cpu')})"
        )
        return times, where
    return {}, None


def duration(seconds: float) -> str:
    """Seconds as the console shows them: '45s', '1m20s', '1h05m'."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """The console lines of a run: a start line per notebook ('[3/12] 20_decode_benchmarks ... expected ~1m20s'),
    a result line when it ends, and the final tally."""

    def __init__(self, total: int, expected: dict):
        self.total, self.expected, self.count, self.t0 = total, expected, 0, time.perf_counter()

    def start(self, nb: Path) -> None:
        self.count += 1
        secs = self.expected.get(nb.name)
        eta = f"expected ~{duration(secs)}" if secs else "no time from an earlier run"
        print(f"[{self.count}/{self.total}] {nb.stem} ... {eta}", flush=True)

    def tally(self, rows: list[dict]) -> str:
        """'3 passed, 0 failed in 6m36s', and with several notebooks each one's share of their time
        ('20 76%, 21 22%, 22 2%'): where a run spends its minutes."""
        failed = sum(r["status"] != "passed" for r in rows)
        line = f"{len(rows) - failed} passed, {failed} failed in {duration(time.perf_counter() - self.t0)}"
        spent = sum(r.get("seconds") or 0 for r in rows)
        if len(rows) > 1 and spent > 0:
            shares = ", ".join(f"{r['notebook'][:2]} {100 * (r.get('seconds') or 0) / spent:.0f}%" for r in rows)
            line += f" ({shares})"
        return line


def _run_here(nb: Path, output: Path, args, caps: dict, machine: dict) -> dict:
    """Run one notebook in this process, print its status line; its row carries `machine` (so a row merged
    with other runs' rows keeps its stamp)."""
    row = {
        **run_one(nb, output, args.mode, args.device, args.video_dir, args.timeout, caps, args.params.get(nb.name)),
        "machine": machine,
    }
    note = f" (needs {', '.join(row['missing'])}: not here, those parts skipped)" if row["missing"] else ""
    error = f"\n         {row['error']}" if row["error"] else ""
    print(f"       {row['status']} {nb.stem} in {duration(row['seconds'])}{note}{error}", flush=True)
    return row


def fmt(value) -> str:
    """A headline value for a table: 3 significant digits under 100, whole numbers above, a dict as 'k v, ...'."""
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt(v)}" for k, v in value.items())
    return str(value)


def _with_spread(headline: dict, key: str) -> str:
    """A headline value, with '± N%' when the notebook gives its spread as the sibling key `<key>_spread_pct`."""
    spread = headline.get(f"{key}_spread_pct")
    return fmt(headline[key]) + (f" ± {percent(spread)}" if isinstance(spread, (int, float)) else "")


def open_first(rows: list[dict]) -> str | None:
    """The line summary.md starts with: notebook 22's recommendation (its rate, workload, runner-up and margin where
    its headline gives them) when 22 ran, else the first failed notebook; None when neither applies."""
    r22 = next((r for r in rows if r["notebook"].startswith("22_")), None)
    if r22 is not None and r22["status"] == "passed":
        h = r22.get("headline") or {}
        said = "no recommendation" if h.get("recommended") is None else f"recommends **{h['recommended']}**"
        keys = [k for k in ("recommended_fps", "workload", "runner_up", "margin_note") if h.get(k) is not None]
        details = "; ".join(f"{k}: {_with_spread(h, k)}" for k in keys)
        home = ", ".join(f"`{m}`" for m in r22.get("take_home") or [])
        return (
            f"**Open this first:** `{r22['notebook']}` {said}"
            + (f" ({details})" if details else "")
            + (f". The code to take home: {home} in this folder (its usage: 22's section 6)" if home else "")
        )
    failed = [r for r in rows if r["status"] != "passed"]
    if failed:
        return f"**Open this first:** `{failed[0]['notebook']}`, which failed: {failed[0]['error']}"
    return None


def failed_reading(data: dict) -> dict:
    """{path: cause} of the reader's files a loader sweep skipped as they failed to decode (notebook 21's `sweep`,
    22's `short_loaders`), each path relative to the folder measured."""
    rows = [*(data.get("sweep") or []), *((data.get("short_loaders") or {}).get("sweep") or [])]
    folder = data.get("video_dir")
    out = {}
    for r in rows:
        for path, cause in (r.get("files_skipped") or {}).items():
            name = os.path.relpath(path, folder) if folder and Path(path).is_relative_to(folder) else path
            out.setdefault(name, f"failed as it was read ({r['backend']}): {cause}")
    return out


def unreadable_files(rows: list[dict]) -> dict:
    """{path: (cause, [notebooks that reported it])} over every row's `unreadable`."""
    files: dict = {}
    for r in rows:
        for path, cause in (r.get("unreadable") or {}).items():
            files.setdefault(path, (cause, []))[1].append(Path(r["notebook"]).stem)
    return files


def code_commit() -> str | None:
    """The commit of the code that runs: $PLAYBOOK_COMMIT, else `git rev-parse` of this checkout (with
    '+uncommitted changes' where tracked files differ from it), else the COMMIT file a copy without history
    carries (.gpu_media/COMMIT, written by the GPU scripts); None if none."""
    if os.environ.get("PLAYBOOK_COMMIT"):
        return os.environ["PLAYBOOK_COMMIT"]

    def git(*args) -> str:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        if head:
            dirty = git("status", "--porcelain", "--untracked-files=no")
            return head + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    marker = ROOT / ".gpu_media" / "COMMIT"
    if marker.exists():
        return marker.read_text().strip()[:12] or None
    return None


def _stamp(machine: dict) -> str:
    """'GPU; CPU; date UTC; code commit' of a run's `machine` record, for summary.md."""
    code = f"; code {machine['commit']}" if machine.get("commit") else ""
    return f"{machine.get('gpu', 'no GPU')}; {machine.get('cpu')}; {machine.get('date_utc')} UTC{code}"


def write_summary(
    rows: list[dict],
    output: Path,
    mode: str,
    machine: dict,
    unfinished: list[str] | None = None,
    earlier: list[dict] | None = None,
) -> Path:
    """Write summary.md and summary.json into `output`; return the markdown path. `unfinished`: notebooks still to run
    when written mid-run; `earlier`: the rows of earlier runs in this folder that this run does not redo."""
    doc = {"mode": mode, "machine": machine, **reference_numbers(output), "notebooks": rows}
    if unfinished:
        doc["unfinished"] = list(unfinished)
    if unfinished and earlier:
        doc["earlier"] = earlier
    (output / "summary.json").write_text(json.dumps(doc, indent=1))
    first = open_first(rows)
    lines = [f"# Playbook run ({mode} mode)", "", *([first, ""] if first else []), f"Machine: {_stamp(machine)}"]
    # rows merged from an earlier run on another machine keep that machine's stamp
    lines += [
        f"{r['notebook']} ran on: {_stamp(r['machine'])}  "
        for r in rows
        if r.get("machine") and r["machine"] != machine
    ]
    lines += ["", "| notebook | status | seconds | headline | skipped here |", "|---|---|---|---|---|"]
    for r in rows:
        spreads = {f"{k}_spread_pct" for k in r["headline"]}  # shown with their rate ('value ± N%'), not alone
        head = "<br>".join(f"{k}: {_with_spread(r['headline'], k)}" for k in r["headline"] if k not in spreads) or "-"
        skipped = "<br>".join(r["skipped"]) or "-"
        status = r["status"] if r["status"] == "passed" else f"**{r['status']}**: {r['error']}"
        lines.append(f"| {r['notebook']} | {status} | {r['seconds']} | {head} | {skipped} |")
    failed = [r["notebook"] for r in rows if r["status"] != "passed"]
    lines += ["", f"{len(rows) - len(failed)} passed, {len(failed)} failed"]
    if unfinished:
        lines += [f"**Unfinished run**: still to run when this was written: {', '.join(unfinished)}"]
    unreadable = unreadable_files(rows)
    if unreadable:
        lines += ["", f"## Files that could not be read ({len(unreadable)})", ""]
        lines += [f"- `{path}` ({', '.join(nbs)}): {cause}" for path, (cause, nbs) in unreadable.items()]
    path = output / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def add_run_options(ap: argparse.ArgumentParser, mode: str, timeout: float | None) -> None:
    """The options the runner and `nightly` share: which notebooks, where, on what, with which parameters."""
    ap.add_argument(
        "--mode",
        choices=["smoke", "full"],
        default=mode,
        help="smoke: small media and short runs, the same code as full; full: the full-size media set "
        "(720p to 4K) and full-length measurements (default: %(default)s)",
    )
    ap.add_argument(
        "--pattern",
        action="append",
        help="which notebooks: a glob or a substring of their names, e.g. '2[0-2]*', 22 or decode; "
        "repeatable (default: every notebook)",
    )
    ap.add_argument(
        "--notebooks",
        default=str(NOTEBOOK_DIR),
        help="folder holding the NN_*.ipynb notebooks (default: the repository's notebooks/)",
    )
    ap.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="auto: the GPU where there is one, else the CPU; cpu; cuda (default: auto)",
    )
    ap.add_argument(
        "--video-dir",
        default=None,
        help="a folder of your own videos, measured instead of the generated media set; files that "
        "cannot be read are listed in summary.md (default: the generated media)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=timeout,
        help="seconds one cell may run before its notebook counts as failed, 0 for no limit (default: %(default)s)",
    )
    ap.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="set a notebook parameter, e.g. WORKLOAD=sequential or MAX_FILES=50; repeatable "
        "(values read as Python literals where they parse, else as strings; SMOKE and "
        "OUTPUT_DIR come from --mode and --output)",
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit status: 0 every notebook passed, 1 a notebook failed, 2 a usage error "
        "(no notebook matched, a malformed --param, an --output folder holding a "
        "summary.json that this runner did not make).",
    )
    add_run_options(ap, mode="smoke", timeout=None)
    ap.add_argument(
        "--output",
        default=None,
        help="folder for executed notebooks, JSON and summary (default: playbook-output/MODE); "
        "an earlier run there (a summary.json) is first moved to OUTPUT/previous/: its summary and "
        "the files of the notebooks run again (one earlier run is kept; the files of notebooks not "
        "run again stay, for the notebooks that read them). The runner marks the folders it writes into "
        f"({MARKER}) and refuses a folder with a summary.json it did not make; what a folder held before the "
        "runner's first run there never moves",
    )
    ap.add_argument(
        "--workshop",
        action="store_true",
        help=f"the workshop path, {', '.join(WORKSHOP)}: the machine, the media, two libraries, the "
        "head-to-head, the loaders and the choice, in full mode unless --mode says otherwise",
    )
    args = ap.parse_args(argv)
    args.timeout = args.timeout or None  # 0: no limit
    if args.workshop:
        args.pattern = list(WORKSHOP)
        if "--mode" not in " ".join(argv if argv is not None else sys.argv):
            args.mode = "full"

    output = Path(caller_path(args.output or f"playbook-output/{args.mode}"))
    args.video_dir = caller_path(args.video_dir)
    if args.video_dir is not None and not Path(args.video_dir).is_dir():
        print(f"run_notebooks: --video-dir {args.video_dir}: not a folder", file=sys.stderr)
        return 2
    if output.exists() and not output.is_dir():
        print(f"run_notebooks: --output {output}: a file, not a folder", file=sys.stderr)
        return 2
    if args.video_dir is not None and output.resolve().is_relative_to(Path(args.video_dir).resolve()):
        print(
            f"run_notebooks: --output {output} is inside --video-dir {args.video_dir}: the copies of your videos that "
            "21 and 22 make there would be read as more of your videos; choose an output folder outside it",
            file=sys.stderr,
        )
        return 2
    output.mkdir(parents=True, exist_ok=True)
    notebooks = select(args.notebooks, args.pattern)
    if not notebooks:
        print(f"no notebooks match {args.pattern} in {args.notebooks}", file=sys.stderr)
        return 2
    try:
        args.params, notes = params_per_notebook(notebooks, parse_params(args.param))
    except ValueError as e:
        print(f"run_notebooks: {e}", file=sys.stderr)
        return 2
    rep = env.report(probe_libraries=False)
    caps = env.capabilities(rep)
    gpu = rep["gpu"]["devices"][0]["name"] if rep["gpu"]["available"] else "no GPU"
    machine = {
        "gpu": gpu,
        "cpu": f"{rep['cpu_model']} x{rep['cpu_usable_cores']}",
        "cores": rep["cpu_usable_cores"],
        "date_utc": rep["date_utc"],
        "commit": code_commit(),
        "capabilities": caps,
        "libraries": setup_env.installed_versions(),
        # the generated clips' encoding (the nightly names a change); none for a run on the reader's own files
        "media_version": None if args.video_dir else media.MEDIA_VERSION,
    }
    started = f"running {len(notebooks)} notebook(s) in {args.mode} mode on {gpu}; output: {output}"
    expected, source = expected_seconds(output, args.mode)
    progress = Progress(len(notebooks), expected)
    if source:
        started += f"\nexpected times from {source}"
    yours = in_the_way(output, notebooks)
    if yours:
        print(
            f"run_notebooks: --output {output} holds files of yours that this run would write over or move: "
            f"{', '.join(yours)}; nothing was changed. Choose another --output",
            file=sys.stderr,
        )
        return 2
    earlier = earlier_rows(output, notebooks)  # kept in the summary written on the way
    try:  # a folder the runner did not make: refused before anything moves
        moved = set_aside(output, notebooks)
    except ValueError as e:
        print(f"run_notebooks: {e}", file=sys.stderr)
        return 2
    mark(output)
    print(started, *([moved] if moved else []), *notes, sep="\n", flush=True)
    # the libraries' import checks, made once for the run: each kernel inherits where they are kept
    record = output / "logs" / "imports-checked.txt"
    record.parent.mkdir(exist_ok=True)
    record.unlink(missing_ok=True)
    os.environ[base.RECORD_ENV] = str(record.resolve())
    rows = []
    for i, nb in enumerate(notebooks):
        progress.start(nb)
        rows.append(_run_here(nb, output, args, caps, machine))
        if i + 1 < len(notebooks):  # what has run, should the machine be lost before the end
            left = [p.name for p in notebooks[i + 1 :]]
            write_summary(rows, output, args.mode, machine, unfinished=left, earlier=earlier)
    os.environ.pop(base.RECORD_ENV, None)  # the record is this run's
    summary = write_summary(rows, output, args.mode, machine)
    setup_env.write_constraints(
        output, machine["libraries"], f"installed for this {args.mode} run of {machine['date_utc']} UTC"
    )
    unreadable = unreadable_files(rows)
    print(
        progress.tally(rows),
        *([f"{len(unreadable)} of your files could not be read: listed in summary.md"] if unreadable else []),
        *[
            f"the code to take home: {output / m} (its usage: 22's section 6)"
            for r in rows
            for m in r.get("take_home", [])
        ],
        f"summary: {summary}",
        sep="\n",
    )
    return 1 if any(r["status"] != "passed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
