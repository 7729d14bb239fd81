"""Notebook 21's measurement helpers, and the table and figure helpers 20 and 21 share, as data."""

import hashlib
import os
import re
import shutil

import pytest

from playbook_utils.bench import loader_bench, media, nvdec, words
from playbook_utils.tools import plots
from tests import reader_folder
from tests.sentences import quoted


def rates(text: str) -> list[tuple[str, str]]:
    """(library, frames/s) pairs a line quotes, in order."""
    return re.findall(r"(\w+) ([\d,]+) frames/s", text)


def test_epoch_items_are_distinct_files_spread_over_the_clips(tmp_path):
    a, b = tmp_path / "a.mp4", tmp_path / "b.mkv"
    a.write_bytes(b"a" * 100)
    b.write_bytes(b"b" * 50)
    items = loader_bench.epoch_items([a, b], 5, tmp_path / "epoch")
    assert len(items) == len(set(items)) == 5
    assert [p.read_bytes()[:1] for p in items] == [b"a", b"b", b"a", b"b", b"a"]
    assert {p.suffix for p in items} == {".mp4", ".mkv"}
    assert loader_bench.epoch_items([a, b], 2, tmp_path / "epoch") == [a, b]  # enough files: no copies
    again = loader_bench.distinct_copies(a, 3, tmp_path / "epoch")
    assert again == loader_bench.distinct_copies(a, 3, tmp_path / "epoch") and len(again) == 3
    assert all(p.samefile(a) for p in again)  # hard links: nothing written


def test_distinct_copies_link_across_file_systems_and_copy_only_where_there_is_room(tmp_path, monkeypatch):
    import os
    import shutil

    a = tmp_path / "a.mp4"
    a.write_bytes(b"a" * 100)
    (tmp_path / "epoch").mkdir()
    tag = hashlib.sha1(str(a.resolve()).encode()).hexdigest()[:8]
    (tmp_path / "epoch" / f"a_{tag}_0000.mp4").write_bytes(b"old")  # an earlier run's copy, since changed: replaced

    def fails(src, dst, *_):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", fails)  # --output on another file system: symbolic links, nothing written
    made = loader_bench.distinct_copies(a, 2, tmp_path / "epoch")
    assert all(p.is_symlink() and p.samefile(a) for p in made)
    monkeypatch.setattr(os, "symlink", fails)  # no links of either kind: copies
    made = loader_bench.distinct_copies(a, 3, tmp_path / "other")
    assert [p.read_bytes() for p in made] == [b"a" * 100] * 3 and not any(p.samefile(a) for p in made)
    Usage = type(shutil.disk_usage(tmp_path))
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(10**6, 10**6 - 500, 500))  # 500 bytes free
    with pytest.raises(OSError, match="a.mp4"):
        loader_bench.distinct_copies(a, 6, tmp_path / "full")  # 600 bytes asked of 500 free
    assert list((tmp_path / "full").iterdir()) == []  # refused before a byte was written


def test_distinct_copies_of_a_relative_symlink_are_of_the_file_it_points_to(tmp_path):
    # a reader's folder holding `link.mp4 -> clip.mp4`: a hard link to the symlink itself dangled in the epoch folder
    (tmp_path / "videos").mkdir()
    clip = tmp_path / "videos" / "clip.mp4"
    clip.write_bytes(b"c" * 100)
    (tmp_path / "videos" / "link.mp4").symlink_to("clip.mp4")
    made = loader_bench.distinct_copies(tmp_path / "videos" / "link.mp4", 2, tmp_path / "epoch")
    assert [p.name[:5] + p.name[-8:] for p in made] == ["link_0000.mp4", "link_0001.mp4"]
    assert all(p.exists() and p.samefile(clip) for p in made)
    assert loader_bench.COPIED_FROM[str(made[0])] == str(tmp_path / "videos" / "link.mp4")  # named as the reader's


@pytest.mark.media
def test_one_size_is_the_commonest_as_displayed_so_a_phones_portrait_videos_are_not_squeezed(tmp_path):
    # stored 96x64 and turned a quarter: shown 64 wide, 96 tall, the size the loaders return and resize from
    if not shutil.which("ffmpeg"):
        pytest.skip("needs the ffmpeg command-line tool")
    wide = media.make_clip(tmp_path / "wide.mp4", "h264", 96, 64, num_frames=4)
    tall = [media.rotate_display(wide, tmp_path / f"tall{i}.mp4", 90) for i in range(2)]
    assert loader_bench.one_size([wide, *tall]) == (96, 64)
    assert loader_bench.one_size(tall) is None


def test_distinct_copies_of_two_clips_of_one_name_in_two_folders_are_each_of_its_own(tmp_path):
    # a folder by class: class1/clip.mp4 and class2/clip.mp4 once shared their copies' names, and one overwrote the other
    one, two = tmp_path / "class1" / "clip.mp4", tmp_path / "class2" / "clip.mp4"
    for p, data in ((one, b"1" * 100), (two, b"2" * 100)):
        p.parent.mkdir()
        p.write_bytes(data)
    items = loader_bench.epoch_items([one, two], 6, tmp_path / "epoch")
    assert len(set(items)) == 6 and [p.read_bytes()[:1] for p in items] == [b"1", b"2"] * 3
    assert len(list((tmp_path / "epoch").iterdir())) == 6


@pytest.mark.parametrize(
    "util, label",
    [
        ({"nvdec_pct": 97, "sm_pct": 40, "cpu_pct": 300}, "NVDEC"),
        ({"nvdec_pct": 60, "sm_pct": 95, "cpu_pct": 300}, "SMs"),
        ({"nvdec_pct": 60, "sm_pct": 50, "cpu_pct": 350}, "host side"),
        ({}, "unknown"),
        ({"nvdec_pct": None, "sm_pct": None, "busy_why": "not measured (window too short: 7 samples)"}, "unknown"),
    ],
)
def test_limit_of_names_the_unit_that_was_busy(util, label):
    got, sentence = words.limit_of({"utilization": util})
    assert got == label and sentence


