import json
import os
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from playbook_utils.tools import run_notebooks

pytestmark = pytest.mark.notebook


def _write_nb(path, body, requires=(), extra_params=""):
    params = new_code_cell('SMOKE = True\nDEVICE = "auto"\nVIDEO_DIR = None\nOUTPUT_DIR = "."' + extra_params)
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["playbook"] = {"requires": list(requires)}
    nbformat.write(nb, path)


def tally(line: str):
    """The runner's tally line ('1 passed, 2 failed in 12s (90 3%, 91 40%, 92 57%)') as (passed, failed, time taken,
    {notebook number: its share of the time in %})."""
    head, _, shares = line.partition(" (")
    passed, failed, took = re.fullmatch(r"(\d+) passed, (\d+) failed in (\S+)", head).groups()
    pairs = [share.split() for share in shares.rstrip(")").split(", ") if share]
    return int(passed), int(failed), took, {n: int(pct.rstrip("%")) for n, pct in pairs}


def md_table(lines: list[str]) -> dict:
    """{notebook: its cells} of summary.md's table."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("| ")]
    return {r[0]: r for r in rows[1:]}  # after the header


GOOD = """import json, pathlib
pathlib.Path(OUTPUT_DIR, "90_good.json").write_text(json.dumps(
    {"headline": {"smoke": SMOKE, "answer": 42}, "skipped": ["gpu part: no GPU"]}))"""


@pytest.mark.slow
def test_runner_runs_every_notebook_and_reports_failures(tmp_path, capsys):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD, requires=["cuda"])
    _write_nb(nbs / "91_broken.ipynb", "raise RuntimeError('planted')")
    _write_nb(nbs / "92_silent.ipynb", "x = 1")  # runs, but writes no results
    code = run_notebooks.main(["--notebooks", str(nbs), "--output", str(out)])
    assert code == 1
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["notebook"]: r for r in summary["notebooks"]}
    assert list(rows) == ["90_good.ipynb", "91_broken.ipynb", "92_silent.ipynb"]
    assert rows["90_good.ipynb"]["status"] == "passed"
    assert rows["90_good.ipynb"]["headline"] == {"smoke": True, "answer": 42}
    assert rows["90_good.ipynb"]["requires"] == ["cuda"]
    assert rows["91_broken.ipynb"]["status"] == "failed"
    assert rows["91_broken.ipynb"]["error"] == "RuntimeError: planted"  # the notebook's exception, type and message
    # no results written: failed, naming the JSON it did not write
    silent = out / "92_silent.json"
    assert rows["92_silent.ipynb"]["status"] == "failed" and not silent.exists()
    assert rows["92_silent.ipynb"]["error"].split()[-1] == silent.name
    # the library versions it ran with: in the summary's stamp, and as the constraints a baseline carries
    from playbook_utils.tools import setup_env

    assert summary["machine"]["libraries"] == setup_env.installed_versions()  # torch's among them: read below
    # and the media version the generated clips were made with (the nightly names a change of it), in every row too
    from playbook_utils.bench import media

    assert summary["machine"]["media_version"] == media.MEDIA_VERSION
    assert {r["machine"]["media_version"] for r in summary["notebooks"]} == {media.MEDIA_VERSION}
    assert (
        setup_env.read_constraints(out / "constraints.txt")["torch"]
        == f"torch=={summary['machine']['libraries']['torch'].split('+')[0]}"
    )
    md = (out / "summary.md").read_text().splitlines()
    table = md_table(md)  # a row per notebook: its status, its headline and what it skipped
    assert list(table) == list(rows) and [table[n][1].strip("*").split("*")[0] for n in table] == [
        "passed",
        "failed",
        "failed",
    ]
    assert "42" in table["90_good.ipynb"][3] and table["90_good.ipynb"][4] == "gpu part: no GPU"  # its skipped line
    assert [re.findall(r"\d+", line) for line in md if re.fullmatch(r"\d+ passed, \d+ failed", line)] == [["1", "2"]]
    assert (out / "90_good.ipynb").exists()
    # the console: a start line with the place in the run, a result line, a tally with the total time
    lines = capsys.readouterr().out.splitlines()
    starts = [line for line in lines if line.startswith("[")]
    assert starts == [
        f"[{k}/3] {stem} ... no time from an earlier run"
        for k, stem in enumerate(["90_good", "91_broken", "92_silent"], 1)
    ]
    ends = [line.split() for line in lines if line.split()[:1] in (["passed"], ["failed"])]
    assert [e[:2] for e in ends] == [["passed", "90_good"], ["failed", "91_broken"], ["failed", "92_silent"]]
    assert all(re.fullmatch(r"\d+s", e[3]) for e in ends)
    passed, failed, took, shares = tally(lines[-2])  # and each notebook's share of the time
    assert (passed, failed) == (1, 2) and re.fullmatch(r"\d+s", took) and list(shares) == ["90", "91", "92"]
    assert abs(sum(shares.values()) - 100) <= 2
    assert lines[-1].startswith("summary: ")


def test_durations_read_as_a_person_would_say_them():
    assert [run_notebooks.duration(s) for s in (0.4, 45, 80, 370.4, 3600, 3725)] == [
        "0s",
        "45s",
        "1m20s",
        "6m10s",
        "1h00m",
        "1h02m",
    ]


def test_runner_selects_by_pattern_and_passes_mode(tmp_path):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD)
    _write_nb(nbs / "91_broken.ipynb", "raise RuntimeError('must not run')")
    assert [p.name for p in run_notebooks.select(nbs, ["90*"])] == ["90_good.ipynb"]
    assert [p.name for p in run_notebooks.select(nbs, ["broken"])] == ["91_broken.ipynb"]
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--mode", "full", "--pattern", "90"]) == 0
    assert json.loads((out / "90_good.json").read_text())["headline"]["smoke"] is False
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--pattern", "nothing"]) == 2


@pytest.mark.slow
def test_a_cell_that_hangs_fails_its_notebook_and_the_run_goes_on(tmp_path):
    # 21 once hung for 20 minutes on a GPU machine: with a per-cell time limit the run records a failure and goes on
    import time

    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_hangs.ipynb", "import time\ntime.sleep(600)")
    _write_nb(nbs / "91_good.ipynb", GOOD.replace("90_good", "91_good"))
    start = time.perf_counter()
    code = run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--timeout", "3"])
    assert code == 1 and time.perf_counter() - start < 120
    rows = {r["notebook"]: r for r in json.loads((out / "summary.json").read_text())["notebooks"]}
    hung = rows["90_hangs.ipynb"]  # failed as timed out, after the limit given
    assert hung["status"] == "failed" and hung["error"].split(":")[0] == "CellTimeoutError"
    assert re.findall(r"\d+", hung["error"]) == ["3"]
    assert rows["91_good.ipynb"]["status"] == "passed"


CHECKS = """from playbook_utils.decoders import base
assert base.importable("json") == (True, None)   # checked in a child process, and recorded for the run"""
TRUSTS = """import json, pathlib
from playbook_utils.decoders import base
def no_check(name):
    raise AssertionError(f"{name} checked again")
base.env.check_import = no_check
pathlib.Path(OUTPUT_DIR, "91_trusts.json").write_text(json.dumps({"headline": {"json": base.importable("json")[0]}}))"""


