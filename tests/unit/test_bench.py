import csv
import dataclasses
import json
import re

import pytest

from playbook_utils import resize
from playbook_utils.bench import harness, media, words
from playbook_utils.decoders import adapter
from tests.sentences import libraries, numbers


@pytest.fixture(scope="module")
def clip():
    return media.default_media(smoke=True)["h264_144p_gop48.mp4"]


def test_workload_indices():
    assert harness.indices_for("sequential", 10, 0) == list(range(10))
    assert harness.indices_for("uniform16", 96, 0) == [3, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63, 69, 75, 81, 87, 93]
    a, b = harness.indices_for("clips4x8s2", 96, 1), harness.indices_for("clips4x8s2", 96, 2)
    assert len(a) == 32 and a != b and a == harness.indices_for("clips4x8s2", 96, 1)


@pytest.mark.media
def test_a_job_runs_in_its_own_process_and_checks_its_frames(clip):
    [row] = harness.run_all([harness.Job("pyav", "cpu", "uniform16", str(clip), threads=2, min_time=0.2)], False)
    assert row["status"] == "ok" and row["read_forward"] is False, row  # PyAV seeks on the CPU
    assert row["exact"] is True and row["frames_per_call"] == 16 and row["calls"] >= 6
    assert row["fps"] > 0 and row["rss_mb"] > 0 and row["nvdec_pct"] is None


@pytest.mark.media
def test_max_frames_cuts_every_workload_to_the_clips_first_frames(clip):
    seq = harness._child(harness.Job("pyav", "cpu", "sequential", str(clip), min_time=0.05, max_frames=20))
    assert seq["exact"] is True and seq["frames_per_call"] == 20


@pytest.mark.media
def test_failures_are_rows_not_crashes(tmp_path, clip):
    from playbook_utils.decoders import why_unavailable

    gone = tmp_path / "missing.mp4"
    jobs = [harness.Job(b, "cpu", "sequential", str(c), min_time=0.1) for b, c in
            (("pyav", gone), ("dali", clip), ("pynvvideocodec", clip))]  # fmt: skip
    missing, refused, no_path = harness.run_all(jobs, progress=False)
    assert missing["status"] == "error" and missing["exception"] == "DecodeError"
    assert missing["clip"] == gone.name and str(gone) in missing["error"]  # names the file
    assert refused["status"] == "unavailable" and refused["error"] == why_unavailable("dali", "cpu", clip)
    # known before decoding, so no child ran (no read_forward probed); the reason names the devices it has
    assert no_path["status"] == "unavailable" and "read_forward" not in no_path
    assert all(d in no_path["error"] for d in adapter("pynvvideocodec").DEVICES)


@pytest.mark.media
def test_run_all_serves_each_backends_jobs_from_one_process_in_order(tmp_path, clip, monkeypatch):
    from playbook_utils import child

    started = []
    real = child.serve

    def counting(argv, requests, **kw):
        started.append([r["backend"] for r in requests])
        return real(argv, requests, **kw)

    monkeypatch.setattr(child, "serve", counting)
    jobs = [
        harness.Job("pyav", "cpu", "uniform16", str(clip), min_time=0.1),
        harness.Job("torchcodec", "cpu", "uniform16", str(clip), min_time=0.1),
        harness.Job("dali", "cpu", "uniform16", str(clip), min_time=0.1),  # refused before any process starts
        harness.Job("pyav", "cpu", "sequential", str(tmp_path / "missing.mp4"), min_time=0.1),
        harness.Job("pyav", "cpu", "sequential", str(clip), min_time=0.1),
    ]
    rows = harness.run_all(jobs, progress=False)
    assert started == [["pyav", "pyav", "pyav"], ["torchcodec"]]  # one child per backend, none for dali
    assert [(r["backend"], r["workload"], r["status"]) for r in rows] == [
        ("pyav", "uniform16", "ok"),
        ("torchcodec", "uniform16", "ok"),
        ("dali", "uniform16", "unavailable"),
        ("pyav", "sequential", "error"),  # a failing job is its row; the child goes on with the next
        ("pyav", "sequential", "ok"),
    ]
    assert rows[4]["exact"] is True and rows[0]["clip"] == clip.name
    # where each job's time went: the seconds since the answer before (a child's first: with its start), and the
    # job's own phases, which the seconds served hold
    assert all(r["served_s"] > 0 for r in rows if r["status"] != "unavailable")
    assert set(rows[4]["phases_s"]) == {"first_call", "frame_check", "warmup", "measured"}
    assert rows[4]["served_s"] >= sum(rows[4]["phases_s"].values())
    # each backend's child was started and warmed before any job ran (its first row says how long that took)
    assert rows[0]["warm"]["status"] == "ok" and rows[1]["warm"]["status"] == "ok" and rows[0]["warm_s"] > 0
    assert "warm" not in rows[3] and "warm" not in rows[4]


