"""Nightly validation: run the notebooks, compare their headline numbers with the committed baseline.

    python -m playbook_utils.tools.nightly [--pattern '1*'] [--part N] | --compare-only DIR... | --adopt DIR

Writes report.md and report.json. Exit status: 3 usage or setup error, 1 a notebook failed, 2 a metric regressed
or is MISSING, 0 every notebook passed and no metric regressed.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import shutil
import sys
from pathlib import Path

from playbook_utils.tools import run_notebooks
from playbook_utils.tools.results import CPU_REFERENCE, machine_reference, machine_slug, reference_for
from playbook_utils.tools.run_notebooks import fmt, matches
from playbook_utils.tools.setup_env import ROOT, shown

TOLERANCES = ROOT / "results" / "tolerances.json"
DIRECTIONS = ("higher", "lower", "near", "equal", "info")
REGRESSED = ("REGRESSION", "MISSING")
EXIT_OK, EXIT_FAILED, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2, 3


class NightlyError(Exception):
    """A usage or setup problem (exit status 3); the message names the file and the cause."""


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise NightlyError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise NightlyError(f"{path}: malformed JSON: {e}") from None
    except OSError as e:
        raise NightlyError(f"{path}: cannot be read: {e}") from None


def load_tolerances(path=TOLERANCES) -> dict:
    """The tolerance table (results/tolerances.json), checked; returns {'rules', 'default_number', 'default_other'}."""
    table = _read_json(Path(path))
    if not isinstance(table, dict) or not isinstance(table.get("rules"), list):
        raise NightlyError(f"{path}: expected an object with a 'rules' list")
    table.setdefault("default_number", {"direction": "near", "rel": 0.25})
    table.setdefault("default_other", {"direction": "equal"})
    for i, rule in enumerate(table["rules"] + [table["default_number"], table["default_other"]]):
        if not isinstance(rule, dict) or rule.get("direction") not in DIRECTIONS:
            raise NightlyError(f"{path}: rule {i} ({rule!r}) needs a direction among {', '.join(DIRECTIONS)}")
        if not all(isinstance(rule.get(k, "*"), str) for k in ("metric", "notebook")):
            raise NightlyError(f"{path}: rule {i} ({rule!r}): 'metric' and 'notebook' must be glob strings")
        for k in ("rel", "abs"):
            if not _is_number(rule.get(k, 0)) or rule.get(k, 0) < 0:
                raise NightlyError(f"{path}: rule {i} ({rule!r}): '{k}' must be a number >= 0")
        if not isinstance(rule.get("per_core", False), bool):
            raise NightlyError(f"{path}: rule {i} ({rule!r}): 'per_core' must be true or false")
    return table


def cores_of(machine) -> int | None:
    """The usable cores of a row's machine: its 'cores' (an int), else the count its 'cpu' line names
    ('Intel Xeon x16' -> 16), else None."""
    machine = machine or {}
    if isinstance(machine.get("cores"), int) and not isinstance(machine.get("cores"), bool):
        return machine["cores"]
    words = str(machine.get("cpu") or "").split()
    return int(words[-1][1:]) if words and words[-1][:1] == "x" and words[-1][1:].isdigit() else None


def other_cores(cores: dict | None) -> bool:
    """Whether a report entry's {'baseline': n, 'now': n} core counts are both known and differ."""
    return bool(cores) and None not in cores.values() and cores["baseline"] != cores["now"]


def rule_for(table: dict, notebook: str, metric: str, value) -> dict:
    """The first rule of `table` that fits this notebook stem and metric (else the default for its type)."""
    for rule in table["rules"]:
        if fnmatch.fnmatchcase(metric, rule.get("metric", "*")) and fnmatch.fnmatchcase(
            notebook, rule.get("notebook", "*")
        ):
            return rule
    return table["default_number"] if _is_number(value) else table["default_other"]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def describe(rule: dict) -> str:
    """The rule in words for the report's tolerance column, e.g. 'higher is better, may drop 20%'."""
    d, rel, ab = rule["direction"], rule.get("rel", 0), rule.get("abs", 0)
    band = " or ".join(p for p in ([f"{rel:.0%}"] if rel else []) + ([f"{fmt(ab)} abs"] if ab else [])) or "nothing"
    return {
        "higher": f"higher is better, may drop {band}",
        "lower": f"lower is better, may rise {band}",
        "near": f"±{band}, either way",
        "equal": "must match",
        "info": "reported only",
    }[d]