def test_a_library_import_is_checked_once_per_run_not_once_per_notebook(tmp_path):
    from playbook_utils.decoders import base

    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_checks.ipynb", CHECKS + "\n" + GOOD.replace("90_good", "90_checks"))
    _write_nb(nbs / "91_trusts.ipynb", TRUSTS)
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out)]) == 0
    assert json.loads((out / "91_trusts.json").read_text())["headline"] == {"json": True}
    assert (out / "logs" / "imports-checked.txt").read_text().split("\t")[0] == "json"
    assert base.RECORD_ENV not in os.environ  # the record was the run's: nothing after it trusts it
    # a new run starts a new record: its first notebook checks again
    _write_nb(nbs / "90_checks.ipynb", TRUSTS.replace("91_trusts", "90_checks"))
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--pattern", "90"]) == 1


def test_param_values_are_python_literals_where_they_parse():
    assert run_notebooks.parse_params(
        [
            "WORKLOAD=sequential",
            "MAX_FILES=50",
            "RATE=0.5",
            "ON=True",
            "X=None",
            "SIZES=[1, 2]",
            'NAME="a b"',
            "EXPR=1+",
        ]
    ) == {
        "WORKLOAD": "sequential",
        "MAX_FILES": 50,
        "RATE": 0.5,
        "ON": True,
        "X": None,
        "SIZES": [1, 2],
        "NAME": "a b",
        "EXPR": "1+",
    }
    assert run_notebooks.parse_params(["EMPTY="]) == {"EMPTY": ""}
    for bad, why in (
        ("WORKLOAD", "KEY=VALUE"),
        ("=3", "KEY=VALUE"),
        ("SMOKE=False", "--mode"),
        ("OUTPUT_DIR=/tmp", "--output"),
    ):
        with pytest.raises(ValueError, match=why):
            run_notebooks.parse_params([bad])