def test_a_host_side_limit_with_idle_cores_is_said_to_be_too_few_decodes(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    idle = {"nvdec_pct": 50, "sm_pct": 17, "cpu_pct": 90}  # the H200 smoke run's torchcodec x4: 0.9 of 16 cores
    label, said = words.limit_of({"utilization": idle})  # NVDEC's and the SMs' share, then cores used of those here
    assert label == "host side" and quoted(said) == ["50%", "17%", "0.9", "16"] and "idle" in re.findall(r"\w+", said)
    label, said = words.limit_of({"utilization": {**idle, "cpu_pct": 1400}})  # most cores busy: none said idle
    assert (
        label == "host side" and quoted(said) == ["50%", "17%", "14.0", "16"] and "idle" not in re.findall(r"\w+", said)
    )


def test_best_gpu_loaders_per_clip_with_margin_and_share_of_the_ceiling(tmp_path):
    clip = media.make_clip(tmp_path / "a.mp4", num_frames=30, bit_rate=2_000_000, picture=media.detailed_frame)
    rows = [
        {
            "clip": "a.mp4",
            "loader": "tc x16",
            "backend": "torchcodec",
            "path": str(clip),
            "frames_per_s": 900.0,
            "frames_per_s_spread_pct": 2.0,
            "pct_of_ceiling": 90.0,
            "steady": True,
            "verdict": "below",
            "utilization": {"nvdec_pct": 95, "sm_pct": 40},
        },
        {
            "clip": "a.mp4",
            "loader": "nv x16",
            "backend": "pynvvideocodec",
            "frames_per_s": 600.0,
            "frames_per_s_spread_pct": 3.0,
            "pct_of_ceiling": 60.0,
            "steady": True,
            "verdict": "below",
            "utilization": {"nvdec_pct": 60, "sm_pct": 30},
        },
    ]
    best = loader_bench.best_gpu_loaders(rows, {"a.mp4": {"fps": 1000.0, "saturated": True}})["a.mp4"]
    assert (best["loader"], best["fps"], best["pct_of_ceiling"], best["ceiling_fps"], best["limit"]) == (
        "tc x16",
        900,
        90.0,
        1000,
        "NVDEC",
    )
    # the margin: the winner's rate, how far ahead of the runner-up (named, with its rate), against the spread
    assert quoted(best["margin"]) == ["900", "50%", "600", "3.0%"] and rows[1]["loader"] in best["margin"]
    assert best["clip_mbps"] == round(media.probe(clip).bit_rate / 1e6, 2) and best["clip_mbps"] > 0.5


def test_ceilings_sweep_the_first_clip_and_reuse_its_layout(monkeypatch):
    calls = []

    def fake(path, configs, seconds, gpu, log, if_unsaturated=(), started=None):
        calls.append((path, tuple(configs), tuple(if_unsaturated)))
        # the other clip's run was started ahead for it, with the layout it is asked for
        assert started is None or (path, *configs[0]) == started, (path, configs, started)
        best = {"processes": 7, "threads": 2, "decoder": "torchcodec", "nvdec_util_median": 90}
        return {"fps": 1000.0, "best": best, "saturated": False, "implied_fps": 1111.1, "rows": [best]}

    monkeypatch.setattr(nvdec, "ceiling", fake)
    monkeypatch.setattr(nvdec, "_start", lambda path, p, t, seconds, gpu, d: (path, p, t, d))
    monkeypatch.setattr(nvdec, "_ready", lambda run: True)

    class Info:
        def __init__(self, codec):
            self.codec, self.width, self.height, self.bit_rate = codec, 1920, 1080, 8_000_000

    infos = {"h.mp4": Info("h264"), "h2.mp4": Info("h264"), "v.mp4": Info("hevc")}
    found = nvdec.ceilings(
        {n: n for n in infos}, infos, ["h.mp4"], ["h2.mp4", "v.mp4"], ((1, 1), (7, 2)), 1.0, if_unsaturated=((16, 4),)
    )
    # the other clip of a codec reuses the layout and the decoder library that did best; hevc has no swept clip;
    # more decoders are offered to the swept clip only
    assert calls == [("h.mp4", ((1, 1), (7, 2)), ((16, 4),)), ("h2.mp4", ((7, 2, "torchcodec"),), ())]
    assert set(found) == {"h.mp4", "h2.mp4"}
    table = [line.split() for line in words.format_ceilings(found, infos).splitlines()[1:]]
    # per clip: size, bitrate beside the rate, the rate, no spread, decoder, layout, NVDEC busy, the rate at 100%,
    # and a lower bound, not saturated
    common = ["1920x1080", "8.0", "1,000", "n/a", "torchcodec", "7x2", "90%", "1,111", "LOWER", "BOUND"]
    assert table == [["h.mp4", *common], ["h2.mp4", *common]]


def test_format_rows_shows_rate_spread_check_or_the_reason():
    rows = [
        {
            "backend": "pyav",
            "device": "cpu",
            "workload": "sequential",
            "clip": "/x/a.mp4",
            "status": "ok",
            "fps": 1234.5,
            "rate_spread_pct": 7.0,
            "exact": True,
            "check": "reference:torchcodec",
        },
        {
            "backend": "dali",
            "device": "cpu",
            "workload": "sequential",
            "clip": "a.mp4",
            "status": "unavailable",
            "error": "DALI's CPU video decoder does not take h264",
        },
    ]
    text = words.format_rows(rows).splitlines()
    assert text[1].split() == ["pyav", "cpu", "sequential", "a.mp4", "1,234", "7%", "True", "same", rows[0]["check"]]
    # a refusal: its backend, device and count of jobs, then the reason
    assert text[2].split()[:3] == ["dali", "cpu", "1"] and text[2].endswith(rows[1]["error"])
    text = words.format_rows(rows + [{**rows[1], "workload": "uniform16"}]).splitlines()
    assert len(text) == 3 and text[2].split()[:3] == ["dali", "cpu", "2"]  # one line per reason
    # the agree column: identical to the reference decode, or how far its pixels are (a colour shift: not exact)
    assert " same " in words.format_rows(rows[:1])
    shifted = {**rows[0], "backend": "spdl", "device": "cuda", "exact": False, "agree_db": 24.2}
    assert words.format_rows([shifted]).splitlines()[1].split()[-4:-1] == ["False", "24", "dB"]
    forward = {**rows[0], "backend": "decord", "check": "stamp", "read_forward": True}
    assert "forward" in words.format_rows([forward]).split()  # beside the check, which still shows
    assert words.format_rows([forward]).splitlines()[1].split()[7] == "stamp;"
    assert "forward" not in words.format_rows(rows[:1])
    # a share of a ceiling that was only a lower bound is an upper bound of the share, and the table says so
    gpu = {**rows[0], "device": "cuda", "fps": 466.0}
    low = {**gpu, **nvdec.against_ceiling(466.0, 20.0, {"fps": 2574.0, "saturated": False})}
    high = {**gpu, **nvdec.against_ceiling(466.0, 20.0, {"fps": 2574.0, "saturated": True})}
    low_lines, high_lines = words.format_rows([low]).splitlines(), words.format_rows([high]).splitlines()
    assert low_lines[1].split()[6:8] == ["<=", "18%"] and len(low_lines) == 3 and low_lines[2].startswith("<=:")
    assert high_lines[1].split()[6] == "18%" and len(high_lines) == 2  # no note under it
    # no utilization measured: no rate 'at 100%' either (it read 0)
    unmeasured = {"nvdec_util_median": None, "processes": 2, "threads": 2}
    line = words.format_ceilings(
        {"a.mp4": {"fps": 2574.0, "best": unmeasured, "implied_fps": None, "saturated": False, "rows": []}},
        {"a.mp4": type("I", (), {"width": 1920, "height": 1080, "bit_rate": 9e6})()},
    ).splitlines()[1]
    assert line.split()[-4:-2] == ["n/a", "n/a"] and " 0 " not in line


def test_plots_carry_their_reference_lines_and_an_outside_legend():
    fig = plots.grouped_bars({"a": [1, 2], "b": [3, None]}, ["x", "y"], "frames/s", "t", {"ceiling": 4})
    ax = fig.axes[0]
    assert len(ax.patches) == 4 and any(line.get_linestyle() == "--" for line in ax.lines)
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1  # the legend covers no data
    # on a log scale the bars start at the power of ten below the smallest: 628 against 992 no longer looks 1:10
    logged = plots.grouped_bars({"a": [628, 4647], "b": [992, None]}, ["x", "y"], "frames/s", "t", log=True)
    assert logged.axes[0].get_ylim()[0] == 100
    # and each bar carries its value, since a log scale's heights do not read as values (6,640 vs 2,300 looked 1.4x)
    said = [t.get_text() for t in logged.axes[0].texts]
    assert said == ["628", "4.6k", "992", ""]
    # three long clip names side by side (21's figure): no tick label overlaps its neighbour
    clips = ["h264_1080p_gop30_8mbps.mp4", "hevc_1080p_gop250_open_3.5mbps.mp4", "hevc_1080p_gop30_3.5mbps.mp4"]
    wide = plots.grouped_bars(
        {f"pynvvideocodec 4 processes x{i} threads": [1, 2, 3] for i in range(7)}, clips, "f/s", "t"
    )
    wide.canvas.draw()
    boxes = [t.get_window_extent() for t in wide.axes[0].get_xticklabels()]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))

    # the soak: a slope from too few calls shows no bytes per call, and 150 calls need no log scale (23's smoke copy)
    def soak(calls, slope):
        curve = [{"call": c, "rss_mb": 100 + c * slope / 2**20} for c in range(10, 10 + calls + 1, 10)]
        return {"curve": curve, "warmup": 10, "calls": calls, "rss_bytes_per_call": slope}

    few = plots.soak_curves({"pyav cpu": soak(150, 30635.0)}, "t", 1000)
    assert few.axes[0].get_xscale() == "linear"
    assert [t.get_text() for t in few.axes[0].get_legend().get_texts()] == ["pyav cpu"]  # no B/call shown
    assert few.axes[0].get_xlabel().splitlines()[1].endswith(": pyav cpu")  # named once, under the axis
    many = plots.soak_curves({"pyav cpu": soak(10000, 12.0)}, "t", 1000)
    assert many.axes[0].get_xscale() == "symlog"
    assert [t.get_text() for t in many.axes[0].get_legend().get_texts()] == ["pyav cpu (+12 B/call)"]
    fig2 = plots.lines({"m": ([1, 2, 4], [1, 2, 3])}, "threads", "f/s", "t", {"ideal": ([1, 2, 4], [1, 2, 4])})
    assert [t for t in fig2.axes[0].get_xticks()] == [1, 2, 4]
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig2)