def compare_value(base, now, rule: dict) -> tuple[str, str]:
    """(verdict, change) for one metric: verdict among ok, better, REGRESSION, MISSING, new, same, changed."""
    d = rule["direction"]
    if base is None and now is None:
        return "ok", ""
    if base is None:
        return "new", "measured now, not in the baseline"
    if now is None:
        return ("changed" if d == "info" else "MISSING"), "not measured now"
    if d in ("higher", "lower", "near") and _is_number(base) and _is_number(now):
        diff = now - base
        change = f"{diff / abs(base):+.1%}" if base and rule.get("rel") else f"{diff:+,.3g}"
        allowed = max(rule.get("rel", 0) * abs(base), rule.get("abs", 0))
        worse = {"higher": -diff, "lower": diff, "near": abs(diff)}[d]
        if worse > allowed:
            return "REGRESSION", change
        return ("better" if d != "near" and -worse > allowed else "ok"), change
    if d in ("higher", "lower") and isinstance(base, bool) and isinstance(now, bool) and base != now:
        return ("better" if now == (d == "higher") else "REGRESSION"), f"{base} -> {now}"  # e.g. saturated
    same = base == now and isinstance(base, bool) == isinstance(now, bool)  # True must not equal 1
    if d == "info":
        return ("same" if same else "changed"), ""
    if same:
        return "ok", ""
    note = (
        ""
        if type(base) is type(now) or (_is_number(base) and _is_number(now))
        else f" (type {type(base).__name__} -> {type(now).__name__})"
    )
    return "REGRESSION", "differs" + note


def flatten(headline: dict, prefix: str = "") -> dict:
    """A headline with nested objects spread into dotted metric names, so that each number gets its own rule:
    {'nvdec_ceiling_fps': {'h264_1080p_gop30.mp4': 2969}} -> {'nvdec_ceiling_fps.h264_1080p_gop30.mp4': 2969}."""
    out = {}
    for key, value in headline.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def load_results(folders, label: str) -> dict:
    """Read and merge (last wins) result folders written by the runner; returns {'notebooks': {name: row}, 'modes',
    'machine', 'environment', 'folders'}. Raises NightlyError naming the file for a missing folder or bad JSON."""
    merged = {"notebooks": {}, "modes": set(), "machine": {}, "environment": None, "folders": []}
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise NightlyError(f"{folder}: {label} folder not found")
        merged["folders"].append(shown(folder))
        rows = {}
        summary = folder / "summary.json"
        if summary.exists():
            doc = _read_json(summary)
            if not isinstance(doc, dict) or not isinstance(doc.get("notebooks"), list):
                raise NightlyError(f"{summary}: expected the runner's summary (an object with a 'notebooks' list)")
            if doc.get("mode"):
                merged["modes"].add(doc["mode"])
            merged["machine"] = doc.get("machine") or merged["machine"]
            for row in doc["notebooks"]:
                if not isinstance(row, dict) or "notebook" not in row:
                    raise NightlyError(f"{summary}: a notebook row without a 'notebook' name: {row!r}"[:300])
                rows[row["notebook"]] = {"machine": doc.get("machine") or {}, **row}
        for path in sorted(folder.glob("[0-9][0-9]_*.json")):
            data = _read_json(path)
            if not isinstance(data, dict) or "headline" not in data:
                continue  # another table (e.g. a raw matrix dump), not a notebook's results
            if not isinstance(data["headline"], dict):
                raise NightlyError(f"{path}: 'headline' must be an object, found {type(data['headline']).__name__}")
            row = rows.setdefault(f"{path.stem}.ipynb", {"notebook": f"{path.stem}.ipynb", "status": None})
            row["headline"], row["skipped"] = data["headline"], data.get("skipped", [])
            if path.stem.startswith("00_") and isinstance(data.get("environment"), dict):
                merged["environment"] = data["environment"]
        for name, row in rows.items():
            row["headline"] = flatten(row.get("headline") or {})
            row.setdefault("skipped", [])
            row["folder"] = str(folder)
            merged["notebooks"][name] = row
    if not merged["notebooks"]:
        raise NightlyError(
            f"{', '.join(merged['folders'])}: no notebook results ({label}): "
            "neither summary.json rows nor NN_*.json files with a 'headline'"
        )
    merged["modes"] = sorted(merged["modes"])
    return merged