@pytest.mark.slow
def test_a_param_reaches_the_notebooks_that_define_it_and_the_others_are_named(tmp_path, capsys):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    body = """import json, pathlib
pathlib.Path(OUTPUT_DIR, "{stem}.json").write_text(json.dumps({{"headline": {{
    "workload": globals().get("WORKLOAD"), "max_files": globals().get("MAX_FILES")}}}}))"""
    _write_nb(
        nbs / "90_takes.ipynb", body.format(stem="90_takes"), extra_params='\nWORKLOAD = "uniform16"\nMAX_FILES = 200'
    )
    _write_nb(nbs / "91_lacks.ipynb", body.format(stem="91_lacks"))
    assert run_notebooks.notebook_parameters(nbs / "90_takes.ipynb") == [
        "SMOKE",
        "DEVICE",
        "VIDEO_DIR",
        "OUTPUT_DIR",
        "WORKLOAD",
        "MAX_FILES",
    ]
    _write_nb(nbs / "93_magic.ipynb", "x = 1", extra_params="\n%matplotlib inline\nWORKLOAD = 'a'")
    assert run_notebooks.notebook_parameters(nbs / "93_magic.ipynb") == [
        "SMOKE",
        "DEVICE",
        "VIDEO_DIR",
        "OUTPUT_DIR",
        "WORKLOAD",
    ]
    (nbs / "93_magic.ipynb").unlink()
    code = run_notebooks.main(
        ["--notebooks", str(nbs), "--output", str(out), "--param", "WORKLOAD=sequential", "--param", "MAX_FILES=50"]
    )
    assert code == 0
    rows = {r["notebook"]: r for r in json.loads((out / "summary.json").read_text())["notebooks"]}
    assert rows["90_takes.ipynb"]["headline"] == {"workload": "sequential", "max_files": 50}
    assert rows["91_lacks.ipynb"]["headline"] == {"workload": None, "max_files": None}  # not injected there
    # a line per parameter: the notebook that has it, then the one it was left out of
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("--param ")]
    assert [n.split()[1] for n in notes] == ["WORKLOAD:", "MAX_FILES:"]
    assert all(0 <= n.find("90_takes") < n.find("91_lacks") for n in notes)
    # a name no selected notebook defines is a usage error, before anything runs
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--param", "WORKLAOD=x"]) == 2
    err = capsys.readouterr().err  # the name, and the notebooks it is not a parameter of
    assert "WORKLAOD" in err and "90_takes" in err and "91_lacks" in err