@pytest.mark.media
def test_run_all_keeps_its_children_for_the_next_call_when_asked(clip):
    job = harness.Job("pyav", "cpu", "uniform16", str(clip), min_time=0.1)
    first = harness.run_all([job, dataclasses.replace(job, backend="torchcodec")], progress=False, keep=True)
    procs = {b: s.proc for b, s in harness._kept.items()}
    assert sorted(procs) == ["pyav", "torchcodec"] and all(p.poll() is None for p in procs.values())
    later = harness.run_all([dataclasses.replace(job, threads=2)], progress=False)  # pyav's jobs only
    # served by the kept child: a fresh one would have been warmed first, and its first row would say so
    assert first[0]["warm"]["status"] == "ok" and "warm" not in later[0]
    assert later[0]["status"] == "ok" and later[0]["threads"] == 2 and later[0]["exact"] is True
    assert harness._kept == {} and all(p.poll() is not None for p in procs.values())  # none kept: both ended


@pytest.mark.media
def test_the_table_is_a_tidy_csv_with_its_stamp_beside_it(tmp_path, clip):
    jobs = [harness.Job(b, "cpu", "sequential", str(clip), min_time=0.1) for b in ("pyav", "pynvvideocodec")]
    cs, js = harness.write_table(harness.run_all(jobs, progress=False), harness.machine(), tmp_path)
    doc = json.loads(js.read_text())
    assert {"date_utc", "gpu", "cpu", "libraries"} <= set(doc["stamp"])
    assert [r["status"] for r in doc["rows"]] == ["ok", "unavailable"]
    with cs.open(newline="") as f:  # a plain CSV: the stamp is in its own file
        rows = list(csv.DictReader(f))
    assert [r["backend"] for r in rows] == ["pyav", "pynvvideocodec"] and list(rows[0]) == harness.COLUMNS
    assert float(rows[0]["fps"]) > 0 and rows[0]["exact"] == "True" and rows[1]["status"] == "unavailable"
    assert json.loads((tmp_path / "bench_stamp.json").read_text()) == doc["stamp"]


@pytest.mark.media
def test_a_refused_clip_is_an_unavailable_row_without_a_child(tmp_path):
    from playbook_utils.decoders import why_unavailable

    if why_unavailable("dali", "cpu"):
        pytest.skip("DALI is not installed here")
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 256, 144, num_frames=12)
    why = why_unavailable("dali", "cpu", clip)  # refused for its codec, which the reason names
    assert why is not None and media.probe(clip).codec in why
    assert why_unavailable("pyav", "cpu", clip) is None
    [row] = harness.run_all([harness.Job("dali", "cpu", "sequential", str(clip))], progress=False)
    assert row["status"] == "unavailable" and row["error"] == why