@pytest.mark.media
def test_accepted_keeps_what_a_backend_takes_and_says_why_for_the_rest(tmp_path):
    from playbook_utils.bench import media

    closed = media.make_clip(tmp_path / "closed.mp4", "h264", 96, 64, num_frames=12, gop=6)
    avi = media.make_clip(tmp_path / "clip.avi", "h264", 96, 64, num_frames=12, gop=6, bframes=0)
    kept, refused = loader_bench.accepted([closed, avi, closed], "decord")
    assert kept == [closed, closed] and list(refused) == [str(avi)]
    assert "decord" in refused[str(avi)].split() and "AVI" in refused[str(avi)].split()  # the library, the container
    assert loader_bench.accepted([closed, avi], "pyav") == ([closed, avi], {})


def test_more_threads_stops_where_the_rate_stops_rising_and_names_the_limit(monkeypatch):
    rates = {24: (1300.0, 2.0, 80), 32: (1450.0, 2.0, 96), 48: (1470.0, 3.0, 97), 64: (1475.0, 1.0, 97)}
    asked = []

    def fake(clip, codec, specs, items_for, ceiling, common, log):
        t = specs[0]["threads"]
        asked.append(t)
        fps, spread, nvdec = rates[t]
        return [
            {
                **specs[0],
                "path": clip,
                "codec": codec,
                "frames_per_s": fps,
                "frames_per_s_spread_pct": spread,
                "steady": True,
                "verdict": "below",
                "utilization": {"nvdec_pct": nvdec, "sm_pct": 50},
            }
        ]

    monkeypatch.setattr(loader_bench, "measure_gpu_loaders", fake)
    start = {
        "backend": "torchcodec",
        "threads": 16,
        "loader": "torchcodec x16 threads",
        "path": "a.mp4",
        "codec": "h264",
        "frames_per_s": 1200.0,
        "frames_per_s_spread_pct": 2.0,
        "utilization": {"nvdec_pct": 70, "sm_pct": 40},
    }
    ceiling = {"fps": 1500.0, "saturated": True}
    rows, why = loader_bench.more_threads(start, None, ceiling, {}, (8, 16, 24, 32, 48, 64), log=print)
    assert asked == [24, 32, 48]  # 48 gains 1.4%, inside its 3% spread: no point going on
    assert [r["threads"] for r in rows] == [24, 32, 48]
    # where it stopped (48: +1.4% inside 3.0%), the count it levels off from (x32, 1,450 frames/s) and what was busy
    assert quoted(why) == ["48", "+1.4%", "3.0%", "1,450", "96%"] and rows[1]["loader"] in why and "NVDEC" in why

    # a full sweep measures every step past the plateau, and says how far the rate moved there
    asked.clear()
    rows, why = loader_bench.more_threads(start, None, ceiling, {}, (24, 32, 48, 64), log=print, to_the_end=True)
    assert asked == [24, 32, 48, 64]
    assert quoted(why)[:5] == ["48", "+1.4%", "3.0%", "1,450", "96%"] and rows[1]["loader"] in why
    assert quoted(why)[5:] == ["64", "+1.4%", "+1.7%"]  # up to 64 threads, how far the rate moved from it
    rates[64] = (1800.0, 1.0, 97)  # a later step that gains beyond the spread takes the best
    asked.clear()
    rows, why = loader_bench.more_threads(start, None, ceiling, {}, (24, 32, 48, 64), log=print, to_the_end=True)
    assert quoted(why) == ["48", "+1.4%", "3.0%", "1,800", "97%"]  # the best is x64's rate, not x32's
    assert rows[-1]["loader"] in why and rows[1]["loader"] not in why
    rates[64] = (1475.0, 1.0, 97)

    rates[48] = (1700.0, 3.0, 97)
    asked.clear()
    rows, why = loader_bench.more_threads(start, None, ceiling, {}, (24, 32, 48), log=print)
    assert asked == [24, 32, 48] and quoted(why) == ["48", "1,700", "97%"]  # no plateau: the last count's rate

    # a row above the saturated ceiling is no rate to compare: the sweep ends there and says so
    real = fake

    def above(*a):
        rows = real(*a)
        return [{**rows[0], "verdict": "above", "words": "ABOVE the saturated NVDEC ceiling"}]

    monkeypatch.setattr(loader_bench, "measure_gpu_loaders", above)
    rows, why = loader_bench.more_threads(start, None, ceiling, {}, (24, 32), log=print)
    # the row's own verdict, and the start's loader and rate kept as the best
    assert len(rows) == 1 and rows[0]["words"] in why and start["loader"] in why and quoted(why) == ["1,200"]

    monkeypatch.setattr(loader_bench, "measure_gpu_loaders", lambda *a: [])
    rows, why = loader_bench.more_threads(start, None, None, {}, (32,), log=print)
    assert rows == [] and "failed" in why.split() and start["loader"] in why