@pytest.mark.parametrize("encrypt", [True, False], ids=["curve-where-supported", "ipc"])
def test_kernels_start_without_the_unencrypted_tcp_warning(tmp_path, capfd, monkeypatch, encrypt):
    # ipykernel 7 warns on every start of a kernel on plain TCP; the runner encrypts it or uses Unix sockets
    config = run_notebooks.kernel_config("python3", encrypt=encrypt)["KernelManager"]
    assert config in ([{"transport": "ipc"}, {"transport_encryption": "auto"}] if encrypt else [{"transport": "ipc"}])
    original = run_notebooks.kernel_config
    monkeypatch.setattr(run_notebooks, "kernel_config", lambda name: original(name, encrypt=encrypt))
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    out.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD)
    row = run_notebooks.run_one(nbs / "90_good.ipynb", out, "smoke", "cpu", None, 60, {})
    assert row["status"] == "passed" and row["headline"]["answer"] == 42
    captured = capfd.readouterr()
    assert "[IPKernelApp] WARNING" not in captured.err + captured.out  # as a plain-TCP kernel logs at its start


def _row(name, status="passed", headline=None, **kw):
    return {
        "notebook": name,
        "requires": [],
        "missing": [],
        "status": status,
        "error": kw.pop("error", None),
        "seconds": 1.0,
        "headline": headline or {},
        "skipped": [],
        **kw,
    }


def test_summary_opens_with_the_recommendation_and_lists_spreads_and_unreadable_files(tmp_path):
    machine = {"gpu": "no GPU", "cpu": "Test CPU x2", "date_utc": "2026-12-01 00:00"}
    rows = [
        _row(
            "20_decode_benchmarks.ipynb",
            headline={"best_fps": 1386.4, "best_fps_spread_pct": 7.2, "jobs": 9},
            unreadable={"/videos/broken.mp4": "DecodeError: /videos/broken.mp4 [probe]: cannot open as a media file"},
        ),
        _row("21_training_loader_benchmarks.ipynb", unreadable={"/videos/broken.mp4": "DecodeError: same file"}),
        _row(
            "22_choosing_a_loader.ipynb",
            headline={
                "workload": "sequential",
                "recommended": "pyav on cpu",
                "recommended_fps": 1386.4,
                "recommended_fps_spread_pct": 12.0,
                "runner_up": "torchcodec on cpu",
                "margin_note": "13% ahead, inside the spread: tied",
            },
        ),
    ]
    md = run_notebooks.write_summary(rows, tmp_path, "smoke", machine).read_text().splitlines()
    assert md[2] == (
        "**Open this first:** `22_choosing_a_loader.ipynb` recommends **pyav on cpu** (recommended_fps: 1,386 ± 12%; "
        "workload: sequential; runner_up: torchcodec on cpu; margin_note: 13% ahead, inside the spread: tied)"
    )
    # the headline cell: each key with its value, the spread beside its rate rather than a key of its own
    head = md_table(md)["20_decode_benchmarks.ipynb"][3]
    assert dict(item.split(": ") for item in head.split("<br>")) == {"best_fps": "1,386 ± 7.2%", "jobs": "9"}
    at = md.index("## Files that could not be read (1)")
    assert md[at + 2] == (
        "- `/videos/broken.mp4` (20_decode_benchmarks, 21_training_loader_benchmarks): "
        "DecodeError: /videos/broken.mp4 [probe]: cannot open as a media file"
    )
    assert json.loads((tmp_path / "summary.json").read_text())["notebooks"][0]["unreadable"] == rows[0]["unreadable"]