def test_reference_numbers_gather_20_and_21(tmp_path):
    import json

    from playbook_utils.tools.results import reference_numbers

    assert reference_numbers(tmp_path) == {}  # nothing ran: nothing claimed
    (tmp_path / "20_decode_benchmarks.json").write_text(
        json.dumps(
            {
                "clips": {"h264_1080p_gop30.mp4": {"codec": "h264"}},
                "nvdec_ceiling": {
                    "h264_1080p_gop30.mp4": {
                        "fps": 2900.4,
                        "saturated": True,
                        "best": {"processes": 7, "threads": 1, "nvdec_util_median": 95},
                    },
                    "hevc_1080p_gop30.mp4": {"fps": None},
                },
                "sparse_speedup": {"speedup": 5.0},
                "harness": {"overhead_pct": 1.0},
            }
        )
    )
    (tmp_path / "21_training_loader_benchmarks.json").write_text(
        json.dumps(
            {
                "headline": {
                    "best_gpu_loader": {
                        "h264_1080p_gop30.mp4": {
                            "loader": "x",
                            "backend": "pynvvideocodec",
                            "fps": 2000,
                            "pct_of_ceiling": 69.0,
                            "ceiling_fps": 2900,
                        },
                        "hevc_1080p_gop30.mp4": {"loader": "y", "backend": "torchcodec", "fps": 7000},
                        "hevc_1080p_gop250_open.mp4": {"loader": "z", "backend": "torchcodec", "fps": 7400},
                    }
                }
            }
        )
    )
    r = reference_numbers(tmp_path)
    assert r["nvdec_ceiling_fps"] == {
        "h264": {
            "h264_1080p_gop30.mp4": {
                "fps": 2900,
                "layout": "7x1",
                "decoder": "pynvvideocodec",
                "nvdec_util_median": 95,
                "saturated": True,
                "counted": None,  # a run before its last chunks were counted by their share
                "spread_pct": None,  # nor by the parts of its window
            }
        }
    }
    assert r["best_loader"]["h264_1080p_gop30.mp4"]["fraction_of_ceiling"] == 0.69
    assert {n: b["fps"] for n, b in r["best_loader"].items() if n.startswith("hevc")} == {
        "hevc_1080p_gop30.mp4": 7000,
        "hevc_1080p_gop250_open.mp4": 7400,
    }  # two clips of one codec: each keeps its loader
    assert r["sparse_speedup"] == {"speedup": 5.0} and r["harness_overhead"] == {"overhead_pct": 1.0}
    # with 20's section 4 record, the speed-up carries its times and spreads, and the exact strategies tied with it
    n20 = json.loads((tmp_path / "20_decode_benchmarks.json").read_text())
    timed = {k: {"seconds": t, "spread_pct": 10.0} for k, t in (("seek per frame", 0.37), ("sorted forward pass", 0.25),
             ("parallel GOPs", 0.233), ("decode everything", 0.97))}  # fmt: skip
    n20.update(sparse_speedup={"strategy": "parallel GOPs", "speedup": 4.16, "gop": 30},
               sparse_strategies={"long.mp4": {"gop": 30, "frames": 1800, **timed}})  # fmt: skip
    (tmp_path / "20_decode_benchmarks.json").write_text(json.dumps(n20))
    s = reference_numbers(tmp_path)["sparse_speedup"]
    assert (s["seconds"], s["everything_seconds"], s["frames"]) == (0.233, 0.97, 1800)
    assert s["tied_with"] == ["sorted forward pass"]  # 7% apart inside a 10% spread; seek per frame 59% apart


def test_utilization_monitor_summary_keeps_only_samples_after_a_time():
    import time

    from playbook_utils.bench.monitor import UtilizationMonitor

    with UtilizationMonitor(period=0.02) as s:
        time.sleep(0.15)
        mid = time.perf_counter()
        time.sleep(0.15)
    later = [x for x in s.samples if x["t"] >= mid]
    assert 0 < len(later) < len(s.samples)
    assert s.summary(since=mid)["rss_mb"] == round(max(x["rss_mb"] for x in later), 1)
    assert s.summary(since=time.perf_counter() + 60)["cpu_pct"] is None  # no sample that late: no figure


