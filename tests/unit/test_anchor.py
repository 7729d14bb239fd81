"""Notebook 20's physical anchor: every frame to RGB by the FFmpeg command line, each library's bare loop and its
adapter, and the sentence that says where an adapter falls short."""

import shutil

import pytest

from playbook_utils import child
from playbook_utils.bench import anchor, media
from tests.sentences import libraries, numbers

CLI = {"fps": 100.0, "spread_pct": 2.0, "startup_s": 0.1, "startup_pct": 3.3, "version": "ffmpeg version 5.1"}


def _rates(adapter, bare, spread=3.0):
    return {
        "status": "ok",
        "frames": 300,
        "adapter_fps": adapter,
        "bare_fps": bare,
        "adapter_spread_pct": spread,
        "bare_spread_pct": spread,
    }


def _rows(lines):
    """{library: its row's cells} of an anchor table: rates, shares and spread as numbers, then what holds it back."""
    rows = {}
    for line in lines:
        cells = line.split()
        if len(cells) > 6 and cells[1].replace(",", "").replace(".", "").isdigit():
            rows[cells[0]] = [c.rstrip("%").replace(",", "") for c in cells[1:6]] + [" ".join(cells[6:])]
    return rows


def test_verdicts_name_the_adapter_or_the_library_as_the_cause():
    rates = {"fast": _rates(95.0, 97.0), "costly": _rates(50.0, 96.0), "slow": _rates(40.0, 41.0),
             "absent": {"status": "unavailable", "error": "it does not import"}}  # fmt: skip
    lines = anchor.verdicts(rates, CLI, touch_s=0.3)
    rows = _rows(lines)
    # read_frames, its bare loop, read_frames as a share of it, the larger spread, the share of the command line
    assert rows["fast"] == ["95", "97", "98", "3.0", "95", "nothing: at the anchor"]  # 95% >= the 90% target
    above = _rows(anchor.verdicts({"x": _rates(110.0, 112.0)}, CLI, None))["x"]  # 110% of the CLI beyond both spreads
    assert above[4] == "110" and above[5].startswith("ABOVE")
    # short of the target, its own loop far faster: the adapter; the output array takes 0.3 s * 50 / 300 = 5%
    assert rows["costly"][:5] == ["50", "96", "52", "3.0", "50"] and rows["costly"][5].startswith("the adapter")
    assert numbers(rows["costly"][5]) == ["5"]
    assert rows["slow"][4:] == ["40", "the library (the output array: 4% of the time)"]  # its own loop no faster
    assert lines[-1].split()[0] == "absent" and lines[-1].endswith(rates["absent"]["error"])
    alone = _rows(anchor.verdicts({"fast": _rates(95.0, 97.0)}, None, None))  # no ffmpeg: its bare loop only
    assert alone["fast"] == ["95", "97", "98", "3.0", "-", "nothing measurable"]
    # the gap is read_frames against its loop: -8% inside an 8.5% spread is none; +20% beyond a 5% spread is no cost
    edge = _rows(anchor.verdicts({"near": _rates(92.0, 100.0, 8.5), "quick": _rates(120.0, 100.0, 5.0)}, None, None))
    assert edge["near"][5] == "nothing measurable" and edge["quick"][5] == "none: read_frames faster"
    starting = {**CLI, "startup_pct": 60.0}  # a command line that spends 60% of its time starting is no anchor
    short = anchor.verdicts({"fast": _rates(95.0, 97.0)}, starting, None)
    assert not anchor.is_anchor(starting) and numbers(short[0]) == ["60", "100"] and _rows(short) == alone


@pytest.mark.media
def test_every_library_is_timed_against_its_own_bare_loop(tmp_path):
    clip = media.default_media(smoke=True)["h264_144p_gop12_0.14mbps.mp4"]
    n = media.probe(clip).num_frames
    got = anchor.library_rates(clip, libraries=("pyav", "pynvvideocodec"), repeats=1)
    assert got["pyav"]["status"] == "ok" and got["pyav"]["frames"] == n
    assert got["pyav"]["adapter_fps"] > 0 and got["pyav"]["bare_fps"] > 0
    assert got["pynvvideocodec"]["status"] == "unavailable"  # no CPU path: said, not measured
    assert anchor.output_cost(n, 144, 256, repeats=1) >= 0
    if shutil.which("ffmpeg"):
        cli = anchor.cli_rate(clip, n, repeats=1)
        assert cli["fps"] > 0 and 0 < cli["startup_s"] and cli["version"].startswith("ffmpeg")
        # the rate leaves the command's start-up out: the whole command's time, less the start-up, for n frames
        whole_s = n / cli["fps_with_startup"]
        if whole_s > cli["startup_s"]:
            assert (
                cli["fps"] == pytest.approx(n / (whole_s - cli["startup_s"])) and cli["fps"] > cli["fps_with_startup"]
            )
        assert cli["startup_pct"] == pytest.approx(100 * cli["startup_s"] / whole_s)