def stamp(results: dict) -> dict:
    """The environment stamp of a results set: mode, date, GPU, CPU and media version from summary.json; driver,
    CUDA, Python and library versions from notebook 00's JSON (library versions else from summary.json)."""
    m, e = results["machine"], results["environment"] or {}
    gpu = e.get("gpu") or {}
    libs = {k: v.get("version") for k, v in (e.get("libraries") or {}).items() if isinstance(v, dict)} or {
        k: v for k, v in (m.get("libraries") or {}).items() if isinstance(v, str)
    }
    return {
        "folders": results["folders"],
        "mode": ", ".join(results["modes"]) or None,
        "date_utc": m.get("date_utc") or e.get("date_utc"),
        "gpu": m.get("gpu"),
        "cpu": m.get("cpu"),
        "driver": gpu.get("driver"),
        "cuda": gpu.get("cuda_driver"),
        "python": e.get("python"),
        "libraries": libs or None,
        "media_version": m.get("media_version"),
    }


def timed_clips(heads: list[dict], metric: str) -> tuple | None:
    """(the baseline's clip, the run's) where frames/s `metric` was timed on another clip than the baseline's
    (`rates_clip`, or `gpu_rates_clip` for a GPU rate), else None: such rates are not judged against each other."""
    if not metric.endswith("_fps"):
        return None
    keys = ("gpu_rates_clip", "rates_clip") if metric.startswith("gpu_") else ("rates_clip",)
    clips = tuple(next((h[k] for k in keys if h.get(k)), None) for h in heads)
    return clips if None not in clips and clips[0] != clips[1] else None


def compare(baseline: dict, run: dict, table: dict, patterns: list[str] | None = None) -> dict:
    """Compare a run with the baseline (both from `load_results`); returns the report: exit_code, verdict, failures,
    regressions ('notebook: metric'), not_comparable, tolerances, the baseline and run stamps, notebooks (rows)."""
    # a run folder can hold notebooks copied in as inputs (22 reads 20's table): the patterns select both sides
    names = sorted(n for n in set(baseline["notebooks"]) | set(run["notebooks"]) if matches(n, patterns))
    notebooks, failures, regressions, unjudged = [], [], [], []
    for name in names:
        b, r = baseline["notebooks"].get(name), run["notebooks"].get(name)
        entry = {
            "notebook": name,
            "status": None,
            "error": None,
            "in_baseline": b is not None,
            "baseline_status": b.get("status") if b else None,
            "metrics": [],
            "newly_skipped": [],
            "cores": {"baseline": cores_of((b or {}).get("machine")), "now": cores_of((r or {}).get("machine"))},
        }
        # the library notebooks' rates name the clip they timed (`rates_clip`): a rate timed on another clip
        # is not judged against it
        heads = [((h or {}).get("headline") or {}) for h in (b, r)]
        if r is None:
            entry["status"] = "not run"
            regressions.append(f"{name}: not run")
        else:
            entry["status"], entry["error"] = r.get("status") or "passed (no summary row)", r.get("error")
            if r.get("status") not in (None, "passed"):
                failures.append(name)
            entry["newly_skipped"] = [s for s in r["skipped"] if b is None or s not in b["skipped"]]
            base_head = b["headline"] if b else {}
            for metric in list(base_head) + [k for k in r["headline"] if k not in base_head]:
                bv, nv = base_head.get(metric), r["headline"].get(metric)
                rule = rule_for(table, Path(name).stem, metric, bv if bv is not None else nv)
                if metric not in base_head:
                    verdict, change = "new", "not in the baseline"
                elif metric not in r["headline"]:
                    verdict, change = ("changed" if rule["direction"] == "info" else "MISSING"), "not reported now"
                else:
                    verdict, change = compare_value(bv, nv, rule)
                judged = verdict in ("ok", "better", "REGRESSION") and None not in (bv, nv)
                if judged and rule.get("per_core") and other_cores(entry["cores"]):
                    verdict = "not comparable"
                    change = f"{change} ({entry['cores']['now']} vs {entry['cores']['baseline']} cores)".lstrip()
                elif judged and (clips := timed_clips(heads, metric)):
                    verdict = "not comparable"
                    change = f"{change} (timed on {clips[1]}, the baseline on {clips[0]})".lstrip()
                entry["metrics"].append(
                    {
                        "metric": metric,
                        "baseline": bv,
                        "now": nv,
                        "change": change,
                        "tolerance": describe(rule),
                        "verdict": verdict,
                        "why": rule.get("why"),
                    }
                )
                if verdict in REGRESSED:
                    regressions.append(f"{name}: {metric}")
                elif verdict == "not comparable":
                    unjudged.append(f"{name}: {metric}")
        notebooks.append(entry)
    code = EXIT_FAILED if failures else EXIT_REGRESSION if regressions else EXIT_OK
    verdict = {EXIT_OK: "passed", EXIT_FAILED: "notebook failure", EXIT_REGRESSION: "regression"}[code]
    return {
        "exit_code": code,
        "verdict": verdict,
        "failures": failures,
        "regressions": regressions,
        "not_comparable": unjudged,
        "tolerances": table.get("source"),
        "baseline": stamp(baseline),
        "run": stamp(run),
        "notebooks": notebooks,
    }