def test_sweep_label_says_when_a_backend_read_only_part_of_the_epoch():
    assert loader_bench.sweep_label({"backend": "pyav", "workers": 2, "files_left_out": 0}, 64) == "pyav x2 workers"
    label = loader_bench.sweep_label({"backend": "decord", "workers": 1, "files_left_out": 32}, 64)
    assert label == "decord x1 workers (32 of 64 files)"
    assert loader_bench.sweep_label({"backend": "decord", "workers": 1, "files_left_out": 32}, 64, workers=False) == (
        "decord (32 of 64 files)"
    )


def test_a_window_too_short_is_measured_again_over_a_longer_epoch(monkeypatch):
    asked = []

    def fake(spec):
        asked.append((len(spec["paths"]), spec["min_window_s"]))
        seconds = len(spec["paths"]) / 20  # a loader of 20 videos/s: the epoch decides the window
        steady = seconds >= spec["min_window_s"]
        return {"status": "ok", "steady": steady, "seconds": seconds, "why": None if steady else "too short"}

    monkeypatch.setattr(loader_bench, "measure_isolated", fake)
    r, n = loader_bench.measure_until_steady({"kind": "gpu"}, lambda n: ["v"] * n, 100, 10.0)
    assert asked == [(100, 10.0), (301, 10.0)] and r["steady"] and n == 301
    asked.clear()  # steady at once, or failed: one run
    r, n = loader_bench.measure_until_steady({"kind": "gpu"}, lambda n: ["v"] * n, 400, 10.0)
    assert asked == [(400, 10.0)] and n == 400
    monkeypatch.setattr(loader_bench, "measure_isolated", lambda spec: {"status": "error", "error": "boom"})
    assert loader_bench.measure_until_steady({}, lambda n: [], 10, 10.0) == ({"status": "error", "error": "boom"}, 10)


def test_backends_tied_at_the_counts_measured_are_all_swept():
    def row(backend, fps, spread, **kw):
        return {
            "kind": "gpu",
            "backend": backend,
            "threads": 16,
            "frames_per_s": fps,
            "steady": True,
            "verdict": "below",
            "frames_per_s_spread_pct": spread,
            **kw,
        }

    rows = [
        row("pynvvideocodec", 3140.0, 2.0),
        row("torchcodec", 3102.0, 1.0),
        row("torchcodec", 2113.0, 6.0),
        row("pynvvideocodec", 3300.0, 1.0, processes=4),
        row("dali", 3500.0, 1.0, steady=False),
    ]
    assert [(r["backend"], r["frames_per_s"]) for r in loader_bench.sweep_starts(rows)] == [
        ("pynvvideocodec", 3140.0),
        ("torchcodec", 3102.0),
    ]  # 1.2% behind, inside the 2% spread: both
    rows[1]["frames_per_s"] = 2900.0  # 7.6% behind: only the fastest
    assert [r["backend"] for r in loader_bench.sweep_starts(rows)] == ["pynvvideocodec"]
    assert loader_bench.sweep_starts([]) == []


def test_a_gpu_loader_line_gives_rate_verdict_window_and_what_was_busy():
    row = {
        "loader": "torchcodec x16 threads",
        "frames_per_s": 7366.0,
        "frames_per_s_spread_pct": 5.0,
        "steady": True,
        "words": "90.4% of the NVDEC ceiling",
        "lookahead_items": 32,
        "epoch_items": 288,
        "seconds": 10.2,
        "utilization": {"nvdec_pct": 89, "sm_pct": 65, "cpu_pct": 328},
    }
    line = words.gpu_loader_line(row)
    # the rate, its spread, the verdict against the ceiling, then look-ahead, items, window and what was busy
    assert line.split()[:3] == row["loader"].split() and row["words"] in line
    assert quoted(line) == ["7,366", "5%", "90.4%", "32", "288", "10", "89%", "65%", "328%"]
    short = {**row, "steady": False, "why": "the window lasted 8.3 s, less than 10 s", "utilization": {}}
    said = words.gpu_loader_line(short)  # not a steady rate, and why; no verdict, nothing busy sampled
    assert short["why"] in said and "NOT" in said.split() and row["words"] not in said
    assert quoted(said) == ["7,366", "5%", "8.3", "10", "32", "288", "10"]