@pytest.mark.media
@pytest.mark.parametrize("library", ["pyav", "torchcodec", "decord", "spdl"])
def test_a_bare_loop_reads_only_the_first_frames_it_is_asked_for(library):
    # 20's smoke mode times the anchor over a clip's first MAX_FRAMES frames, as its table does
    from playbook_utils.decoders import why_unavailable

    if why_unavailable(library, "cpu"):
        pytest.skip(f"{library} is not usable here")
    clip = media.default_media(smoke=True)["h264_144p_gop12.mp4"]
    n = media.probe(clip).num_frames - 5
    frames = anchor.BARE[library](str(clip), n)
    assert tuple(frames.shape) == (n, 3, 144, 256)
    assert [media.read_stamp(f.permute(1, 2, 0).numpy()) for f in frames[-2:]] == [n - 2, n - 1]
    got = anchor._child(library, str(clip), 1, first=n)
    assert got["frames"] == n and got["adapter_fps"] > 0


@pytest.mark.media
@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="needs the ffmpeg command-line tool")
def test_a_rotated_phone_video_is_measured_though_the_bare_loop_keeps_its_stored_orientation(tmp_path):
    import subprocess

    stored = media.make_clip(tmp_path / "stored.mp4", "h264", 96, 64, num_frames=8, gop=4)
    phone = tmp_path / "phone.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(stored), "-c", "copy", "-metadata:s:v", "rotate=90", str(phone)],
                   check=True)  # fmt: skip
    got = anchor._child("pyav", str(phone), 1)
    assert got["frames"] == 8 and got["bare_fps"] > 0 and got["adapter_fps"] > 0


@pytest.mark.media
@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="needs the ffmpeg command-line tool")
def test_the_command_line_anchor_takes_a_frame_limit(tmp_path, monkeypatch):
    import subprocess

    seen, real = [], subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: seen.append(cmd) or real(cmd, **k))
    clip = media.default_media(smoke=True)["h264_144p_gop12.mp4"]
    assert anchor.cli_rate(clip, 40, repeats=1, first=40)["fps"] > 0
    timed = [c for c in seen if "-frames:v" in c and c[c.index("-frames:v") + 1] == "40"]
    assert len(timed) == 2  # the untimed call and the timed one


def test_a_command_line_that_is_no_anchor_is_not_used_as_one():
    from playbook_utils.bench import anchor

    rates = {
        "pyav": {"status": "ok", "adapter_fps": 2125, "bare_fps": 1771, "adapter_spread_pct": 30, "bare_spread_pct": 10, "frames": 96},
        "spdl": {"status": "ok", "adapter_fps": 3776, "bare_fps": 4665, "adapter_spread_pct": 5, "bare_spread_pct": 5, "frames": 96},
    }  # fmt: skip
    lines = anchor.verdicts(rates, {"fps": 899, "startup_pct": 89, "startup_s": 0.096}, 0.0)
    # 89% of its time starting: no anchor; each library against its own bare loop, none against the command line's 899
    assert numbers(lines[0]) == ["89", "96"] and not any("899" in x for x in lines)
    rows = _rows(lines)
    assert rows["pyav"] == ["2125", "1771", "120", "30.0", "-", "nothing measurable"]  # +20% within the 30% spread
    assert rows["spdl"] == ["3776", "4665", "81", "5.0", "-", "the adapter"]  # -19%, beyond the 5% spread


@pytest.mark.parametrize(
    "row_fps, spread, readable, words",
    [
        (95.0, 10.0, True, "inside the 10% spread"),  # +5%
        (80.0, 10.0, True, "the harness costs that much"),  # +25%
        (139.0, 18.0, False, "not readable"),  # the row 28% faster: the machine's speed changed
    ],
)
def test_the_harness_cost_is_read_only_where_physics_allows_it(row_fps, spread, readable, words):
    record, line = anchor.harness_cost({"bare_fps": 100.0, "bare_spread_pct": spread}, {"fps": row_fps})
    assert record["readable"] is readable and words in line
    assert record["overhead_pct"] == pytest.approx(100 * (100.0 / row_fps - 1))
    assert ("faster" in line) is (not readable)