def _cell(v) -> str:
    return fmt(v).replace("|", "\\|").replace("\n", " ")


def write_report(report: dict, folder) -> tuple[Path, Path]:
    """Write report.md and report.json into `folder`; return both paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    js = folder / "report.json"
    js.write_text(json.dumps(report, indent=1))
    lines = [
        f"# Nightly validation: {report['verdict']} (exit {report['exit_code']})",
        "",
        "| | baseline | this run |",
        "|---|---|---|",
    ]

    def show(v) -> str:  # a dict (the library versions) as 'name version, ...', as `fmt` writes it
        return ", ".join(v) if isinstance(v, list) else fmt(v) if v is not None else "-"

    for key in ("folders", "mode", "date_utc", "gpu", "cpu", "driver", "cuda", "python", "libraries", "media_version"):
        b, r = report["baseline"].get(key), report["run"].get(key)
        lines.append(f"| {key} | {_cell(show(b))} | {_cell(show(r))} |")
    lines += ["", f"Tolerances: {report['tolerances']}", ""]
    if report["failures"]:
        lines.append("Failed notebooks: " + ", ".join(report["failures"]))
    lines.append("Regressions: " + ("; ".join(report["regressions"]) if report["regressions"] else "none"))
    if report.get("not_comparable"):
        unjudged = "; ".join(report["not_comparable"])
        lines += ["", f"Not judged, the notebook had another number of cores than in the baseline: {unjudged}"]
    for nb in report["notebooks"]:
        status = nb["status"] + (f": {nb['error']}" if nb["error"] else "")
        base = (nb["baseline_status"] or "passed (no summary row)") if nb["in_baseline"] else "not in the baseline"
        lines += ["", f"## {nb['notebook']}", "", f"Run: {status}; baseline: {base}"]
        lines += [f"- skipped now, not in the baseline: {s}" for s in nb["newly_skipped"]]
        c = nb.get("cores")
        if other_cores(c):
            lines.append(
                f"- usable cores: {c['baseline']} in the baseline, {c['now']} now: the metrics that depend on "
                "the core count (rules with per_core) are not judged"
            )
        if nb["metrics"]:
            lines += ["", "| metric | baseline | now | change | tolerance | verdict |", "|---|---|---|---|---|---|"]
            for m in nb["metrics"]:
                v = f"**{m['verdict']}**" if m["verdict"] in REGRESSED else m["verdict"]
                lines.append(
                    f"| {m['metric']} | {_cell(m['baseline'])} | {_cell(m['now'])} | {_cell(m['change'])} "
                    f"| {_cell(m['tolerance'])} | {v} |"
                )
    md = folder / "report.md"
    md.write_text("\n".join(lines) + "\n")
    return md, js


def _merged_rows(before: dict, after: dict) -> list[dict]:
    """`after`'s notebook rows, and those of `before` (an earlier summary.json) that `after` did not redo, each
    stamped with the machine (date, commit) it ran on."""
    redone = {r["notebook"] for r in after["notebooks"]}
    kept = [
        {"machine": before.get("machine", {}), **r} for r in before.get("notebooks", []) if r["notebook"] not in redone
    ]
    ran = [{"machine": after.get("machine", {}), **r} for r in after["notebooks"]]
    return sorted(kept + ran, key=lambda r: r["notebook"])


def adopt(part: Path, reference: Path | None = None) -> dict[str, list[str]]:
    """Make a `--part` run's passed notebooks whose JSON `part` holds the reference's copies (default: the part's
    GPU's folder), keeping its other rows; refuses another GPU or mode. Returns {'adopted', 'failed', 'unfinished',
    'reference'}."""
    after = _read_json(part / "summary.json")
    gpu = (after.get("machine") or {}).get("gpu")
    if reference is None:
        reference = machine_reference(gpu) or CPU_REFERENCE
    reference.mkdir(parents=True, exist_ok=True)
    held = reference / "summary.json"
    before = _read_json(held) if held.exists() else {"mode": after.get("mode"), "notebooks": [], "machine": {}}
    theirs = (before.get("machine") or {}).get("gpu")
    if held.exists() and machine_slug(theirs) != machine_slug(gpu):
        raise NightlyError(
            f"{shown(part)} ran on {gpu or 'no GPU'}, {shown(reference)} on {theirs or 'no GPU'}: a reference is never "
            "a mix of machines"
        )
    failed = [r["notebook"] for r in after["notebooks"] if r["status"] != "passed"]
    unfinished = list(after.get("unfinished") or [])
    if after.get("mode") != before.get("mode"):
        raise NightlyError(
            f"{shown(part)} holds a {after.get('mode')}-mode run, {shown(reference)} a {before.get('mode')}-mode one"
        )
    # a row whose files the folder does not hold came with an earlier part's output (PARTS_FROM): adopted from there
    held_here = [r for r in after["notebooks"] if (part / r["notebook"]).with_suffix(".json").exists()]
    after = {**after, "notebooks": [r for r in held_here if r["status"] == "passed"]}
    if not after["notebooks"]:
        raise NightlyError(f"{shown(part)} holds no notebook that passed: nothing adopted, the reference unchanged")
    numbers = sorted({r["notebook"].split("_")[0] + "_" for r in after["notebooks"]})
    for prefix in numbers:
        for old in reference.glob(prefix + "*"):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        for new in part.glob(prefix + "*"):
            (shutil.copytree if new.is_dir() else shutil.copy2)(new, reference / new.name)
    machine = max((before.get("machine", {}), after.get("machine", {})), key=lambda m: m.get("date_utc") or "")
    run_notebooks.write_summary(_merged_rows(before, after), reference, before["mode"], machine)
    return {
        "adopted": [r["notebook"] for r in after["notebooks"]],
        "failed": failed,
        "unfinished": unfinished,
        "reference": str(reference),
    }


# The full run in parts, run one after another into the same folder: a part's notebooks may read an earlier
# part's output (22 reads 20 and 21), and the folder's summary keeps every part's rows.
PARTS = {
    "1": ("00*", "01*", "1*"),
    "2": ("20*",),
    "3": ("21*", "22*"),
    "4": ("23*", "24*", "30*"),
}


def run(args) -> Path:
    """Run the notebooks through `playbook_utils.tools.run_notebooks` into the output folder; returns that folder."""
    output = Path(args.output or Path("nightly") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
    output.mkdir(parents=True, exist_ok=True)
    before = _read_json(output / "summary.json") if (output / "summary.json").exists() else None
    if before and before.get("earlier"):  # a run lost mid-way: the rows it kept of the runs before it count too
        before = {**before, "notebooks": run_notebooks.earlier_rows(output, [])}
    argv = ["--mode", args.mode, "--output", str(output), "--device", args.device, "--notebooks", args.notebooks]
    argv += [a for pat in args.pattern or [] for a in ("--pattern", pat)]
    argv += [a for item in args.param or [] for a in ("--param", item)]
    argv += ["--video-dir", args.video_dir] if args.video_dir else []
    argv += ["--timeout", str(args.timeout)] if args.timeout else []
    if run_notebooks.main(argv) == 2:
        raise NightlyError(
            f"no notebooks match {args.pattern}, or a --param is malformed or names no notebook's parameter "
            "(the line above says which)"
        )
    # a partial run into a folder that already had a summary: keep the earlier rows the run did not redo
    after = _read_json(output / "summary.json") if before and (output / "summary.json").exists() else None
    if after is not None and before.get("mode") != after.get("mode"):
        print(f"nightly: {output}/summary.json held a {before.get('mode')}-mode run; replaced, not merged")
    elif after is not None:
        run_notebooks.write_summary(_merged_rows(before, after), output, after["mode"], after.get("machine", {}))
    return output


def main(argv=None) -> int:
    """The CLI (`python -m playbook_utils.tools.nightly`, `make nightly`); returns the exit status above."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--compare-only",
        nargs="+",
        metavar="RESULTS_DIR",
        help="compare these result folders (merged, the last winning) without running notebooks",
    )
    ap.add_argument(
        "--baseline",
        default=None,
        help="folder of reference results, e.g. results/cpu-2core for a smoke run (default: this machine's "
        "results/<gpu> where it exists, else the one the README quotes; with --adopt, the part's machine's)",
    )
    ap.add_argument("--tolerances", default=str(TOLERANCES), help="tolerance table (default: results/tolerances.json)")
    ap.add_argument("--report-dir", default=None, help="where report.md/json go (default: the first results folder)")
    run_notebooks.add_run_options(ap, mode="full", timeout=1800)
    ap.add_argument("--output", default=None, help="results folder for a run (default: nightly/<YYYY-MM-DD>, UTC)")
    ap.add_argument(
        "--part",
        choices=sorted(PARTS),
        help="one part of the full run, each under 20 minutes on one H100 or H200, into the same dated folder: "
        + "; ".join(f"{k}: {' '.join(v)}" for k, v in PARTS.items())
        + " (the next part's notebooks read the earlier parts' output there). Not with --pattern",
    )
    ap.add_argument(
        "--adopt",
        metavar="PART_DIR",
        help="make this folder's run (one --part's output) the reference for its notebooks: their files replace "
        "those in --baseline, whose summary keeps its other rows with their machine, date and commit",
    )
    args = ap.parse_args(argv)
    if args.adopt:
        try:
            done = adopt(Path(args.adopt), Path(args.baseline) if args.baseline else None)
        except NightlyError as e:
            print(f"nightly: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(f"nightly: {', '.join(done['adopted'])} from {args.adopt} now the reference in {done['reference']}")
        if done["failed"]:
            print(
                "nightly: not adopted, as they failed (the reference keeps their earlier copies): "
                + ", ".join(done["failed"])
            )
        if done["unfinished"]:  # its summary, written after each notebook: the machine was lost before the rest
            left = ", ".join(done["unfinished"])
            print(
                f"nightly: that run did not finish: {left} had not run (or not to the end) and keep their "
                "earlier copies"
            )
        print(
            "nightly: then bring the README's table up to date: tests/unit/test_readme_table.py names each figure it lacks"
        )
        return EXIT_OK
    if args.part:
        if args.pattern:
            print("nightly: error: --part and --pattern both choose the notebooks: give one", file=sys.stderr)
            return EXIT_USAGE
        args.pattern = list(PARTS[args.part])
    try:
        table = load_tolerances(args.tolerances)
        table["source"] = shown(args.tolerances)
        args.baseline = args.baseline or str(reference_for("cpu" if args.mode == "smoke" else "gpu"))
        baseline = load_results([args.baseline], "baseline")
        folders = [Path(f) for f in args.compare_only] if args.compare_only else [run(args)]
        results = load_results(folders, "results")
        if len(results["modes"]) > 1:
            raise NightlyError(f"{', '.join(map(str, folders))}: results of different modes ({results['modes']})")
        if baseline["modes"] and results["modes"] and baseline["modes"] != results["modes"]:
            raise NightlyError(
                f"{args.baseline} holds a {baseline['modes'][0]}-mode run, the results a "
                f"{results['modes'][0]}-mode one: their numbers cannot be compared"
            )
        report = compare(baseline, results, table, args.pattern)
        md, _ = write_report(report, args.report_dir or folders[0])
    except NightlyError as e:
        print(f"nightly: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"nightly: {report['verdict']} (exit {report['exit_code']}); report: {md}")
    for line in (
        [f"  failed: {n}" for n in report["failures"]]
        + [f"  regressed: {r}" for r in report["regressions"]]
        + [f"  not comparable (other core count or clip): {r}" for r in report["not_comparable"]]
    ):
        print(line)
    return report["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