def test_wait_curves_give_one_curve_per_library_in_the_rows_order():
    rows = [{"backend": "pyav", "workers": w, "wait_fraction": f, "files_left_out": 0} for w, f in ((0, 0.9), (2, 0.5))]
    rows.append({"backend": "decord", "workers": 2, "wait_fraction": 0.6, "files_left_out": 40})
    assert loader_bench.wait_curves(rows, 80) == {
        "pyav": ([0, 2], [90.0, 50.0]),
        "decord (40 of 80 files)": ([2], [60.0]),
    }


def test_bars_of_puts_each_ceiling_over_its_clip_and_hatches_the_rows_that_are_no_result():
    import matplotlib

    matplotlib.use("Agg")
    from playbook_utils.tools import plots

    ok = {"steady": True, "verdict": "below"}
    rows = [
        {"clip": "h.mp4", "loader": "a x8", "frames_per_s": 3000.0, **ok},
        {"clip": "h.mp4", "loader": "a x64", "frames_per_s": 4200.0, "steady": True, "verdict": "above"},
        {"clip": "v.mp4", "loader": "a x8", "frames_per_s": 7000.0, **ok},
    ]
    bars = loader_bench.bars_of(rows, {"h.mp4": {"fps": 4000.0, "saturated": True}, "v.mp4": {"fps": 8000.0}})
    assert bars["categories"] == ["h.mp4", "v.mp4"]
    assert bars["values"] == {"a x8": [3000.0, 7000.0], "a x64": [4200.0, None]}
    assert bars["per_category"] == {  # a ceiling that is only a lower bound is drawn, and named, as one
        "NVDEC ceiling of the clip (saturated)": [4000.0, None],
        "NVDEC ceiling, a lower bound (the engines may give more)": [None, 8000.0],
    }
    assert bars["not_results"] == {"a x8": [False, False], "a x64": [True, False]}
    fig = plots.grouped_bars(ylabel="frames/s", title="t", **bars)
    ax = fig.axes[0]
    assert sum(1 for p in ax.patches if p.get_hatch()) == 2  # the flagged bar, and its legend entry
    assert len(ax.collections) == 2  # one ceiling segment per clip
    assert [c.get_linestyle() != ax.collections[0].get_linestyle() for c in ax.collections] == [False, True]
    legend = ax.get_legend()  # the ceilings, the loaders, then one hatched entry for the rows that are no result
    assert [t.get_text() for t in legend.get_texts()][:4] == [*bars["per_category"], *bars["values"]]
    assert [bool(getattr(h, "get_hatch", lambda: None)()) for h in legend.legend_handles] == [False] * 4 + [True]


def test_a_ceiling_is_saturated_or_says_why_it_is_a_lower_bound():
    best = {"decoder": "pynvvideocodec", "processes": 7, "threads": 4, "nvdec_util_median": 99}
    c = {"fps": 4076.0, "best": best, "saturated": True, "levelled": True}
    assert words.ceiling_state(c) == "saturated"
    rising = {**c, "saturated": False, "levelled": False}  # busy, but more decoders still raised the rate
    assert words.ceiling_state(rising) == "LOWER BOUND (still rising with more decoders)"
    idle = {**rising, "best": {**best, "nvdec_util_median": None}, "levelled": None}
    assert words.ceiling_state(idle) == "LOWER BOUND"  # no utilization to judge by


def test_a_gpu_data_wait_is_a_result_only_within_the_loaders_steady_rate():
    # The H200 run of 2026-12-02: 12 steps of 4 videos (300 frames) behind a look-ahead of 64 waited 50.1% of a
    # 100 ms step: 19.8 videos/s, 5,930 frames/s from a loader whose steady rate was 4,033 +- 3.3%. No result.
    row = {"frames_per_s": 4033.0, "frames_per_s_spread_pct": 3.3, "kind": "gpu", "threads": 32}
    seen = loader_bench.wait_against_rate({"samples_per_s": 19.77, "samples": 48, "wait_fraction": 0.501}, row, 300)
    assert seen["result"] is False and seen["drawn_fps"] == 5931 and "47% above" in seen["why"]
    assert seen["quoted_wait_fraction"] is None  # 48 videos drawn behind 64 in flight: nothing explains it
    fed = loader_bench.wait_against_rate({"samples_per_s": 13.2, "wait_fraction": 0.6}, row, 300)  # 3,960 frames/s
    assert fed["result"] is True and fed["why"] is None and fed["quoted_wait_fraction"] == 0.6 and fed["note"] is None
    assert loader_bench.wait_against_rate({"samples_per_s": 1.0}, {}, 300)["result"] is False


def test_a_gpu_data_wait_a_little_above_the_steady_rate_is_explained_by_its_look_ahead():
    # The H200 run of 2026-12-03: x64 threads (128 videos in flight) behind 320 steps of 4 videos drew 4,241
    # frames/s, 2% above the loader's steady 4,149 +- 1.2%: those 128 were begun before the clock, 10% of the 1,280
    row = {"frames_per_s": 4149.0, "frames_per_s_spread_pct": 1.2, "kind": "gpu", "threads": 64}
    wait = {"samples_per_s": 4241 / 300, "samples": 1280, "wait_fraction": 0.65}
    got = loader_bench.wait_against_rate(wait, row, 300)
    # the time off the loader (35% of the run) is the same at the steady rate; the loader's share stretches
    assert got["result"] is True and got["quoted_wait_fraction"] == pytest.approx(1 - 0.35 * 4149 / 4241)
    # drawn, its excess, the steady rate and spread, the videos in flight and their share of those drawn, the wait
    assert quoted(got["note"]) == ["4,241", "2%", "4,149", "1.2%", "128", "10%", "1,280", "65.8%"]
    within = loader_bench.wait_against_rate({**wait, "samples_per_s": 4180 / 300}, row, 300)  # +0.7%: in the spread
    assert within["quoted_wait_fraction"] == pytest.approx(1 - 0.35 * 4149 / 4180)
    assert quoted(within["note"]) == ["65.0%", "4,180", "4,149", "1.2%"]  # the wait measured, then the rates
    assert loader_bench.wait_against_rate({**wait, "wait_fraction": None}, row, 300)["result"] is False
    # the same excess over a window of only 5 look-aheads: the look-ahead is too large a share to explain it
    short = loader_bench.wait_against_rate({**wait, "samples": 640}, row, 300)
    assert short["result"] is False and "2% above" in short["why"]
    # 15% above over 10 look-aheads: more than the look-ahead explains
    far = loader_bench.wait_against_rate({**wait, "samples_per_s": 1.15 * 4149 / 300}, row, 300)
    assert far["result"] is False and far["quoted_wait_fraction"] is None