def test_open_first_says_when_22_made_no_recommendation_or_something_failed():
    none = _row("22_choosing_a_loader.ipynb", headline={"recommended": None})
    assert run_notebooks.open_first([none]) == "**Open this first:** `22_choosing_a_loader.ipynb` no recommendation"
    failed = _row("21_training_loader_benchmarks.ipynb", "failed", error="StampError: no valid frame stamp")
    assert (
        run_notebooks.open_first([failed])
        == "**Open this first:** `21_training_loader_benchmarks.ipynb`, which failed: StampError: no valid frame stamp"
    )
    assert run_notebooks.open_first([_row("10_pyav.ipynb")]) is None
    handed = _row("22_choosing_a_loader.ipynb", headline={"recommended": "pyav on cpu"}, take_home=["pyav_clips.py"])
    assert "`pyav_clips.py`" in run_notebooks.open_first([handed])  # the file 22 wrote, named where the reader looks


def test_a_notebooks_unreadable_files_reach_the_summary_and_the_console(tmp_path, capsys):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(
        nbs / "90_reads.ipynb",
        """import json, pathlib
pathlib.Path(OUTPUT_DIR, "90_reads.json").write_text(json.dumps({"headline": {}, "unreadable": {
    "bad.mp4": "DecodeError: bad.mp4 [probe]: cannot open as a media file"},
    "handed_over": {"modules": ["pyav_clips.py"]}}))""",
    )
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out)]) == 0
    cause = json.loads((out / "90_reads.json").read_text())["unreadable"]["bad.mp4"]
    listed = [line for line in (out / "summary.md").read_text().splitlines() if line.startswith("- ")]
    # one entry: the file, the notebook that met it, and its cause as the notebook recorded it
    assert len(listed) == 1 and "bad.mp4" in listed[0] and "90_reads" in listed[0] and listed[0].endswith(cause)
    said = capsys.readouterr().out.splitlines()  # the count, pointing to summary.md, the module written, the summary
    assert said[-3].split()[0] == "1" and said[-3].endswith("summary.md") and said[-1].endswith("summary.md")
    assert str(out / "pyav_clips.py") in said[-2]


@pytest.mark.slow
def test_a_run_into_a_used_folder_moves_the_earlier_one_aside_and_says_so(tmp_path, capsys):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD)
    _write_nb(nbs / "91_good.ipynb", GOOD.replace("90_good", "91_good").replace("42", "43"))
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out)]) == 0
    (out / "90_plot.png").write_bytes(b"old")
    first = json.loads((out / "summary.json").read_text())
    said = capsys.readouterr().out.splitlines()  # nothing was moved aside: no line names where it went
    assert not (out / "previous").exists() and [line for line in said if line.startswith(str(out))] == []
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--pattern", "90"]) == 0
    out_lines = capsys.readouterr().out.splitlines()
    # the times expected are the last run's, of the same mode
    seconds = next(r["seconds"] for r in first["notebooks"] if r["notebook"] == "90_good.ipynb")
    _, source = run_notebooks.expected_seconds(out, "smoke")
    assert source is not None and sum(line.endswith(source) for line in out_lines) == 1
    start = next(line for line in out_lines if line.startswith("[1/1]")).split()
    assert start[1] == "90_good" and start[-1] == "~" + run_notebooks.duration(seconds)
    times, source = run_notebooks.expected_seconds(out, "full")  # a full run: the full reference's, not these
    assert "90_good.ipynb" not in times and (source is None or source.startswith("results/h"))
    moved = [line for line in out_lines if line.startswith(str(out))]  # which run went where (the files: below)
    assert len(moved) == 1 and first["machine"]["date_utc"] in moved[0] and "smoke" in moved[0].split()
    assert moved[0].endswith(str(out / "previous") + "/")
    previous = out / "previous"
    assert json.loads((previous / "summary.json").read_text()) == first
    assert {p.name for p in previous.iterdir()} == {
        "summary.json",
        "summary.md",
        "constraints.txt",
        "90_good.ipynb",
        "90_good.json",
        "90_plot.png",
        run_notebooks.MARKER,  # the previous/ it made, marked as its own
    }
    assert (out / run_notebooks.MARKER).exists()  # the output folder it made, marked too
    assert not (out / "90_plot.png").exists()  # the re-run notebook's old plot went
    assert json.loads((out / "91_good.json").read_text())["headline"]["answer"] == 43  # the other stayed
    assert [r["notebook"] for r in json.loads((out / "summary.json").read_text())["notebooks"]] == ["90_good.ipynb"]
    _write_nb(nbs / "92_new.ipynb", GOOD.replace("90_good", "92_new"))
    assert (
        run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--pattern", "90", "--pattern", "92"]) == 0
    )
    moved = [line for line in capsys.readouterr().out.splitlines() if line.startswith(str(out))]
    assert len(moved) == 1 and str(out / "previous") + "/" in moved[0] and not moved[0].endswith("/")  # replaced
    assert json.loads((previous / "summary.json").read_text())["notebooks"][0]["notebook"] == "90_good.ipynb"