def test_utilization_monitor_counts_the_cpu_of_child_processes():
    # a multi-process loader's work is done in its children: counting the parent alone printed "CPU 0%" for four
    # busy workers (21 on the H200, 12-04)
    import subprocess
    import sys
    import time

    from playbook_utils.bench.monitor import UtilizationMonitor

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass"
    with UtilizationMonitor(period=0.05) as m:
        child = subprocess.Popen([sys.executable, "-c", spin])
        child.wait()
        time.sleep(0.1)
    # the child spun 1.5 s of CPU; what the samples add up to is that, within a sample or two
    used = sum(s["cpu_pct"] / 100 * (b["t"] - a["t"]) for a, b, s in zip(m.samples, m.samples[1:], m.samples[1:]))
    assert 1.2 < used < 2.5, used
    assert max(s["cpu_pct"] for s in m.samples) > 50


def test_utilization_monitor_counts_no_process_below_nothing_and_keeps_its_list_when_listing_fails(monkeypatch):
    import types

    import psutil

    from playbook_utils.bench import monitor

    times = {"a": [1.0, 1.5], "b": [5.0, 2.0]}  # b's counter went back: another process under its key, say

    class Fake:
        def __init__(self, name):
            self.name = name

        def cpu_times(self):
            return types.SimpleNamespace(user=times[self.name].pop(0), system=0.0)

    m = monitor.UtilizationMonitor(period=0.1)
    m._procs, m._listed = [Fake("a"), Fake("b")], float("inf")  # listed: no new listing now
    m._tree_cpu_s()  # the baseline
    assert m._tree_cpu_s() == 0.5  # a's half second; b's fall is not taken from it

    def no_listing(recursive):
        raise psutil.AccessDenied()

    monkeypatch.setattr(m.proc, "children", no_listing)
    kept = m._procs
    m._listed = -float("inf")
    times.update(a=[2.0], b=[3.0])
    m._tree_cpu_s()
    assert m._procs is kept  # the last list and its baselines stay


def test_utilization_is_only_reported_from_enough_samples():
    from playbook_utils.bench import monitor

    m = monitor.UtilizationMonitor(period=0.1)
    m.nvml_period_s = 0.5  # as NVML reports its own averaging period
    m.samples = [{"t": 0.1 * k, "cpu_pct": 100.0, "rss_mb": 1.0, "nvdec_pct": 97, "sm_pct": 40} for k in range(60)]
    full = m.summary()
    assert (full["nvdec_pct"], full["sm_pct"], full["cpu_pct"], full["busy_why"]) == (97, 40, 100, None)
    short = m.summary(since=0.0, until=0.75)  # 8 samples: no figure, and the reason instead
    assert short["nvdec_pct"] is None and short["cpu_pct"] is None and short["rss_mb"] == 1.0
    assert short["samples"] == 8 and short["busy_why"] and words.busy_words(short) == short["busy_why"]
    assert str(monitor.MIN_SAMPLES) in short["busy_why"]  # the number of samples needed
    m.nvml_period_s = 2.5  # 60 samples over 5.9 s, but NVML averages over 2.5 s: the GPU figures mean little
    gpu_short = m.summary()
    assert gpu_short["nvdec_pct"] is None and gpu_short["cpu_pct"] == 100 and gpu_short["busy_why"]
    assert gpu_short["window_s"] < 3 * m.nvml_period_s and numbers(gpu_short["busy_why"])[-1] == "2.50"  # NVML's
    assert words.busy_words(full) == "NVDEC 97%, SMs 40%, CPU 100%"