def test_the_gpu_data_wait_runs_over_ten_look_aheads_in_full_mode():
    spec = {"kind": "gpu", "threads": 32}  # a GpuLoader keeps 2 x threads videos in flight
    assert loader_bench.spec_lookahead(spec) == 64
    assert loader_bench.wait_steps_for(spec, 4, smoke=False) == 160  # 640 videos of 4 a step
    assert loader_bench.wait_steps_for(spec, 4, smoke=True) == 4
    assert loader_bench.wait_steps_for({"kind": "gpu", "threads": 1}, 4, smoke=False) == 12


@pytest.mark.media
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the notes of a machine without CUDA")
def test_gpu_specs_note_each_loader_left_out_and_why(tmp_path):
    # on this machine (no CUDA) every GPU backend refuses the clip with its reason; DALI's reader left out on purpose
    # (21 in smoke mode) says so, and otherwise only a DALI that takes the clip adds a spec
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 96, 64, num_frames=8)
    specs, notes = loader_bench.gpu_specs(clip, "cuda", [4], (), "measured in full mode only")
    assert specs == [] and notes[-1] == "dali experimental reader: measured in full mode only"
    assert [n.split(":")[0] for n in notes[:2]] == ["pynvvideocodec", "torchcodec"]
    assert all(not n.startswith("dali") for n in loader_bench.gpu_specs(clip, "cuda", [4], ())[1])


def test_past_its_budget_the_sweep_measures_the_first_of_only_the_first_libraries(monkeypatch, tmp_path):
    import time

    monkeypatch.setattr(loader_bench, "accepted", lambda paths, b: (list(paths), {}))
    monkeypatch.setattr(loader_bench.loaders, "make_loader", lambda paths, backend, **kw: backend)
    monkeypatch.setattr(loader_bench.loaders, "close_loader", lambda dl, now=False: [])

    def measure(dl, step_s, steps, device="cpu", max_seconds=None):
        time.sleep(0.05)  # each configuration takes longer than the whole budget below
        rate = {"x": 1.0, "y": 3.0, "z": 2.0}[dl]  # make_loader gave its backend's name
        row = {"samples_per_s": rate, "wait_fraction": 0.5, "wait_s_per_step": 0.1, "steps": steps}
        return {**row, "stopped_by_time": False, "first_batch_s": 0.0, "prefetched_s": 0.0, "steady": True}

    monkeypatch.setattr(loader_bench, "measure_loader", measure)
    args = (["a.mp4", "b.mp4"], ["x", "y", "z"], [4, 2], 16, 1, 0.0, 4, 5.0)
    rows, _, left = loader_bench.sweep_workers(*args, budget_s=0.01, log=lambda m: None, curve=False)
    assert [(r["backend"], r["workers"]) for r in rows] == [("x", 4), ("y", 4), ("z", 4)]  # each library's first
    rows, _, left = loader_bench.sweep_workers(*args, budget_s=0.01, log=lambda m: None, first_of=2, curve=False)
    assert [(r["backend"], r["workers"]) for r in rows] == [("x", 4), ("y", 4)]
    assert [(u["backend"], u["workers"]) for u in left] == [("z", 4), ("x", 2), ("y", 2), ("z", 2)]
    # with its curve (the default): the fastest first configuration's library, y, runs its other worker count too,
    # before any other library's and past the budget, so that the figure has one library's wait against workers
    said = []
    rows, _, left = loader_bench.sweep_workers(*args, budget_s=0.01, log=said.append)
    assert [(r["backend"], r["workers"]) for r in rows] == [("x", 4), ("y", 2), ("y", 4), ("z", 4)]
    assert [(u["backend"], u["workers"]) for u in left] == [("x", 2), ("z", 2)]
    curve = [line for line in said if line.split()[0] == "y" and "workers=" not in line]  # why y runs again
    assert len(curve) == 1 and quoted(curve[0]) == ["4", "2"]


def test_the_sweep_takes_the_libraries_in_the_order_of_notebook_20s_table(tmp_path):
    import json

    assert loader_bench.ranked_by_table(["pyav", "spdl"], tmp_path, None) == (["pyav", "spdl"], None)  # no table
    (tmp_path / "20_bench").mkdir()
    (tmp_path / "20_decode_benchmarks.json").write_text(json.dumps({"video_dir": "/v"}))
    row = {"status": "ok", "device": "cpu", "workload": "uniform16", "exact": True}
    rows = [
        {**row, "backend": "pyav", "fps": 100.0},
        {**row, "backend": "torchcodec", "fps": 150.0},
        {**row, "backend": "torchcodec", "fps": 250.0},
        {**row, "backend": "pyav", "device": "cuda", "fps": 900.0},  # not a CPU row
        {**row, "backend": "spdl", "fps": 999.0, "exact": False},  # not exact: no rate
    ]
    (tmp_path / "20_bench" / "bench.json").write_text(json.dumps({"rows": rows}))
    order, said = loader_bench.ranked_by_table(["pyav", "spdl", "torchcodec"], tmp_path, "/v")
    assert order == ["torchcodec", "pyav", "spdl"]
    assert rates(said) == [("torchcodec", "200"), ("pyav", "100")] and said.index("spdl") > said.index("pyav")
    # a table of other files orders nothing: the H200 reference's order
    assert loader_bench.ranked_by_table(["pyav", "torchcodec"], tmp_path, "/w") == (["torchcodec", "pyav"], None)
    assert loader_bench.order_line(order, said, "x") == "the CPU libraries in the order of " + said
    # a table with light synthetic clips: ranked on the realistic ones, as 22's tree is (21 had quoted the mean
    # of both beside 22's tree of the realistic clip alone)
    clips = {"light.mp4": {"light": True}, "real_8mbps.mp4": {}}
    (tmp_path / "20_decode_benchmarks.json").write_text(json.dumps({"video_dir": "/v", "clips": clips}))
    rows = [{**row, "backend": "pyav", "clip": "light.mp4", "fps": 900.0},
            {**row, "backend": "pyav", "clip": "real_8mbps.mp4", "fps": 10.0},
            {**row, "backend": "torchcodec", "clip": "light.mp4", "fps": 100.0},
            {**row, "backend": "torchcodec", "clip": "real_8mbps.mp4", "fps": 20.0}]  # fmt: skip
    (tmp_path / "20_bench" / "bench.json").write_text(json.dumps({"rows": rows}))
    order, said = loader_bench.ranked_by_table(["pyav", "torchcodec"], tmp_path, "/v")
    assert order == ["torchcodec", "pyav"] and rates(said) == [("torchcodec", "20"), ("pyav", "10")]  # realistic
    assert re.search(r"K = (\d+)", said).group(1) == "16" and "light" not in said
    # where the realistic clips' rows rate none (not exact), the whole table ranks them, and says so
    for r in rows:
        r["exact"] = r["clip"] == "light.mp4"
    (tmp_path / "20_bench" / "bench.json").write_text(json.dumps({"rows": rows}))
    order, said = loader_bench.ranked_by_table(["pyav", "torchcodec"], tmp_path, "/v")
    assert order == ["pyav", "torchcodec"] and rates(said) == [("pyav", "900"), ("torchcodec", "100")]
    assert "light" in re.findall(r"\w+", said)  # the light clips counted, and said to be
    why = "no table of notebook 20 here"
    line = loader_bench.order_line(["torchcodec", "pyav"], None, why)
    assert 0 <= line.find("torchcodec") < line.find("pyav") and why in line


