"""Nightly validation: fake baseline and run folders (no notebooks run), the exit codes and the report."""

import json
import re
from pathlib import Path

import pytest

from playbook_utils.tools import nightly
from playbook_utils.tools.results import machine_slug

ROOT = Path(__file__).resolve().parents[2]

# Synthetic headlines in the shape notebooks 00 and 10 write; the numbers mean nothing.
BASE = {
    "00_hardware_and_environment": {
        "gpu": "Test GPU",
        "nvdec_engines": 2,
        "nvdec_codecs": "h264, hevc",
        "disk_cold_mb_s": 1000.0,
        "h2d_pinned_gb_s": 20.0,
    },
    "10_pyav": {
        "cpu_sequential_fps": 1000.0,
        "cpu_sparse_fps": 200.0,
        "gpu_sequential_fps": None,
        "thread_auto_speedup": 2.0,
        "seek_first_frame_wrong": "3 of 3",
        "exact": True,
    },
}


def _folder(
    path,
    headlines,
    mode="full",
    status=None,
    environment=None,
    cpu="Test CPU x4",
    libraries=None,
    gpu="Test GPU",
):
    """A results folder as the runner writes it: summary.json plus one <stem>.json per notebook."""
    path.mkdir(parents=True, exist_ok=True)
    rows = []
    for stem, head in headlines.items():
        failed = (status or {}).get(stem)
        rows.append(
            {
                "notebook": f"{stem}.ipynb",
                "status": "failed" if failed else "passed",
                "error": failed,
                "seconds": 1.0,
                "headline": head,
                "skipped": [],
            }
        )
        doc = {"notebook": stem, "headline": head, "skipped": []}
        if environment and stem.startswith("00_"):
            doc["environment"] = environment
        (path / f"{stem}.json").write_text(json.dumps(doc))
    machine = {
        "gpu": gpu,
        "cpu": cpu,
        "date_utc": "2000-01-01 00:00",
        **({"libraries": libraries} if libraries else {}),
    }
    (path / "summary.json").write_text(json.dumps({"mode": mode, "machine": machine, "notebooks": rows}))
    return path


def _changed(**edits):
    """BASE with edits given as stem__metric=value."""
    heads = json.loads(json.dumps(BASE))
    for key, value in edits.items():
        stem, metric = key.split("__")
        stem = next(s for s in heads if s.startswith(stem))
        if value is _DROP:
            heads[stem].pop(metric)
        else:
            heads[stem][metric] = value
    return heads


_DROP = object()


def _compare(tmp_path, run_heads, base_heads=BASE, *extra, **folder_kw):
    base = _folder(tmp_path / "base", base_heads)
    run = _folder(tmp_path / "run", run_heads, **folder_kw)
    code = nightly.main(["--compare-only", str(run), "--baseline", str(base), *extra])
    report = json.loads((run / "report.json").read_text()) if (run / "report.json").exists() else None
    return code, report, run


def _verdicts(report):
    return {
        (nb["notebook"].split("_")[0], m["metric"]): m["verdict"] for nb in report["notebooks"] for m in nb["metrics"]
    }


def _sections(md: str) -> dict:
    """report.md's lines by section: {'': the head, '10_pyav.ipynb': that notebook's lines, ...}."""
    sections, name = {"": []}, ""
    for line in md.splitlines():
        if line.startswith("## "):
            name = line[3:]
            sections[name] = []
        else:
            sections[name].append(line)
    return sections