def test_one_caller_ranks_the_backends_on_the_clips_every_one_read_exactly(monkeypatch):
    import time

    import numpy as np

    from playbook_utils.bench import timing

    want = {"a.mp4": [0, 5], "b.mp4": [1, 2]}

    def fake_read(path, idx, backend):
        if backend == "slow":
            time.sleep(0.05)
        if backend == "picky" and path == "b.mp4":
            raise RuntimeError("no such codec")
        return [np.full((2, 2, 3), i) for i in idx]

    monkeypatch.setattr(timing, "read_frames", fake_read)
    monkeypatch.setattr(timing.media, "read_stamp", lambda frame: int(frame[0, 0, 0]))
    rows = timing.one_caller({n: n for n in want}, ["fast", "slow", "picky"], want, repeats=2)
    assert [(r["backend"], r["clip"]) for r in rows if "refused" in r] == [("picky", "b.mp4")]
    assert rows[-1]["refused"] == "RuntimeError: no such codec"
    assert all(r["exact"] and len(r["seconds"]) == 2 for r in rows if "refused" not in r)
    ranked, common = timing.rank_on_common(rows, ["fast", "slow", "picky"], 2)
    assert common == {"a.mp4"} and ranked.best != "slow"  # only the clip all three read counts
    slow = timing.rate_on(rows, "slow", common)  # 2 frames in at least 50 ms: at most 40 frames/s
    assert 0 < slow <= 40 and timing.rate_on(rows, "fast", common) > slow
    with pytest.raises(ValueError, match="no clip that every backend read exactly"):
        timing.rank_on_common([{**r, "exact": False} for r in rows], ["fast", "slow"], 2)


def test_a_winner_names_those_tied_with_it_and_resize_in_the_decoder_counts_only_where_it_beat_the_spread():
    from playbook_utils.bench import resizing, verdicts

    assert words.tied_with(verdicts.rank([("a", 100, 5), ("b", 50, 5)])) == ""
    assert words.tied_with(verdicts.rank([("a", 100, 20), ("b", 95, 20)])) == " (tied with b: either)"
    three = verdicts.rank([("a", 100, 20), ("b", 95, 20), ("c", 90, 20)])
    assert words.tied_with(three) == " (tied with b and c: any of them)"

    def rows(backend, in_fps, after_fps, spread):
        row = {"backend": backend, "device": "cpu", "spread_pct": spread}
        return [{**row, "method": "in decoder", "frames_per_s": in_fps},
                {**row, "method": "decode, then resize", "frames_per_s": after_fps}]  # fmt: skip

    # 24's summary: the decoder chosen first, then where to resize for it (the smoke copy had advised SPDL for
    # decoding and the resize in TorchCodec's or PyAV's decoder, SPDL's own at 0.79x)
    table = rows("pyav", 546, 278, 10) + rows("torchcodec", 471, 440, 47) + rows("spdl", 291, 445, 5)

    def ratios(text):  # the in-decoder / after-decoding ratios the advice quotes, in order
        return re.findall(r"\d+\.\d+x", text)

    # spdl resizes after decoding (its own 0.65x), and pyav, tied with it and gaining 1.96x, is named last
    said = resizing.resize_advice(table, ["spdl", "torchcodec", "pyav"])
    assert ratios(said) == ["0.65x", "1.96x"]  # spdl's own, then pyav's gain: only advice to resize after says both
    # spdl first, then pyav; torchcodec, tied with spdl but with no gain in its decoder, not named
    assert list(dict.fromkeys(libraries(said))) == ["spdl", "pyav"]
    in_pyav = resizing.resize_advice(table, ["pyav"])  # pyav chosen: resize in its decoder
    assert ratios(in_pyav) == ["1.96x"] and "after" not in in_pyav and "spdl" not in in_pyav
    # decord's adapter has no resize in its decoder: its row is decode, then resize alone, and no ratio is quoted
    decord = [r for r in rows("decord", 1, 200, 5) if r["method"] != "in decoder"]
    assert not resize.can_resize_in_decoder("decord", "cpu")
    assert ratios(resizing.resize_advice(decord + table, ["decord"])) == []
    tied = resizing.resize_advice(table, ["torchcodec"])  # 1.07x inside its 47% spread: after decoding
    assert ratios(tied) == ["1.07x"] and "after" in tied