def test_21_measures_against_notebook_20s_ceiling_where_20_saturated_this_gpu_model(tmp_path, monkeypatch):
    import json

    from playbook_utils import env
    from playbook_utils.bench import media, nvdec

    monkeypatch.setattr(env, "gpus", lambda: {"devices": [{"name": "NVIDIA H100 80GB HBM3"}]})
    monkeypatch.setattr(nvdec, "ceiling", lambda path, layouts, seconds, gpu, if_unsaturated=(): {"fps": 1.0})
    (tmp_path / "20_bench").mkdir()
    (tmp_path / "20_bench" / "bench.json").write_text(json.dumps({"rows": []}))

    def write_20(gpu="NVIDIA H100 80GB HBM3", saturated=True, version=media.MEDIA_VERSION):
        ceiling = {"fps": 4277.0, "saturated": saturated, "rows": []}
        environment = {"gpu": {"devices": [{"name": gpu}]}, "media_version": version, "date_utc": "2026-12-06 11:07"}
        doc = {"video_dir": None, "environment": environment, "nvdec_ceiling": {"h264.mp4": ceiling}}
        (tmp_path / "20_decode_benchmarks.json").write_text(json.dumps(doc))

    def fps(clip="/media/h264.mp4"):
        return loader_bench.clip_ceiling(clip, tmp_path, None, 0, ((7, 4),), 3.0)["fps"]

    assert fps() == 1.0  # no notebook 20 here: measured now
    write_20()
    assert fps() == 4277.0 and fps("/media/hevc.mp4") == 1.0  # 20's, for the clip 20 measured
    assert loader_bench.clip_ceiling("/media/h264.mp4", tmp_path, None, 0, (), 3.0)["measured_by"].startswith(
        "notebook 20"
    )
    for other in ({"saturated": False}, {"gpu": "NVIDIA H200"}, {"version": media.MEDIA_VERSION - 1}):
        write_20(**other)
        assert fps() == 1.0  # a lower bound, another GPU model or other media: measured now


@pytest.mark.media
def test_a_short_run_of_21s_loaders_for_22_measures_the_tables_first_two_libraries(tmp_path, monkeypatch):
    """Notebook 22 without 21 (the workshop path): whole loaders measured short on the reader's files, the CPU
    libraries in the order of 22's one-caller table, what 21 would have written of them, read as 21's are."""
    from playbook_utils.bench import media
    from playbook_utils.bench import choose
    from playbook_utils.decoders import available

    if not {"pyav", "torchcodec"} <= set(available("cpu")):
        pytest.skip("needs PyAV and TorchCodec")
    monkeypatch.setitem(loader_bench.SHORT, "max_s", 1)
    monkeypatch.setitem(loader_bench.SHORT, "budget_s", 1)
    clips = [media.make_clip(tmp_path / f"{c}.mp4", "h264", 96, 64, num_frames=32, gop=8) for c in "ab"]
    row = {"status": "ok", "device": "cpu", "workload": "uniform16", "exact": True}
    table = [{**row, "backend": "torchcodec", "fps": 200.0}, {**row, "backend": "pyav", "fps": 100.0}]
    said = []
    got = loader_bench.short_whole_loaders(clips, 16, "cpu", tmp_path / "epoch", rows=table, log=said.append)
    assert got["short"] and got["k"] == 16 and got["gpu_sampled"] == [] and not got["stuck"]
    assert [r["backend"] for r in got["sweep"]] == ["torchcodec", "pyav"]  # the table's first two
    assert all(r["samples_per_s"] > 0 for r in got["sweep"])
    assert {u["backend"] for u in got["unmeasured"]} == set(available("cpu")) & {"decord", "spdl"}
    assert rates(said[0]) == [("torchcodec", "200"), ("pyav", "100")]  # the order, from the table
    cands = choose.loader_candidates(got, "uniform16", "h264", ["cpu"])
    assert {c["backend"] for c in cands} == {"torchcodec", "pyav"}
    assert all("short" in c["source"].split() for c in cands)  # said to come from the short run