def _tree(folder):
    """{relative path: (bytes, mtime_ns)} of every file under `folder`, and each folder's mtime_ns."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
        for p in [folder, *folder.rglob("*")]
    }


def test_a_folder_the_runner_did_not_make_is_refused_before_anything_moves(tmp_path, capsys):
    # issue 29: --output at a user's folder holding a summary.json emptied its previous/ and moved its NN_* files
    nbs, mine = tmp_path / "nbs", tmp_path / "mine"
    nbs.mkdir()
    _write_nb(nbs / "20_x.ipynb", "raise RuntimeError('must not run')")
    (mine / "previous").mkdir(parents=True)
    (mine / "summary.json").write_text('{"my": "own summary"}')
    (mine / "20_draft.txt").write_text("a user's file")
    (mine / "previous" / "keep.txt").write_text("kept")
    before = _tree(mine)
    with pytest.raises(ValueError, match="this runner did not make it"):
        run_notebooks.set_aside(mine, [nbs / "20_x.ipynb"])
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(mine)]) == 2
    err = capsys.readouterr().err  # the folder and what is in it (nothing moved: below)
    assert str(mine) in err and "summary.json" in err
    assert _tree(mine) == before  # nothing moved, deleted or written (no marker either)
    # a folder the runner marked, whose previous/ it did not make: refused too
    (mine / run_notebooks.MARKER).write_text("")
    before = _tree(mine)
    with pytest.raises(ValueError, match="not made by this runner"):
        run_notebooks.set_aside(mine, [nbs / "20_x.ipynb"])
    assert _tree(mine) == before
    # the runner's own folder where the user left a file before its first run: that file stays where it is
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "20_notes.txt").write_text("the user's, there before the runner")
    run_notebooks.mark(ours)
    (ours / "summary.json").write_text('{"mode": "smoke", "notebooks": []}')
    (ours / "20_x.json").write_text("{}")
    assert run_notebooks.set_aside(ours, [nbs / "20_x.ipynb"]).endswith(f"moved to {ours / 'previous'}/")
    assert (ours / "20_notes.txt").exists() and (ours / "previous" / "20_x.json").exists()
    assert (ours / "previous" / run_notebooks.MARKER).exists()  # the previous/ it made is marked as its own


def test_an_output_the_run_would_spoil_or_be_misled_by_is_refused_before_anything_is_written(tmp_path, capsys):
    nbs, videos = tmp_path / "nbs", tmp_path / "videos"
    nbs.mkdir()
    videos.mkdir()
    _write_nb(nbs / "22_x.ipynb", "raise RuntimeError('must not run')")
    argv = ["--notebooks", str(nbs), "--video-dir", str(videos), "--output"]
    # inside the video folder, or the folder itself: 21's copies there would be scanned as the reader's videos
    for out in (videos / "results", videos):
        assert run_notebooks.main([*argv, str(out)]) == 2
        assert "inside --video-dir" in capsys.readouterr().err and not (videos / "results").exists()
    assert list(videos.iterdir()) == []
    (tmp_path / "afile").write_text("x")
    assert run_notebooks.main([*argv, str(tmp_path / "afile")]) == 2 and "not a folder" in capsys.readouterr().err
    # the reader's files with the names a run writes: summary, constraints, a module 22 hands over, its notebook's
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("summary.md", "constraints.txt", "pyav_clips.py", "22_x.json", "22_party.mp4", "notes.txt"):
        (mine / name).write_text(f"the reader's {name}")
    before = _tree(mine)
    assert run_notebooks.main([*argv, str(mine)]) == 2
    err = capsys.readouterr().err
    assert "22_x.json, constraints.txt, pyav_clips.py, summary.md;" in err  # not the video or the notes
    assert _tree(mine) == before  # nothing written, not even the marker
    assert run_notebooks.in_the_way(mine, [nbs / "22_x.ipynb"]) == [
        "22_x.json",
        "constraints.txt",
        "pyav_clips.py",
        "summary.md",
    ]
    assert run_notebooks.in_the_way(mine, [nbs / "20_x.ipynb"]) == ["constraints.txt", "pyav_clips.py", "summary.md"]


def test_a_module_an_earlier_22_handed_over_moves_aside_with_its_run_not_overwritten(tmp_path):
    # the reader may have edited it there since
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    out.mkdir()
    run_notebooks.mark(out)
    (out / "summary.json").write_text('{"mode": "smoke", "notebooks": []}')
    (out / "torchcodec_clips.py").write_text("# edited by the reader")
    run_notebooks.set_aside(out, [nbs / "21_x.ipynb"])  # 22 does not run again: the module stays
    assert (out / "torchcodec_clips.py").exists()
    (out / "summary.json").write_text('{"mode": "smoke", "notebooks": []}')
    run_notebooks.set_aside(out, [nbs / "22_x.ipynb"])
    assert (out / "previous" / "torchcodec_clips.py").read_text() == "# edited by the reader"
    assert not (out / "torchcodec_clips.py").exists()


def test_the_workshop_preset_selects_its_path_in_full_mode(monkeypatch, tmp_path):
    seen, real_select = {}, run_notebooks.select

    def fake_select(folder, patterns):
        seen["patterns"] = patterns
        return []

    monkeypatch.setattr(run_notebooks, "select", fake_select)
    assert run_notebooks.main(["--workshop", "--output", str(tmp_path)]) == 2  # nothing selected by the fake
    assert seen["patterns"] == list(run_notebooks.WORKSHOP)
    picked = real_select(run_notebooks.NOTEBOOK_DIR, list(run_notebooks.WORKSHOP))
    assert [p.name[:2] for p in picked] == list(run_notebooks.WORKSHOP)


def test_paths_are_taken_from_where_the_command_was_typed(tmp_path, monkeypatch):
    # the notebooks run in the output folder: a relative --video-dir, --output or *_DIR parameter must still point
    # where the caller meant
    nbs, videos = tmp_path / "nbs", tmp_path / "work" / "videos"
    nbs.mkdir()
    videos.mkdir(parents=True)
    _write_nb(
        nbs / "90_paths.ipynb",
        """import json, pathlib