def test_the_harness_cost_of_every_library_says_when_it_is_not_one_number():
    """20's smoke copy on 2 cores: PyAV's row 32% under its bare loop (the headline's harness cost), TorchCodec's
    row 11% over its own: a gap between rows smaller than that range says nothing about the libraries."""
    bare = {
        "pyav": {"status": "ok", "bare_fps": 2212, "bare_spread_pct": 8.7},
        "torchcodec": {"status": "ok", "bare_fps": 5682, "bare_spread_pct": 20},
        "decord": {"status": "unavailable", "error": "not installed"},
    }
    rows = [
        {"status": "ok", "backend": "pyav", "device": "cpu", "workload": "sequential", "clip": "a.mp4", "fps": 1670},
        {"status": "ok", "backend": "torchcodec", "device": "cpu", "workload": "sequential", "clip": "a.mp4", "fps": 6351},
        {"status": "ok", "backend": "torchcodec", "device": "cpu", "workload": "sequential", "clip": "b.mp4", "fps": 1},
    ]  # fmt: skip
    costs, line = anchor.harness_costs(bare, rows, "a.mp4")
    assert sorted(costs) == ["pyav", "torchcodec"]
    assert costs["pyav"]["overhead_pct"] == pytest.approx(100 * (2212 / 1670 - 1))
    # each cost, largest first; 43 points apart, more than the two widest spreads (8.7% + 20%)
    assert libraries(line) == ["pyav", "torchcodec"] and "+32%" in line and "-11%" in line
    assert numbers(line) == ["32", "11", "43", "29"] and anchor.costs_apart(costs) == pytest.approx(43, abs=0.5)
    # within the two widest spreads of one another: no library stands apart (whether or not each cost is noise)
    rows[1]["fps"] = 5682 / 1.30
    costs, line = anchor.harness_costs(bare, rows, "a.mp4")
    assert anchor.costs_apart(costs) is None and numbers(line) == ["32", "30", "29"]  # the costs, the widest spreads
    # alike, but both rows faster than their bare loops beyond the spread: no cost is read (a reviewer's case)
    fast = {lib: {"status": "ok", "bare_fps": 1000, "bare_spread_pct": 2} for lib in ("pyav", "torchcodec")}
    fast_rows = [{**r, "fps": fps} for r, fps in zip(rows[:2], (1250, 1240))]
    costs, said = anchor.harness_costs(fast, fast_rows, "a.mp4")
    assert not any(anchor.harness_readable(c["overhead_pct"], c["spread_pct"]) for c in costs.values())
    # the two costs (-19%, -20%) and the two libraries that read faster than their bare loops; no spread, no gap
    assert numbers(said) == ["19", "20"] and libraries(said) == ["torchcodec", "pyav", "pyav", "torchcodec"]
    # one library measured both ways: no comparison
    assert anchor.harness_costs({"pyav": bare["pyav"]}, rows, "a.mp4")[1] is None


@pytest.mark.media
def test_the_anchor_measures_in_the_tables_children_which_stay_for_the_table(tmp_path):
    from playbook_utils.bench import harness

    clip = media.make_clip(tmp_path / "c.mp4", "h264", 256, 144, num_frames=24)
    jobs = [harness.Job("pyav", "cpu", "sequential", str(clip), 1, 0.05)]
    try:
        harness.start_children(jobs)
        pid = harness.kept()["pyav"].proc.pid
        got = anchor.library_rates(clip, libraries=("pyav",), repeats=1, kept=harness.kept())
        assert got["pyav"]["status"] == "ok" and got["pyav"]["frames"] == 24
        assert harness.kept()["pyav"].proc.pid == pid  # the same child, still waiting for the table
        row = harness.run_all(jobs, progress=False, keep=True)[0]
        assert row["status"] == "ok" and row["exact"] and harness.kept()["pyav"].proc.pid == pid
    finally:
        procs = [s.proc for s in harness.kept().values()]
        child.close_kept(harness.kept())
        assert all(p.poll() is not None for p in procs)


def test_a_lead_smaller_than_the_harness_costs_lie_apart_is_not_an_order():
    """20's smoke copy on 2 cores: TorchCodec's row 14% ahead of decord's, beyond their spreads, while against their
    own bare loops the libraries' rows differed by 40 points: the table does not order the two."""
    from playbook_utils.bench import verdicts

    costs = {"spdl": {"overhead_pct": 26, "spread_pct": 10}, "torchcodec": {"overhead_pct": 2, "spread_pct": 8},
             "decord": {"overhead_pct": -13, "spread_pct": 12}}  # fmt: skip
    assert anchor.costs_apart(costs) == 39
    best = verdicts.rank([("torchcodec cpu", 6640, 7.6), ("decord cpu", 5803, 5.0)])
    said = anchor.order_caveat(best, costs)
    # 39 points apart, more than this 14% margin: the order of the two is not settled
    assert numbers(said) == ["39", "14"] and libraries(said) == ["torchcodec", "decord"]
    # a lead larger than that, a tie, costs alike, or a library with no cost: nothing to add
    assert anchor.order_caveat(verdicts.rank([("spdl", 2000, 3.0), ("pyav", 1000, 3.0)]), costs) is None
    assert anchor.order_caveat(verdicts.rank([("spdl", 1000, 30.0), ("decord", 950, 30.0)]), costs) is None
    alike = {k: {**c, "spread_pct": 30} for k, c in costs.items()}
    assert anchor.costs_apart(alike) is None and anchor.order_caveat(best, alike) is None
    assert anchor.order_caveat(verdicts.rank([("pyav", 1140, 1.0), ("decord", 1000, 1.0)]), costs) is None