@pytest.mark.media
def test_a_route_is_measured_as_one_loader_over_the_files_each_entry_takes(tmp_path, monkeypatch):
    """22's route, measured: DALI's CPU decoder takes VP9 only, so the route (dali, pyav) reads the VP9 clip with
    DALI and the H.264 one with PyAV, in one loader; the shares are said beside the rate."""
    from playbook_utils.bench import media
    from playbook_utils.decoders import why_unavailable

    monkeypatch.setitem(loader_bench.SHORT, "max_s", 1)
    smoke = media.default_media(smoke=True)
    files = [smoke["vp9_144p_gop12.webm"], smoke["h264_144p_gop12.mp4"]]
    got = loader_bench.short_route(("dali@cpu", "pyav@cpu"), files, 8, "cpu", tmp_path / "epoch")
    dali = why_unavailable("dali", "cpu", files[0]) is None
    assert got["read_by"] == ({"dali@cpu": 1, "pyav@cpu": 1} if dali else {"pyav@cpu": 2})
    assert got["status"] == "ok" and got["frames_per_s"] > 0, got
    nobody = loader_bench.short_route(("dali@cpu",), [files[1]], 8, "cpu", tmp_path / "epoch")
    assert nobody["status"] == "failed" and nobody["read_by"] == {"none": 1}
    # a reader's folder: sizes that differ (batched at the most common one, as 21's loaders are) and a damaged file
    # (skipped, as in 21's): the route had failed on both, its cause cut off behind DataLoader's "Caught ValueError"
    other = media.make_clip(tmp_path / "other.mp4", width=320, height=240, num_frames=48, gop=12)
    (tmp_path / "damaged.mp4").write_bytes(reader_folder.damaged_mid(files[1].read_bytes()))
    mixed = [files[1], smoke["hevc_144p_gop12.mp4"], other, tmp_path / "damaged.mp4"]
    got = loader_bench.short_route(("torchcodec@cpu", "pyav@cpu"), mixed, 8, "cpu", tmp_path / "mixed")
    assert got["status"] == "ok" and got["frames_per_s"] > 0, got
    worker = "Caught ValueError in DataLoader worker process 0.\nOriginal Traceback ...\nValueError: a.mp4: the cause"

    def fails(*args, **kwargs):
        raise ValueError(worker)

    monkeypatch.setattr(loader_bench, "measure_loader", fails)
    got = loader_bench.short_route(("pyav@cpu",), [files[1]], 8, "cpu", tmp_path / "fails")
    assert got["status"] == "failed" and got["why"] == "ValueError: a.mp4: the cause"  # the worker's own line


def test_ceilings_sweep_once_and_run_the_other_codec_where_it_levelled(monkeypatch):
    calls = []
    layouts = ((1, 1), (7, 2), (7, 4), (16, 4))

    def fake(path, configs, seconds, gpu, log, if_unsaturated=(), started=None):
        calls.append((path, tuple(configs), tuple(if_unsaturated)))
        rows = [
            {"processes": p, "threads": t, "decoder": "nv", "fps": 100.0 * p * t, "nvdec_util_median": 99}
            for p, t in configs
        ]
        return {"fps": rows[-1]["fps"], "best": rows[-1], "saturated": True, "implied_fps": None, "rows": rows}

    monkeypatch.setattr(nvdec, "ceiling", fake)

    class Info:
        def __init__(self, codec):
            self.codec, self.width, self.height, self.bit_rate = codec, 1920, 1080, 8_000_000

    infos = {"h.mp4": Info("h264"), "v.mp4": Info("hevc")}
    nvdec.ceilings(
        {n: n for n in infos}, infos, ["h.mp4", "v.mp4"], [], layouts[:3], 1.0, if_unsaturated=((7, 4), (16, 4))
    )
    # the whole sweep on the first codec's clip; the second runs the best layout (7 x 4) and the one below it, and
    # more decoders (16 x 4) only where those do not saturate, as the first did
    assert calls == [("h.mp4", layouts[:3], ((7, 4), (16, 4))), ("v.mp4", ((7, 2), (7, 4)), ((16, 4),))]
    assert nvdec.where_it_levelled(fake("x", layouts, 1, 0, None)) == ((7, 4), (16, 4))
    assert nvdec.where_it_levelled(fake("x", ((4, 2),), 1, 0, None)) == ((4, 2),)  # nothing below: the best alone


def test_the_data_wait_runs_the_tied_loader_that_looks_least_far_ahead():
    def row(threads, fps, spread, clip="a.mp4"):
        return {
            "kind": "gpu",
            "backend": "torchcodec",
            "threads": threads,
            "loader": f"torchcodec x{threads} threads",
            "clip": clip,
            "frames_per_s": fps,
            "frames_per_s_spread_pct": spread,
            "steady": True,
        }

    # the H200's 12-03 rows: x64 4,149 (1.2%), x32 4,032 (4.6%): tied, and x32 decodes 64 videos ahead, not 128
    rows = [row(16, 3274, 3.0), row(32, 4032, 4.6), row(64, 4149, 1.2), row(64, 9000, 1.0, clip="b.mp4")]
    pick, why = loader_bench.wait_loader(rows)
    # tied with the fastest (named), both rates, and the videos each keeps ahead
    assert pick["threads"] == 32 and rows[2]["loader"] in why and quoted(why) == ["4,032", "4,149", "64", "128"]
    dali = {**row(0, 4100, 5.0), "kind": "dali", "backend": "dali", "loader": "dali reader"}  # look-ahead 0
    processes = {**row(2, 4100, 5.0), "processes": 4, "loader": "torchcodec 4 processes x2 threads"}
    assert loader_bench.wait_loader(rows + [dali, processes])[0]["threads"] == 32  # only the same one-process loader
    rows[1]["frames_per_s"] = 3800  # 9% behind: not tied, so the fastest runs it
    assert loader_bench.wait_loader(rows) == (rows[2], "")
    assert loader_bench.wait_loader([{**rows[0], "steady": False}]) == (None, "")


@pytest.mark.parametrize(
    ("module_rates", "within"),
    [
        ([570.0, 1000.0, 720.0], True),  # 43% below the loader's median, but inside the module's spread of 60%
        ([560.0, 570.0, 580.0], False),  # 43% below, both spreads under 4%: a real gap
        ([950.0, 960.0, 970.0], True),  # 4% below: within the 10% that counts as the same
    ],
)
def test_the_module_is_beside_the_loader_when_the_gap_is_inside_the_spread(tmp_path, monkeypatch, module_rates, within):
    clip = tmp_path / "a.mp4"
    clip.write_bytes(b"x")
    rates = {"module": iter(module_rates), "cpu": iter([990.0, 1000.0, 1010.0])}
    monkeypatch.setattr(
        loader_bench, "measure_isolated", lambda spec: {"status": "ok", "frames_per_s": next(rates[spec["kind"]])}
    )
    side = loader_bench.module_beside_playbook("pyav", "cpu", [clip], 8, 2, 4, tmp_path / "epoch", rounds=3, items=2)
    assert side["status"] == "ok" and side["playbook"] == 1000.0
    assert side["within"] is within