def _table(lines: list[str]) -> dict:
    """{first cell: the other cells} of the markdown table rows among `lines` (the header row's too)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("| ")]
    return {r[0]: r[1:] for r in rows}


def _title_says(md: str, report: dict) -> bool:
    """report.md's first line names the report's verdict and exit status, and no other number."""
    title = md.splitlines()[0]
    return report["verdict"] in title and re.findall(r"\d+", title) == [str(report["exit_code"])]


def _rule(metric, stem="10_pyav", value=1.0):
    return nightly.rule_for(nightly.load_tolerances(), stem, metric, value)


def test_identical_results_pass(tmp_path):
    code, report, run = _compare(tmp_path, BASE)
    assert code == 0
    assert report["verdict"] == "passed" and report["regressions"] == [] and report["failures"] == []
    assert set(_verdicts(report).values()) == {"ok"}
    md = (run / "report.md").read_text()
    row = _table(_sections(md)["10_pyav.ipynb"])["cpu_sequential_fps"]  # baseline, now, change, tolerance, verdict
    assert _title_says(md, report) and row[:2] == ["1,000", "1,000"] and row[-1] == "ok"


def test_planted_regressions_exit_2_and_are_named(tmp_path):
    heads = _changed(**{"10__cpu_sequential_fps": BASE["10_pyav"]["cpu_sequential_fps"] * 0.5, "10__exact": False})
    code, report, run = _compare(tmp_path, heads)
    assert code == 2
    assert sorted(report["regressions"]) == ["10_pyav.ipynb: cpu_sequential_fps", "10_pyav.ipynb: exact"]
    v = _verdicts(report)
    assert v[("10", "cpu_sequential_fps")] == "REGRESSION" and v[("10", "exact")] == "REGRESSION"
    assert v[("10", "cpu_sparse_fps")] == "ok"
    md = (run / "report.md").read_text()
    assert _title_says(md, report)
    row = _table(_sections(md)["10_pyav.ipynb"])["cpu_sequential_fps"]  # baseline, now, change, tolerance, verdict
    assert row[:3] == ["1,000", "500", "-50.0%"] and row[-1] == "**REGRESSION**"


def test_within_tolerance_passes_and_just_beyond_fails(tmp_path):
    rel = _rule("cpu_sequential_fps")["rel"]
    assert 0 < rel < 1
    base = BASE["10_pyav"]["cpu_sequential_fps"]
    code, report, _ = _compare(tmp_path / "a", _changed(**{"10__cpu_sequential_fps": base * (1 - rel / 2)}))
    assert code == 0 and _verdicts(report)[("10", "cpu_sequential_fps")] == "ok"
    code, report, _ = _compare(tmp_path / "b", _changed(**{"10__cpu_sequential_fps": base * (1 - rel * 1.5)}))
    assert code == 2 and _verdicts(report)[("10", "cpu_sequential_fps")] == "REGRESSION"


def test_a_rate_timed_on_another_clip_is_not_judged_but_reported(tmp_path):
    """Full mode times 10-14 on the realistic 8 Mbit/s clip since 12-05; a reference timed on the light one must
    not call the slower rate a regression. The same halved rate on the same clip is one (test above)."""
    base = _changed(**{"10__rates_clip": "h264_1080p_gop30_light"})
    heads = _changed(
        **{
            "10__rates_clip": "h264_1080p_gop30_8mbps",
            "10__cpu_sequential_fps": BASE["10_pyav"]["cpu_sequential_fps"] * 0.5,
            "10__exact": False,
        }
    )
    code, report, run = _compare(tmp_path, heads, base)
    v = _verdicts(report)
    assert v[("10", "cpu_sequential_fps")] == "not comparable" and v[("10", "rates_clip")] == "changed"
    assert v[("10", "exact")] == "REGRESSION" and report["not_comparable"] == [
        "10_pyav.ipynb: cpu_sequential_fps",
        "10_pyav.ipynb: cpu_sparse_fps",
    ]
    change = _table(_sections((run / "report.md").read_text())["10_pyav.ipynb"])["cpu_sequential_fps"][2]
    assert 0 <= change.find("h264_1080p_gop30_8mbps") < change.find("h264_1080p_gop30_light")  # now's, then the base's
    # only the GPU's clip changed (14 times the CPU on VP9, the GPU on H.264): its CPU rates are still judged
    gpu_base = _changed(
        **{"10__rates_clip": "vp9.webm", "10__gpu_rates_clip": "h264_light.mp4", "10__gpu_sequential_fps": 500.0}
    )
    gpu_run = _changed(
        **{"10__rates_clip": "vp9.webm", "10__gpu_rates_clip": "h264_8mbps.mp4", "10__gpu_sequential_fps": 200.0}
    )
    gpu_run["10_pyav"]["cpu_sequential_fps"] *= 0.5
    _, report, _ = _compare(tmp_path / "gpu", gpu_run, gpu_base)
    v = _verdicts(report)
    assert v[("10", "gpu_sequential_fps")] == "not comparable" and v[("10", "cpu_sequential_fps")] == "REGRESSION"
    # the same clip on both sides: judged
    same = _changed(**{"10__rates_clip": "h264_1080p_gop30_light"})
    same["10_pyav"]["cpu_sequential_fps"] *= 0.5
    code, report, _ = _compare(tmp_path / "same", same, base)
    assert _verdicts(report)[("10", "cpu_sequential_fps")] == "REGRESSION" and code == 2


def test_a_cpu_rate_measured_on_fewer_cores_is_not_judged_but_reported(tmp_path):
    """A run on fewer cores than the baseline's: its CPU rates are not comparable with a baseline measured on more.
    The same halved rate on the same core count is a regression (test above)."""
    heads = _changed(
        **{
            "10__cpu_sequential_fps": BASE["10_pyav"]["cpu_sequential_fps"] * 0.5,
            "10__exact": False,
            "00__h2d_pinned_gb_s": BASE["00_hardware_and_environment"]["h2d_pinned_gb_s"] * 0.5,
        }
    )
    code, report, run = _compare(tmp_path, heads, BASE, cpu="Test CPU x2")
    v = _verdicts(report)
    assert v[("10", "cpu_sequential_fps")] == "not comparable" and v[("10", "cpu_sparse_fps")] == "not comparable"
    # what does not follow the cores is still judged: exactness, and a copy bandwidth
    assert v[("10", "exact")] == "REGRESSION" and v[("00", "h2d_pinned_gb_s")] == "REGRESSION"
    assert code == 2 and sorted(report["regressions"]) == [
        "00_hardware_and_environment.ipynb: h2d_pinned_gb_s",
        "10_pyav.ipynb: exact",
    ]
    assert report["not_comparable"] == ["10_pyav.ipynb: cpu_sequential_fps", "10_pyav.ipynb: cpu_sparse_fps"]
    lines = _sections((run / "report.md").read_text())["10_pyav.ipynb"]
    change = _table(lines)["cpu_sequential_fps"][2]  # the change, with the cores now and in the baseline
    assert re.findall(r"-?[\d.]+%?", change) == ["-50.0%", "2", "4"]
    cores = [line for line in lines if line.startswith("- ")]  # the notebook's note: baseline's cores, then now's
    assert len(cores) == 1 and re.findall(r"\b\d+\b", cores[0]) == ["4", "2"]
    assert nightly.cores_of({"cpu": "Intel(R) Xeon(R) Processor x16"}) == 16
    assert nightly.cores_of({"cpu": "unknown"}) is None and nightly.cores_of(None) is None
    # the runner writes the count as an int; the cpu line is read only for summaries made before it did
    assert nightly.cores_of({"cpu": "Intel(R) Xeon(R) Processor x16", "cores": 8}) == 8


def test_an_improvement_is_not_a_regression(tmp_path):
    base = BASE["10_pyav"]["cpu_sequential_fps"]
    code, report, _ = _compare(tmp_path, _changed(**{"10__cpu_sequential_fps": base * 3}))
    assert code == 0 and _verdicts(report)[("10", "cpu_sequential_fps")] == "better"


def test_directions_near_lower_and_absolute_bands():
    higher, lower = {"direction": "higher", "rel": 0.2}, {"direction": "lower", "abs": 10}
    near, equal = {"direction": "near", "rel": 0.25}, {"direction": "equal"}
    assert nightly.compare_value(100.0, 70.0, higher)[0] == "REGRESSION"
    assert nightly.compare_value(40.0, 49.0, lower)[0] == "ok"  # +9 points, band 10 points
    assert nightly.compare_value(40.0, 55.0, lower)[0] == "REGRESSION"
    assert nightly.compare_value(40.0, 20.0, lower)[0] == "better"
    assert nightly.compare_value(4.0, 6.0, near)[0] == "REGRESSION"  # no better side: up is flagged too
    assert nightly.compare_value(4.0, 4.5, near)[0] == "ok"
    assert nightly.compare_value(True, 1, equal)[0] == "REGRESSION"  # a bool is not a count
    assert nightly.compare_value(7, 7.0, equal)[0] == "ok"
    assert nightly.compare_value(False, True, higher)[0] == "better"  # a ceiling now saturated
    assert nightly.compare_value(True, False, higher)[0] == "REGRESSION"
    assert nightly.compare_value(None, 3.0, higher)[0] == "new"
    assert nightly.compare_value(3.0, None, higher)[0] == "MISSING"
    assert nightly.compare_value("a", "b", {"direction": "info"})[0] == "changed"


def test_committed_rules_pick_the_intended_direction():
    assert _rule("exact")["direction"] == "equal"
    assert _rule("all_exact", "20_decode_benchmarks")["direction"] == "equal"
    assert _rule("gpu_sequential_fps")["direction"] == "higher"
    assert _rule("harness_overhead_pct", "20_decode_benchmarks")["direction"] == "info"  # None where not readable
    assert _rule("best_sparse_speedup_short_gop", "20_decode_benchmarks")["direction"] == "higher"
    assert _rule("best_sequential", "20_decode_benchmarks", "x")["direction"] == "info"
    assert _rule("some_new_number")["direction"] == "near"  # unlisted number: either way
    assert _rule("some_new_label", value="x")["direction"] == "equal"


def test_missing_metric_regresses_new_metric_does_not(tmp_path):
    code, report, _ = _compare(tmp_path / "a", _changed(**{"10__thread_auto_speedup": _DROP}))
    assert code == 2 and report["regressions"] == ["10_pyav.ipynb: thread_auto_speedup"]
    assert _verdicts(report)[("10", "thread_auto_speedup")] == "MISSING"
    code, report, _ = _compare(tmp_path / "b", _changed(**{"10__brand_new_fps": 5.0}))
    assert code == 0 and _verdicts(report)[("10", "brand_new_fps")] == "new"


def test_a_measured_number_that_is_none_now_is_missing(tmp_path):
    code, report, _ = _compare(tmp_path, _changed(**{"00__h2d_pinned_gb_s": None}))
    assert code == 2 and _verdicts(report)[("00", "h2d_pinned_gb_s")] == "MISSING"


def test_a_baseline_notebook_not_run_regresses_unless_pattern_leaves_it_out(tmp_path):
    only_00 = {"00_hardware_and_environment": BASE["00_hardware_and_environment"]}
    code, report, _ = _compare(tmp_path / "a", only_00)
    assert code == 2 and report["regressions"] == ["10_pyav.ipynb: not run"]
    code, report, _ = _compare(tmp_path / "b", only_00, BASE, "--pattern", "00*")
    assert code == 0 and [nb["notebook"] for nb in report["notebooks"]] == ["00_hardware_and_environment.ipynb"]


def test_pattern_leaves_out_a_notebook_only_copied_into_the_run_folder(tmp_path):
    # a folder that ran 10 but also holds 00's results (copied in as an input) reports 10 alone
    code, report, _ = _compare(tmp_path, BASE, BASE, "--pattern", "10_")
    assert code == 0 and [nb["notebook"] for nb in report["notebooks"]] == ["10_pyav.ipynb"]


def test_failed_notebook_exits_1_even_with_regressions(tmp_path):
    heads = _changed(**{"10__exact": False})
    planted = "RuntimeError: planted"
    code, report, run = _compare(tmp_path, heads, BASE, status={"10_pyav": planted})
    assert code == 1
    assert report["failures"] == ["10_pyav.ipynb"] and report["regressions"] == ["10_pyav.ipynb: exact"]
    assert planted in "\n".join(_sections((run / "report.md").read_text())["10_pyav.ipynb"])  # its error, quoted


def test_several_partial_folders_are_merged(tmp_path):
    base = _folder(tmp_path / "base", BASE)
    a = _folder(tmp_path / "a", {"00_hardware_and_environment": BASE["00_hardware_and_environment"]})
    b = _folder(tmp_path / "b", {"10_pyav": BASE["10_pyav"]})
    out = tmp_path / "report"
    assert nightly.main(["--compare-only", str(a), str(b), "--baseline", str(base), "--report-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert len(report["notebooks"]) == 2 and report["run"]["folders"] == [str(a), str(b)]
    assert not (a / "report.json").exists()


def test_environment_stamps_head_the_report(tmp_path):
    env = {
        "python": "3.99.0",
        "gpu": {"driver": "999.1", "cuda_driver": "99.0"},
        "libraries": {"av": {"importable": True, "version": "0.0.1", "error": None}},
    }
    code, report, run = _compare(tmp_path, BASE, environment=env)
    assert code == 0
    assert report["run"]["driver"] == "999.1" and report["run"]["libraries"] == {"av": "0.0.1"}
    assert report["baseline"]["driver"] is None
    stamps = _table(_sections((run / "report.md").read_text())[""])  # {key: [the baseline's, this run's]}
    assert stamps["driver"] == ["-", "999.1"] and stamps["libraries"][1].split() == ["av", "0.0.1"]
    # without notebook 00: the versions the runner stamped in summary.json, on both sides
    base = _folder(tmp_path / "base2", {"10_pyav": BASE["10_pyav"]}, libraries={"av": "19.0.2"})
    run = _folder(tmp_path / "run2", {"10_pyav": BASE["10_pyav"]}, libraries={"av": "18.1.0"})
    assert nightly.main(["--compare-only", str(run), "--baseline", str(base)]) == 0
    stamps = _table(_sections((run / "report.md").read_text())[""])
    assert [s.split() for s in stamps["libraries"]] == [["av", "19.0.2"], ["av", "18.1.0"]]


def test_usage_errors_exit_3_and_name_the_file(tmp_path, capsys):
    run, nope = _folder(tmp_path / "run", BASE), tmp_path / "nope"
    assert nightly.main(["--compare-only", str(run), "--baseline", str(nope)]) == 3
    assert str(nope) in capsys.readouterr().err

    base = _folder(tmp_path / "base", BASE)
    (base / "10_pyav.json").write_text("{not json")
    assert nightly.main(["--compare-only", str(run), "--baseline", str(base)]) == 3
    err = capsys.readouterr().err
    assert str(base / "10_pyav.json") in err

    base = _folder(tmp_path / "base2", BASE)
    bad = tmp_path / "tolerances.json"
    bad.write_text(json.dumps({"rules": [{"metric": "*", "direction": "sideways"}]}))
    assert nightly.main(["--compare-only", str(run), "--baseline", str(base), "--tolerances", str(bad)]) == 3
    err = capsys.readouterr().err  # the file, and the rule's bad direction
    assert str(bad) in err and "sideways" in err

    smoke = _folder(tmp_path / "smoke", BASE, mode="smoke")
    assert nightly.main(["--compare-only", str(smoke), "--baseline", str(base)]) == 3
    err = capsys.readouterr().err  # the baseline, and the two modes
    assert str(base) in err and re.findall(r"(\w+)-mode", err) == ["full", "smoke"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert nightly.main(["--compare-only", str(empty), "--baseline", str(base)]) == 3
    assert str(empty) in capsys.readouterr().err


def test_committed_baseline_compared_with_itself_passes(tmp_path):
    """The committed results/h200 is readable in the format nightly expects, and all its rules apply."""
    baseline = ROOT / "results" / "h200"
    code = nightly.main(["--compare-only", str(baseline), "--baseline", str(baseline), "--report-dir", str(tmp_path)])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    expected = {p.stem for p in baseline.glob("[0-9][0-9]_*.json") if "headline" in json.loads(p.read_text())}
    assert expected and {Path(nb["notebook"]).stem for nb in report["notebooks"]} == expected
    metrics = [m for nb in report["notebooks"] for m in nb["metrics"]]
    verdicts = {m["verdict"] for m in metrics}
    assert "ok" in verdicts and verdicts <= {"ok", "same"}  # 'same': an info metric (a label) left unjudged
    assert report["baseline"]["gpu"] and report["baseline"]["driver"]
    assert not (baseline / "report.json").exists()


NB_GOOD = """import json, pathlib
pathlib.Path(OUTPUT_DIR, "90_good.json").write_text(json.dumps({"headline": {"answer": 42}, "skipped": []}))"""


@pytest.mark.slow
@pytest.mark.notebook
def test_run_split_over_two_calls_accumulates_and_fails_on_a_broken_notebook(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    def _write_nb(path, body):
        params = new_code_cell('SMOKE = True\nDEVICE = "auto"\nVIDEO_DIR = None\nOUTPUT_DIR = "."')
        params.metadata["tags"] = ["parameters"]
        nb = new_notebook(cells=[params, new_code_cell(body)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, path)

    nbs, out = tmp_path / "nbs", tmp_path / "nightly"
    nbs.mkdir()
    _write_nb(nbs / "90_good.ipynb", NB_GOOD)
    _write_nb(nbs / "91_broken.ipynb", "raise RuntimeError('planted')")
    base = _folder(tmp_path / "base", {"90_good": {"answer": 42}})
    common = ["--notebooks", str(nbs), "--output", str(out), "--baseline", str(base)]
    assert nightly.main(common + ["--pattern", "90"]) == 0
    assert nightly.main(common + ["--pattern", "91"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "full"
    assert {r["notebook"]: r["status"] for r in summary["notebooks"]} == {
        "90_good.ipynb": "passed",
        "91_broken.ipynb": "failed",
    }
    kept = next(r for r in summary["notebooks"] if r["notebook"] == "90_good.ipynb")
    assert kept["machine"]["cpu"] == summary["machine"]["cpu"]  # a kept row carries the machine it ran on
    broken = next(r for r in summary["notebooks"] if r["notebook"] == "91_broken.ipynb")
    assert broken["error"] == "RuntimeError: planted"
    assert nightly.main(["--compare-only", str(out), "--baseline", str(base)]) == 1
    ran = [line for line in _sections((out / "report.md").read_text())["91_broken.ipynb"] if line.startswith("Run: ")]
    assert [line.split("; ")[0] for line in ran] == [f"Run: failed: {broken['error']}"]  # its error, quoted


def test_a_regression_planted_in_the_committed_results_fails(tmp_path):
    """The committed H200 results with one measured number halved: the comparison must exit 2 and name it."""
    import shutil

    baseline = ROOT / "results" / "h200"
    run = tmp_path / "run"
    run.mkdir()
    for p in baseline.glob("*.json"):
        shutil.copy(p, run / p.name)
    doc = json.loads((run / "00_hardware_and_environment.json").read_text())
    doc["headline"]["h2d_pinned_gb_s"] = doc["headline"]["h2d_pinned_gb_s"] / 2
    (run / "00_hardware_and_environment.json").write_text(json.dumps(doc))
    code = nightly.main(["--compare-only", str(run), "--baseline", str(baseline), "--report-dir", str(tmp_path)])
    assert code == 2
    report = json.loads((tmp_path / "report.json").read_text())
    bad = [
        (nb["notebook"], m["metric"])
        for nb in report["notebooks"]
        for m in nb["metrics"]
        if m["verdict"] == "REGRESSION"
    ]
    assert [m for _, m in bad] == ["h2d_pinned_gb_s"]
    rows = _table(_sections((tmp_path / "report.md").read_text())[bad[0][0]])
    assert rows["h2d_pinned_gb_s"][-1] == "**REGRESSION**"


def test_nested_headline_values_are_compared_leaf_by_leaf(tmp_path):
    """A dict metric (20's ceiling per clip, 21's best loader per clip) is judged per number, not as one blob."""
    base, run = tmp_path / "base", tmp_path / "run"
    for folder, h264, loader in ((base, 2900, "pynvvideocodec x16 threads"), (run, 2800, "torchcodec x16 threads")):
        folder.mkdir()
        (folder / "20_decode_benchmarks.json").write_text(
            json.dumps(
                {
                    "headline": {
                        "nvdec_ceiling_fps": {"h264.mp4": h264, "hevc.mp4": 5000},
                        "best_gpu_loader": {"h264.mp4": {"loader": loader, "fps": 2000, "pct_of_ceiling": 69.0}},
                    }
                }
            )
        )
    # within tolerance, and a different winning loader is reported, not judged
    assert nightly.main(["--compare-only", str(run), "--baseline", str(base), "--report-dir", str(tmp_path)]) == 0
    doc = json.loads((run / "20_decode_benchmarks.json").read_text())
    doc["headline"]["best_gpu_loader"]["h264.mp4"]["pct_of_ceiling"] = 40.0
    (run / "20_decode_benchmarks.json").write_text(json.dumps(doc))
    assert nightly.main(["--compare-only", str(run), "--baseline", str(base), "--report-dir", str(tmp_path)]) == 2
    report = json.loads((tmp_path / "report.json").read_text())
    assert [m["metric"] for nb in report["notebooks"] for m in nb["metrics"] if m["verdict"] == "REGRESSION"] == [
        "best_gpu_loader.h264.mp4.pct_of_ceiling"
    ]


@pytest.mark.slow
@pytest.mark.notebook
def test_the_full_run_in_parts_covers_every_notebook_once_and_stamps_the_code(tmp_path, capsys, monkeypatch):
    """31: the parts of the H200 run: every notebook in exactly one part, a notebook that reads another's output
    in its part or a later one (22 after 20 and 21), --part with --pattern refused, and the part's rows stamped with the commit."""
    import fnmatch

    names = sorted(p.name for p in (nightly.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    owner = {n: [k for k, pats in nightly.PARTS.items() if any(fnmatch.fnmatch(n, p) for p in pats)] for n in names}
    assert all(len(parts) == 1 for parts in owner.values()), owner
    reads = owner["22_choosing_a_loader.ipynb"][0]  # 22 runs in the part of 20 and 21, or in a later one
    assert reads >= owner["20_decode_benchmarks.ipynb"][0] and reads >= owner["21_training_loader_benchmarks.ipynb"][0]
    assert nightly.main(["--part", "1", "--pattern", "0*"]) == nightly.EXIT_USAGE
    err = capsys.readouterr().err  # the two options that both choose the notebooks
    assert "--part" in err and "--pattern" in err
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    params = new_code_cell('SMOKE = True\nDEVICE = "auto"\nVIDEO_DIR = None\nOUTPUT_DIR = "."')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(NB_GOOD.replace("90_good", "00_good"))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbs / "00_good.ipynb")
    monkeypatch.setenv("PLAYBOOK_COMMIT", "abc123")
    base = _folder(tmp_path / "base", {"00_good": {"answer": 42}})
    assert nightly.main(["--part", "1", "--notebooks", str(nbs), "--output", str(out), "--baseline", str(base)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    stamp = [line for line in (out / "summary.md").read_text().splitlines() if line.startswith("Machine:")]
    assert summary["machine"]["commit"] == "abc123" and [line.split()[-1] for line in stamp] == ["abc123"]


def test_a_part_adopted_replaces_its_notebooks_files_and_keeps_the_other_rows_with_their_machine(tmp_path, capsys):
    """31: a part run in one session becomes the reference for its notebooks; the other notebooks' rows and files
    stay, each row stamped with the machine and date it ran on."""
    ref = _folder(tmp_path / "ref", BASE)
    (ref / "10_old_figure.png").write_bytes(b"old")
    (ref / "00_figure.png").write_bytes(b"kept")
    part = _folder(tmp_path / "part", {"10_pyav": {**BASE["10_pyav"], "cpu_sequential_fps": 1234.0}})
    summary = json.loads((part / "summary.json").read_text())
    summary["machine"].update(date_utc="2000-02-02 00:00", commit="abc123")
    (part / "summary.json").write_text(json.dumps(summary))
    (part / "10_new_figure.png").write_bytes(b"new")
    (part / "10_bench").mkdir()
    (part / "10_bench" / "bench.csv").write_text("x\n")
    carried = json.loads((part / "summary.json").read_text())  # an earlier part's row, its files not here
    carried["notebooks"].append({**carried["notebooks"][0], "notebook": "00_hardware_and_environment.ipynb"})
    (part / "summary.json").write_text(json.dumps(carried))
    assert nightly.main(["--adopt", str(part), "--baseline", str(ref)]) == 0
    said = capsys.readouterr().out.splitlines()  # first, the notebooks adopted
    assert "00_hardware_and_environment" not in said[0] and (ref / "00_hardware_and_environment.json").exists()
    assert said[0].split()[1] == "10_pyav.ipynb"
    assert not (ref / "10_old_figure.png").exists() and (ref / "10_new_figure.png").read_bytes() == b"new"
    assert (ref / "10_bench" / "bench.csv").exists() and (ref / "00_figure.png").read_bytes() == b"kept"
    assert json.loads((ref / "10_pyav.json").read_text())["headline"]["cpu_sequential_fps"] == 1234.0
    rows = {r["notebook"]: r for r in json.loads((ref / "summary.json").read_text())["notebooks"]}
    assert rows["10_pyav.ipynb"]["machine"]["commit"] == "abc123"
    assert rows["00_hardware_and_environment.ipynb"]["machine"]["date_utc"] == "2000-01-01 00:00"
    text = (ref / "summary.md").read_text()
    stamped = [line for line in text.splitlines() if line.startswith("00_hardware_and_environment.ipynb")]
    assert len(stamped) == 1 and "2000-01-01" in stamped[0]  # the kept row, with the date it ran on
    # a notebook that failed in the part keeps its earlier copy (13's kernel died on the H200, 12-05)
    broken = _folder(
        tmp_path / "broken",
        {"00_hardware_and_environment": {}, "11_decord": BASE.get("11_decord", {})},
        status={"00_hardware_and_environment": "DeadKernelError"},
    )
    (broken / "00_figure.png").write_bytes(b"from the failed run")
    assert nightly.main(["--adopt", str(broken), "--baseline", str(ref)]) == 0
    said = capsys.readouterr().out.splitlines()  # the failed one named on a line of its own, not as adopted
    failed = [line for line in said if "00_hardware_and_environment.ipynb" in line]
    assert len(failed) == 1 and "11_decord.ipynb" not in failed[0] and (ref / "00_figure.png").read_bytes() == b"kept"
    rows = {r["notebook"]: r for r in json.loads((ref / "summary.json").read_text())["notebooks"]}
    assert rows["00_hardware_and_environment.ipynb"]["status"] == "passed"
    # a part where nothing passed adopts nothing and leaves the reference's summary (and its machine) as it was
    summary_before = (ref / "summary.json").read_text()
    none = _folder(tmp_path / "none", {"00_hardware_and_environment": {}}, status={"00_hardware_and_environment": "x"})
    assert nightly.main(["--adopt", str(none), "--baseline", str(ref)]) == nightly.EXIT_USAGE
    assert str(none) in capsys.readouterr().err and (ref / "summary.json").read_text() == summary_before
    smoke = _folder(tmp_path / "smoke", {"10_pyav": BASE["10_pyav"]}, mode="smoke")
    assert nightly.main(["--adopt", str(smoke), "--baseline", str(ref)]) == nightly.EXIT_USAGE
    err = capsys.readouterr().err  # the part's mode, then the reference's
    assert re.findall(r"(\w+)-mode", err) == ["smoke", "full"] and (ref / "10_new_figure.png").exists()


def test_a_run_lost_mid_part_keeps_the_finished_notebooks_rows_and_adopts_only_those(tmp_path, monkeypatch, capsys):
    """31: three H200 runs were lost with their machine mid-part (12-04), and with them the rows of notebooks that
    had finished. The runner writes its summary after each notebook, naming those still to run; `--adopt` takes the
    finished ones and says which kept their earlier copies."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    from playbook_utils.tools import run_notebooks

    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    for stem in ("10_pyav", "11_decord"):
        nbformat.write(new_notebook(cells=[new_code_cell("pass")]), nbs / f"{stem}.ipynb")

    ran = []

    def run_here(nb, output, args, caps, machine):  # the first finishes; the machine is lost in the second
        if ran:
            raise KeyboardInterrupt("the machine went away")
        ran.append(nb.name)
        stem = nb.name.removesuffix(".ipynb")
        (output / f"{stem}.json").write_text(json.dumps({"headline": {"cpu_sequential_fps": 999.0}}))
        (output / nb.name).write_text("{}")
        return {"notebook": nb.name, "status": "passed", "error": None, "seconds": 2.0,
                "headline": {"cpu_sequential_fps": 999.0}, "skipped": []}  # fmt: skip

    monkeypatch.setattr(run_notebooks, "_run_here", run_here)
    with pytest.raises(KeyboardInterrupt):
        run_notebooks.main(["--mode", "full", "--notebooks", str(nbs), "--output", str(out)])
    first, second = ran[0], ({"10_pyav.ipynb", "11_decord.ipynb"} - set(ran)).pop()
    summary = json.loads((out / "summary.json").read_text())
    assert [r["notebook"] for r in summary["notebooks"]] == [first]
    assert summary["unfinished"] == [second] and second in (out / "summary.md").read_text()  # named as still to run
    ref = _folder(tmp_path / "ref", BASE, gpu=summary["machine"].get("gpu"))  # the same machine as the run's
    (ref / second).write_text("earlier")
    assert nightly.main(["--adopt", str(out), "--baseline", str(ref)]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if second in line]  # named apart from the adopted
    assert len(said) == 1 and first not in said[0]
    stem = first.removesuffix(".ipynb")
    assert json.loads((ref / f"{stem}.json").read_text())["headline"]["cpu_sequential_fps"] == 999.0
    assert (ref / second).read_text() == "earlier"


def test_a_part_lost_and_run_again_keeps_the_rows_of_the_parts_before_it(tmp_path, monkeypatch):
    """A review of 12-05's change: a part lost mid-run left a summary of its own rows only, and its rerun moved
    that summary over previous/, where the earlier parts' rows were: they were gone. The summary written on the
    way keeps them apart (`earlier`), and the rerun's merge takes them."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    from playbook_utils.tools import run_notebooks

    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    for stem in ("00_a", "20_b", "21_c"):
        nbformat.write(new_notebook(cells=[new_code_cell("pass")]), nbs / f"{stem}.ipynb")
    lose = {"on": False, "ran": []}

    def run_here(nb, output, args, caps, machine):
        if lose["on"] and lose["ran"]:
            raise KeyboardInterrupt("the machine went away")
        lose["ran"].append(nb.name)
        return {"notebook": nb.name, "status": "passed", "error": None, "seconds": 1.0, "headline": {}, "skipped": []}

    monkeypatch.setattr(run_notebooks, "_run_here", run_here)
    base = _folder(tmp_path / "base", {"00_a": {}})
    common = ["--mode", "full", "--notebooks", str(nbs), "--output", str(out), "--baseline", str(base)]
    nightly.main([*common, "--pattern", "00*"])  # part 1
    lose.update(on=True, ran=[])
    with pytest.raises(KeyboardInterrupt):
        nightly.main([*common, "--pattern", "2*"])  # part 2, lost in its second notebook
    assert [r["notebook"] for r in json.loads((out / "summary.json").read_text())["earlier"]] == ["00_a.ipynb"]
    lose.update(on=False, ran=[])
    nightly.main([*common, "--pattern", "2*"])  # part 2 again, to its end
    names = [r["notebook"] for r in json.loads((out / "summary.json").read_text())["notebooks"]]
    assert names == ["00_a.ipynb", "20_b.ipynb", "21_c.ipynb"]


def test_a_part_goes_to_its_machines_reference_and_never_into_another_machines(tmp_path, monkeypatch, capsys):
    # 58: an H100's run makes results/h100 (the first time too), and an H200's reference takes no H100 part
    h100 = _folder(tmp_path / "h100-part", BASE, gpu="NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(nightly, "machine_reference", lambda gpu: tmp_path / "results" / machine_slug(gpu))
    assert nightly.main(["--adopt", str(h100)]) == 0
    made = json.loads((tmp_path / "results" / "h100" / "summary.json").read_text())
    assert made["machine"]["gpu"] == "NVIDIA H100 80GB HBM3" and len(made["notebooks"]) == len(BASE)
    h200 = _folder(tmp_path / "h200-ref", BASE, gpu="NVIDIA H200")
    before = (h200 / "summary.json").read_text()
    assert nightly.main(["--adopt", str(h100), "--baseline", str(h200)]) == nightly.EXIT_USAGE
    assert (h200 / "summary.json").read_text() == before