pathlib.Path(OUTPUT_DIR, "90_paths.json").write_text(json.dumps({"headline": {
    "video_dir": VIDEO_DIR, "is_dir": pathlib.Path(VIDEO_DIR).is_dir(), "cache": CACHE_DIR}}))""",
        extra_params='\nCACHE_DIR = "x"',
    )
    monkeypatch.chdir(tmp_path / "work")
    argv = ["--notebooks", str(nbs), "--output", "out", "--video-dir", "videos", "--param", "CACHE_DIR=../cache"]
    assert run_notebooks.main(argv) == 0
    head = json.loads((tmp_path / "work" / "out" / "90_paths.json").read_text())["headline"]
    assert head == {"video_dir": str(videos), "is_dir": True, "cache": str(tmp_path / "cache")}
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", "out", "--video-dir", "nowhere"]) == 2


def test_expected_times_come_from_passed_runs_only(tmp_path):
    doc = {
        "mode": "smoke",
        "machine": {},
        "notebooks": [
            {"notebook": "20_a.ipynb", "status": "failed", "seconds": 8.0},
            {"notebook": "21_b.ipynb", "status": "passed", "seconds": 300.0},
        ],
    }
    (tmp_path / "summary.json").write_text(json.dumps(doc))
    times, source = run_notebooks.expected_seconds(tmp_path, "smoke")
    assert times == {"21_b.ipynb": 300.0} and source == "the last smoke run in this folder"


def test_a_kernels_progress_bar_is_shown_on_the_console_not_in_the_notebook(tmp_path, capsys):
    from playbook_utils.bench import harness

    progress = tmp_path / "20.progress"
    echo = run_notebooks.ProgressEcho(progress, every=0.05)
    import os

    os.environ[harness.PROGRESS_FILE] = str(progress)
    try:
        bar = harness.progress_bar(3, "bench")
        for _ in range(3):
            bar.update(1)
        bar.close()
    finally:
        os.environ.pop(harness.PROGRESS_FILE)
    import time

    time.sleep(0.3)
    echo.stop()
    latest = echo.latest()  # the bar's label, then where it got to
    assert latest.split(":")[0] == "bench" and latest.split()[1].startswith("100%") and "3/3" in latest.split()
    assert latest in capsys.readouterr().out  # shown here, as the kernel wrote it


def test_a_kernel_that_died_before_it_started_is_started_again_once(tmp_path, monkeypatch, capsys):
    import papermill

    real, calls = papermill.execute_notebook, []

    def flaky(*args, **kwargs):  # the first kernel dies at start (two kernels took one TCP port), as seen in CI
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return real(*args, **kwargs)

    monkeypatch.setattr(papermill, "execute_notebook", flaky)
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    out.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD)
    row = run_notebooks.run_one(nbs / "90_good.ipynb", out, "smoke", "cpu", None, 60, {})
    assert row["status"] == "passed" and row["headline"]["answer"] == 42 and len(calls) == 2
    said = [line for line in capsys.readouterr().out.splitlines() if "kernel_info" in line]
    assert [line.split(":")[0].strip() for line in said] == ["90_good"]  # the retry said once, for this notebook

    died = "Kernel died before replying to kernel_info"

    def dead(*args, **kwargs):  # twice: a failed row with the cause, no third try
        calls.append(1)
        raise RuntimeError(died)

    calls.clear()
    monkeypatch.setattr(papermill, "execute_notebook", dead)
    (out / "90_good.json").unlink()  # the first run's result, which would otherwise be read back
    row = run_notebooks.run_one(nbs / "90_good.ipynb", out, "smoke", "cpu", None, 60, {})
    assert row["status"] == "failed" and row["error"] == f"RuntimeError: {died}" and len(calls) == 2


def test_the_files_a_loader_sweep_failed_to_read_join_the_summarys_unreadable_ones():
    data = {
        "video_dir": "/videos",
        "sweep": [
            {"backend": "pyav", "files_skipped": {"/videos/sub/damaged.mp4": "InvalidDataError"}},
            {"backend": "decord", "files_skipped": {"/videos/sub/damaged.mp4": "DECORDError"}},
        ],
        "short_loaders": {"sweep": [{"backend": "spdl", "files_skipped": {"/elsewhere/x.mp4": "TypeError"}}]},
    }
    failed = run_notebooks.failed_reading(data)
    assert list(failed) == ["sub/damaged.mp4", "/elsewhere/x.mp4"]  # the folder's files by their name in it
    assert "pyav" in failed["sub/damaged.mp4"] and "InvalidDataError" in failed["sub/damaged.mp4"]
    assert run_notebooks.failed_reading({"sweep": [{"backend": "pyav", "files_skipped": {}}]}) == {}
