"""Notebook 22's decision as data: the reader's folder, the tree, the candidates and the recommendation."""

import json
import re
import shutil

import pytest

from playbook_utils import folders
from playbook_utils.bench import choose, media
from tests.footage import footage_frame
from tests.sentences import libraries, numbers


@pytest.mark.media
def test_scan_videos_keeps_the_readable_and_names_the_rest_with_their_cause(tmp_path):
    media.make_clip(tmp_path / "sub" / "a.mp4", "h264", 96, 64, num_frames=8, gop=4, picture=footage_frame)
    (tmp_path / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(200))
    (tmp_path / "empty.mkv").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a video")
    media.make_clip(tmp_path / "old.avi", "h264", 96, 64, num_frames=8, gop=4, bframes=2)  # frames without a place
    media.make_clip(tmp_path / "dvd.mpg", "mpeg2video", 96, 64, num_frames=8, gop=4)  # MPEG-PS: seeks miss
    media.make_clip(tmp_path / "old.wmv", "wmv2", 96, 64, num_frames=8, gop=4, bframes=0)  # an older collection's
    (tmp_path / "poster.JPG").write_bytes(b"")
    (tmp_path / "sub" / "._a.mp4").write_bytes(b"\x00\x05\x16\x07")  # macOS's metadata of a.mp4, on a USB drive
    folder = folders.scan_videos(tmp_path)
    assert list(folder.videos) == ["old.wmv", "sub/a.mp4"] and folder.infos["sub/a.mp4"].num_frames == 8
    assert folder.others == {".txt": 1, ".jpg": 1, "._ (macOS metadata)": 1}  # counted, not probed
    assert set(folder.unreadable) == {"broken.mp4", "empty.mkv", "old.avi", "dvd.mpg"}
    assert all(len(cause) > 10 for cause in folder.unreadable.values())
    report = folder.report()
    assert "2 readable" in report and "broken.mp4: " + folder.unreadable["broken.mp4"] in report
    with pytest.raises(Exception, match="not a folder"):
        folders.scan_videos(tmp_path / "notes.txt")


@pytest.mark.media
def test_scan_videos_over_max_files_reads_evenly_spaced_files_and_counts_the_rest(tmp_path):
    for name in ("a/1.mp4", "a/2.mp4", "a/3.mp4", "b/1.mp4", "b/2.mp4"):
        media.make_clip(tmp_path / name, "h264", 64, 48, num_frames=4, gop=4)
    folder = folders.scan_videos(tmp_path, max_files=2)
    assert list(folder.videos) == ["a/2.mp4", "b/1.mp4"] and folder.left_out == 3  # both subfolders sampled
    assert "3 more" in folder.report()
    assert folders.scan_videos(tmp_path, max_files=5).left_out == 0
    for i in range(folders.MAX_FILES):  # a dataset's folder: 20, 21 and 30 scan it with the default cap
        (tmp_path / "c" / f"{i:04d}.mp4").parent.mkdir(exist_ok=True)
        (tmp_path / "c" / f"{i:04d}.mp4").hardlink_to(tmp_path / "a" / "1.mp4")
    every = folders.scan_videos(tmp_path)
    assert len(every.videos) == folders.MAX_FILES and every.left_out == 5


@pytest.mark.media
def test_scan_videos_follows_a_linked_class_folder_once_and_not_a_link_back_up(tmp_path):
    media.make_clip(tmp_path / "elsewhere" / "x.mp4", "h264", 64, 48, num_frames=4, gop=4)
    (tmp_path / "videos" / "a").mkdir(parents=True)
    media.make_clip(tmp_path / "videos" / "a" / "y.mp4", "h264", 64, 48, num_frames=4, gop=4)
    for name in ("linked", "linked_again"):  # a dataset assembled from links: two to one folder
        (tmp_path / "videos" / name).symlink_to(tmp_path / "elsewhere")
    (tmp_path / "videos" / "a" / "up").symlink_to(tmp_path / "videos")  # a loop
    assert list(folders.scan_videos(tmp_path / "videos").videos) == ["a/y.mp4", "linked/x.mp4"]


def _row(backend, device, clip, fps, spread, workload="uniform16"):
    return {
        "backend": backend,
        "device": device,
        "clip": clip,
        "fps": fps,
        "rate_spread_pct": spread,
        "workload": workload,
        "status": "ok",
        "exact": True,
    }


INFO = {"a.mp4": {"codec": "h264", "gop": 30}, "b.mp4": {"codec": "h264", "gop": 250}}


def test_the_tree_names_a_winner_per_case_and_calls_ties():
    rows = [
        _row("pyav", "cpu", "a.mp4", 100, 5),
        _row("torchcodec", "cpu", "a.mp4", 90, 5),
        _row("pyav", "cpu", "b.mp4", 100, 30),
        _row("torchcodec", "cpu", "b.mp4", 95, 10),
        {**_row("decord", "cpu", "a.mp4", 999, 1), "exact": False},
    ]
    tree = choose.decision_tree(rows, INFO)
    short = tree[("cpu", "h264", "short GOP (<= 60)", "uniform16")]
    assert (short["best"], short["runner_up"], short["tied"]) == ("pyav", "torchcodec", False)
    assert tree[("cpu", "h264", "long GOP (> 60)", "uniform16")]["tied"] is True
    # two clips in one case: backends compared on the clips all of them read, not each on its best one (the H200's
    # tree had put TorchCodec on the open-GOP file against PyNvVideoCodec on the closed one)
    info = {"closed.mp4": {"codec": "hevc", "gop": 30}, "open.mp4": {"codec": "hevc", "gop": 60}}
    rows = [_row("torchcodec", "cuda", "closed.mp4", 290, 4), _row("torchcodec", "cuda", "open.mp4", 296, 4),
            _row("pynvvideocodec", "cuda", "closed.mp4", 239, 2), _row("pynvvideocodec", "cuda", "open.mp4", 136, 1),
            _row("dali", "cuda", "closed.mp4", 300, 1)]  # fmt: skip
    case = choose.decision_tree(rows, info)[("cuda", "hevc", "short GOP (<= 60)", "uniform16")]
    assert case["clips"] == ["closed.mp4"] and (case["best"], case["runner_up"]) == ("dali", "torchcodec")
    both = choose.decision_tree(rows[:4], info)[("cuda", "hevc", "short GOP (<= 60)", "uniform16")]
    assert (
        both["clips"] == ["closed.mp4", "open.mp4"] and both["best_value"] == 293 and both["runner_up_value"] == 187.5
    )


def test_the_recommendation_weighs_coverage_against_speed_and_reports_its_runner_up():
    group = ("h264", "96x64", "short GOP (<= 60)")
    cover = {
        ("decord", "cpu"): {"accepted": 3},
        ("pyav", "cpu"): {"accepted": 4},
        ("torchcodec", "cpu"): {"accepted": 4},
    }
    # decord is only a little faster (inside the spread) and refuses a file: the one that takes every file wins
    rows = [
        _row("decord", "cpu", "a.mp4", 110, 20),
        _row("pyav", "cpu", "a.mp4", 100, 5),
        _row("torchcodec", "cpu", "a.mp4", 80, 5),
    ]
    rec = choose.recommend(choose.one_caller_candidates(rows, INFO, group, "uniform16", ["cpu"]), cover, 4)
    assert rec["backend"] == "pyav" and rec["accepts_all"] and rec["fallback"] is None
    # its runner-up is the one it tied with, which the tie rule set behind it for the file it refuses
    assert rec["runner_up"]["backend"] == "decord" and rec["verdict"]["tied"]
    assert rec["verdict"]["margin_pct"] == pytest.approx(10.0)
    # all three tied, and the tie rule takes the slowest: the margin is the fastest's over it, not the second's
    spread = {
        ("decord", "cpu"): {"accepted": 4},
        ("pyav", "cpu"): {"accepted": 4},
        ("torchcodec", "cpu"): {"accepted": 4},
    }
    wide = [_row("torchcodec", "cpu", "a.mp4", 120, 50), _row("decord", "cpu", "a.mp4", 110, 50), rows[1]]
    rec = choose.recommend(choose.one_caller_candidates(wide, INFO, group, "uniform16", ["cpu"]), spread, 4)
    assert rec["backend"] == "pyav" and rec["runner_up"]["backend"] == "torchcodec" and rec["verdict"]["tied"]
    assert rec["verdict"]["runner_up"] == "pyav on cpu" and rec["verdict"]["margin_pct"] == pytest.approx(20.0)
    # far faster than anything that takes every file: it wins, with that one for the files it refuses
    rows[0] = _row("decord", "cpu", "a.mp4", 300, 5)
    rec = choose.recommend(choose.one_caller_candidates(rows, INFO, group, "uniform16", ["cpu"]), cover, 4)
    assert rec["backend"] == "decord" and not rec["accepts_all"] and rec["fallback"]["backend"] == "pyav"
    assert choose.recommend([], cover, 4) is None


def test_loader_candidates_read_notebook_21():
    nb21 = {
        "k": 16,
        "sweep": [
            {"backend": "pyav", "workers": 2, "samples_per_s": 3.0, "samples_per_s_spread_pct": 4.0},
            {"backend": "pyav", "workers": 1, "samples_per_s": 2.0},
        ],
        "gpu_sampled": [{"backend": "torchcodec", "threads": 16, "frames_per_s": 400.0}],
        "gpu_loaders": [
            {
                "clip": "x.mp4",
                "codec": "hevc",
                "kind": "gpu",
                "backend": "torchcodec",
                "threads": 16,
                "loader": "torchcodec x16 threads",
                "frames_per_s": 8000.0,
                "steady": True,
                "verdict": "below",
            },
            {  # above a saturated ceiling: one of the measurements is wrong, so it is no candidate
                "clip": "x.mp4",
                "codec": "hevc",
                "kind": "gpu",
                "backend": "pynvvideocodec",
                "threads": 64,
                "loader": "pynvvideocodec x64 threads",
                "frames_per_s": 12000.0,
                "steady": True,
                "verdict": "above",
            },
        ],
    }
    cpu = choose.loader_candidates(nb21, "uniform16", "h264", ["cpu"])
    assert [(c["backend"], c["fps"], c["spread_pct"]) for c in cpu] == [("pyav", 48.0, 4.0)]
    assert "num_workers=2, k=16" in cpu[0]["how"]
    both = choose.loader_candidates(nb21, "uniform16", "h264", ["cpu", "cuda"])
    assert {c["device"] for c in both} == {"cpu", "cuda"}
    seq = choose.loader_candidates(nb21, "sequential", "hevc", ["cpu", "cuda"])
    assert [c["how"] for c in seq] == ["loaders.GpuLoader(paths, backend='torchcodec', threads=16)"]
    assert choose.loader_candidates(nb21, "clips4x8s2", "h264", ["cpu", "cuda"]) == []
    # a library the sweep left unmeasured is listed, never silently missing from the ranking
    assert choose.unmeasured(nb21, "uniform16") == []
    nb21["unmeasured"] = [{"backend": "spdl", "workers": 2}, {"backend": "torchcodec", "workers": 2}]
    assert choose.unmeasured(nb21, "uniform16") == ["spdl", "torchcodec"]
    assert choose.unmeasured(nb21, "sequential") == []  # not 21's sampled workload: nothing it could rank
    nb21["unmeasured"].append({"backend": "pyav", "workers": 4})  # measured with another worker count
    assert choose.unmeasured(nb21, "uniform16") == ["spdl", "torchcodec"]


def test_the_decision_rests_on_the_realistic_clips_where_there_are_any():
    info = {"a.mp4": {"codec": "h264", "gop": 12, "light": True}, "b_8mbps.mp4": {"codec": "h264", "gop": 12}}
    assert list(choose.realistic_clips(info)) == ["b_8mbps.mp4"]
    only_light = {"a.mp4": {"codec": "h264", "gop": 12, "light": True}}
    assert choose.realistic_clips(only_light) == only_light
    # 22's source line says on which of the files 20's table rests, and what it left out
    assert choose.table_words({"a.mp4", "b_8mbps.mp4"}, choose.realistic_clips(info)) == (
        "notebook 20's table, on 1 of these files (b_8mbps.mp4); the light synthetic clip it also timed left out: "
        "light clips decode faster than filmed video, and not by the same factor for every library"
    )
    assert choose.table_words({"a.mp4"}, only_light) == "notebook 20's table, on 1 of these files (a.mp4)"
    assert choose.table_words(set(), {}) == "notebook 20's table, which holds no rows"
    rows = [
        {
            "clip": c,
            "backend": b,
            "device": "cpu",
            "workload": "sequential",
            "status": "ok",
            "exact": True,
            "fps": f,
            "rate_spread_pct": 1.0,
        }
        for c, b, f in (
            ("a.mp4", "torchcodec", 900.0),
            ("a.mp4", "spdl", 500.0),
            ("b_8mbps.mp4", "torchcodec", 400.0),
            ("b_8mbps.mp4", "spdl", 600.0),
        )
    ]
    assert choose.decision_tree(rows, info)[("cpu", "h264", choose.gop_class(12), "sequential")]["best"] == "torchcodec"
    tree = choose.decision_tree(rows, choose.realistic_clips(info))
    assert tree[("cpu", "h264", choose.gop_class(12), "sequential")]["best"] == "spdl"


def test_the_module_handed_over_is_the_recommended_paths_with_the_measured_settings(tmp_path):
    rec = {
        "backend": "torchcodec",
        "device": "cpu",
        "how": "loaders.make_loader(paths, backend='torchcodec', num_workers=6, k=8, batch_size=2)",
    }
    got = choose.hand_over(rec, "uniform8", tmp_path)
    assert got["modules"] == ["torchcodec_clips.py"] and (tmp_path / "torchcodec_clips.py").is_file()
    assert (got["k"], got["workers"], got["batch_size"], got["route"]) == (8, 6, 2, None)
    gpu = {
        "backend": "pynvvideocodec",
        "device": "cuda",
        "how": "loaders.GpuLoader(paths, backend='pynvvideocodec', threads=12)",
    }
    got = choose.hand_over(gpu, "sequential", tmp_path)  # the measured threads; K = 16 where the workload has none
    assert (got["k"], got["workers"], got["modules"]) == (16, 12, ["pynvvideocodec_clips.py"]) and got["why"]
    said, *code = got["usage"].splitlines()  # the code a reader copies says it reads K frames, not every frame
    assert said.startswith("# ") and "sequential" in said and "k=16" in said and code[0].startswith("from ")
    assert not choose.hand_over(rec, "uniform8", tmp_path)["usage"].startswith("#")
    assert choose.hand_over({**rec, "backend": "decord", "device": "cuda"}, "uniform8", tmp_path)["modules"] == []
    assert choose.hand_over(None, "uniform8", tmp_path)["why"]
    same = {**rec, "device": "cuda", "fallback": {"backend": "torchcodec", "device": "cpu"}}  # one module, both legs
    assert choose.hand_over(same, "uniform8", tmp_path / "same")["modules"] == ["torchcodec_clips.py"]


@pytest.mark.media
@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="needs the ffmpeg command-line tool (an edit list)")
def test_a_route_hands_over_both_legs_and_which_files_each_reads(tmp_path):
    clip = media.make_clip(tmp_path / "a.mp4", width=256, height=144, num_frames=24, gop=4)
    files = [clip, media.hide_leading_frames(clip, tmp_path / "c.mp4", 6)]
    rec = {"backend": "torchcodec", "device": "cpu", "how": "loaders.make_loader(paths, backend='torchcodec', num_workers=2)",
           "fallback": {"backend": "pyav", "device": "cpu"}}  # fmt: skip
    got = choose.hand_over(rec, "uniform4", tmp_path / "out", files)
    assert sorted(got["modules"]) == ["pyav_clips.py", "torchcodec_clips.py"]
    assert got["route"] == {"torchcodec on cpu": [str(files[0])], "pyav on cpu": [str(files[1])]}  # edit list: PyAV
    assert json.loads((tmp_path / "out" / "22_route.json").read_text()) == got["route"]


def test_a_recommendation_that_refuses_files_becomes_a_route_with_its_fallback():
    rec = {"backend": "torchcodec", "device": "cuda", "how": "loaders.GpuLoader(paths, backend='torchcodec', threads=16)",
           "fallback": {"backend": "pyav", "device": "cpu", "how": "loaders.make_loader(paths, backend='pyav')"}}  # fmt: skip
    assert choose.route_call(rec) == "loaders.GpuLoader(paths, backend=('torchcodec@cuda', 'pyav@cpu'), threads=16)"
    assert choose.route_call({**rec, "fallback": None}) is None
    assert choose.route_call({**rec, "how": "loaders.dali_loader(paths)"}) is None
    assert (
        choose.route_of(rec) == ("torchcodec@cuda", "pyav@cpu") and choose.route_of({**rec, "fallback": None}) is None
    )
    assert choose.settings(rec)[1] == 16 and choose.settings({"how": "make_loader(paths, num_workers=3)"}) == (3, 4)
    # the mix's expected rate: 3 files at 300 frames/s and 1 at 30 take 3/300 + 1/30 s per frame of each file
    rec.update(fps=300.0, accepted=3)
    rec["fallback"]["fps"] = 30.0
    assert choose.mix_rate(rec, 4) == pytest.approx(4 / (3 / 300 + 1 / 30))
    assert 30 < choose.mix_rate(rec, 4) < 300 and choose.mix_rate({**rec, "fallback": None}, 4) is None


def test_a_tie_is_broken_by_the_stated_rule_and_says_so():
    group = ("h264", "96x64", "short GOP (<= 60)")
    cover = {
        ("decord", "cpu"): {"accepted": 4},
        ("pyav", "cpu"): {"accepted": 4},
        ("torchcodec", "cpu"): {"accepted": 4},
    }
    # torchcodec 5% ahead of pyav inside a 20% spread: tied; both take every file on the CPU, pyav is the simpler
    rows = [_row("torchcodec", "cpu", "a.mp4", 105, 20), _row("pyav", "cpu", "a.mp4", 100, 20)]
    rec = choose.recommend(choose.one_caller_candidates(rows, INFO, group, "uniform16", ["cpu"]), cover, 4)
    assert rec["backend"] == "pyav" and rec["runner_up"]["backend"] == "torchcodec" and rec["verdict"]["tied"]
    label, why = choose.tie_break(rec, rec["runner_up"])  # both take every file on the CPU: the simpler dependency
    assert label == "pyav on cpu" and rec["sentence"].endswith(why)  # the rule's reason, after the two tied
    assert libraries(rec["sentence"])[:3] == ["torchcodec", "pyav", "pyav"]
    # three tied (the third inside the spread too): the rule runs over all of them, and the runner-up is the fastest
    # of the others (a 2-core smoke run had recommended pyav with 'runner-up: pyav', the verdict's second)
    rows = [_row("torchcodec", "cpu", "a.mp4", 105, 20), _row("decord", "cpu", "a.mp4", 101, 20),
            _row("pyav", "cpu", "a.mp4", 97, 20)]  # fmt: skip
    rec = choose.recommend(choose.one_caller_candidates(rows, INFO, group, "uniform16", ["cpu"]), cover, 4)
    assert rec["backend"] == "pyav" and rec["runner_up"]["backend"] == "torchcodec"
    assert rec["verdict"]["tied"] and [t[0] for t in rec["verdict"]["also_tied"]] == ["pyav on cpu"]
    # all three named in rate order, then the one the rule took, with the rule's reason
    assert libraries(rec["sentence"])[:4] == ["torchcodec", "decord", "pyav", "pyav"]
    assert rec["sentence"].endswith(choose.tie_break(rec, rec["runner_up"])[1])
    # no spread measured (one run each, as 21 in smoke mode): a 6% margin decides nothing, the rule does (on the
    # H200 22 had called decord 'the best choice' this way, against the TorchCodec its own tree put first)
    rows = [_row("decord", "cpu", "a.mp4", 142, None), _row("torchcodec", "cpu", "a.mp4", 134, None)]
    rec = choose.recommend(choose.one_caller_candidates(rows, INFO, group, "uniform16", ["cpu"]), cover, 4)
    assert rec["backend"] == "torchcodec" and rec["verdict"]["tied"] and rec["verdict"]["spread_pct"] is None
    assert rec["verdict"]["margin_pct"] == pytest.approx(100 * (142 / 134 - 1))
    a = {"backend": "pyav", "device": "cpu", "accepted": 4, "fps": 10}
    assert choose.tie_break(a, {**a, "backend": "torchcodec", "device": "cuda"})[0] == "torchcodec on cuda"
    assert choose.tie_break(a, {**a, "backend": "decord", "accepted": 5}) == (
        "decord on cpu",
        "it takes more of your files (5 against 4)",
    )
    assert choose.tie_break(a, {**a, "fps": 12})[1] == "nothing else tells them apart: the higher rate"


def test_the_main_kind_of_file_is_the_most_common_and_a_tie_takes_the_largest_frames():
    def p(codec, w, h):
        return {"codec": codec, "width": w, "height": h, "gop": 30, "traits": []}

    profile = {
        "a": p("h264", 640, 360),
        "b": p("hevc", 1920, 1080),
        "c": p("h264", 640, 360),
        "d": p("hevc", 1920, 1080),
    }
    group, said = choose.main_group(profile)
    assert group == ("hevc", "1920x1080", "short GOP (<= 60)") and said.index(" ".join(group)) < said.index("640x360")
    assert re.findall(r"\((\d+) files\)", said) == ["2"]  # as many of each kind: the larger frames were taken
    assert choose.main_group({"a": p("vp9", 320, 180)})[1].endswith("(1 files)")
    assert choose.main_group({}) == (None, "no readable file")
    # as many files and as many pixels: the sentence does not claim the larger frames decided it
    group, said = choose.main_group({"a": p("h264", 256, 144), "b": p("hevc", 256, 144)})
    assert group[0] == "h264" and "the first listed" in said and "the most pixels" not in said
    assert "the most pixels" in choose.main_group(profile)[1]


def test_the_route_report_gives_the_measured_mix_or_says_it_is_computed(monkeypatch):
    """22's lines under a recommendation that refuses some files: the route, its rate measured as one loader
    (`loader_bench.short_route`, stood in for here), or, unmeasured, the rate computed from the two alone."""
    from playbook_utils.bench import loader_bench

    rec = {"backend": "torchcodec", "device": "cuda", "how": "loaders.GpuLoader(paths, backend='torchcodec', threads=8)",
           "fps": 300.0, "accepted": 3, "fallback": {"backend": "pyav", "device": "cpu", "how": "x", "fps": 30.0}}  # fmt: skip
    asked = []

    def short_route(route, files, k, device, folder, workers, threads):
        asked.append((route, k, threads))
        return {
            "status": "ok",
            "frames_per_s": 120.0,
            "spread_pct": 5.0,
            "read_by": {"torchcodec@cuda": 3, "pyav@cpu": 1},
        }

    monkeypatch.setattr(loader_bench, "short_route", short_route)
    files = ["a", "b", "c", "d"]
    lines, ran = choose.route_report(rec, files, "uniform16", "cuda", "/tmp")
    assert lines[1] == "    loaders.GpuLoader(paths, backend=('torchcodec@cuda', 'pyav@cpu'), threads=8)"
    assert (
        lines[2]
        == "  measured here as one loader, short: 120 frames/s (spread 5%), files read by torchcodec@cuda 3, pyav@cpu 1"
    )
    assert ran["frames_per_s"] == 120.0 and asked == [(("torchcodec@cuda", "pyav@cpu"), 16, 8)]
    lines, ran = choose.route_report(rec, files, "sequential", "cuda", "/tmp")  # every frame: not measured here
    # not measured: computed from the files each reads (3 and 1) and the two rates alone
    assert ran is None and len(asked) == 1 and numbers(lines[2]) == ["3", "1", str(round(4 / (3 / 300 + 1 / 30)))]
    assert choose.route_report({**rec, "fallback": None}, files, "uniform16", "cuda", "/tmp") == ([], None)


def _leaf(best, runner_up, tied=False, margin=10.0, spread=5.0):
    return {
        "best": best,
        "runner_up": runner_up,
        "tied": tied,
        "margin_pct": margin,
        "spread_pct": spread,
        "also_tied": (),
    }


def test_the_recommendation_is_set_beside_the_tree_leaf_of_its_case():
    group = ("h264", "256x144", "short GOP (<= 60)")
    leaf = _leaf("spdl", "torchcodec")
    tree = {("cpu", "h264", "short GOP (<= 60)", "uniform16"): leaf}
    rec = {"backend": "torchcodec", "device": "cpu"}
    assert choose.tree_leaf(rec, tree, group, "uniform16") is leaf
    assert choose.tree_leaf({**rec, "device": "cuda:0"}, tree, group, "uniform16") is None  # no GPU leaf
    assert choose.tree_leaf(rec, tree, group, "sequential") is None
    assert choose.tree_leaf(None, tree, group, "uniform16") is None and choose.tree_leaf(rec, tree, None, "x") is None


def test_notebooks_that_read_clips_of_another_media_version_are_named():
    """20's table made on the clips of media version 3 (no version stamped: older), 21's loaders on this run's:
    22 says the rates it sets side by side came from other bytes under the same names."""
    now = {"environment": {"media_version": media.MEDIA_VERSION}}
    assert choose.media_mismatch({"notebook 20's table": now, "notebook 21's loaders": now}) is None
    assert choose.media_mismatch({"notebook 20's table": None, "notebook 21's loaders": now}) is None  # not used
    said = choose.media_mismatch({"notebook 20's table": {"environment": {}}, "notebook 21's loaders": now})
    # notebook 20 named with its version (none stamped: before 4) and this run's; 21, on this run's, not named
    assert numbers(said) == ["20", "4", str(media.MEDIA_VERSION)]


def test_the_candidates_come_from_21s_loaders_on_the_same_files_else_the_one_caller_table(tmp_path, monkeypatch):
    nb21 = {"k": 16, "video_dir": None, "environment": {"date_utc": "2026-12-06 04:00"},
            "sweep": [{"backend": "pyav", "workers": 2, "samples_per_s": 3.0}],
            "unmeasured": [{"backend": "spdl", "workers": 2}]}  # fmt: skip
    (tmp_path / "21_training_loader_benchmarks.json").write_text(json.dumps(nb21))
    group = ("h264", "256x144", "short GOP (<= 60)")
    args = (tmp_path, None, {}, "uniform16", group, ["cpu"], "cpu", [], {})
    found = choose.candidates_for(*args, short_run=False, log=lambda _: None)
    assert [c["backend"] for c in found["candidates"]] == ["pyav"] and found["when"] == "2026-12-06 04:00"
    assert found["source"].startswith("notebook 21") and found["nb21"]["sweep"] == nb21["sweep"]
    assert found["unmeasured"] == ["spdl"]  # the library 21's sweep left out, listed beside the candidates
    # 21 measured other files: its loaders are left out, and the one-caller table (here empty) decides
    said = []
    other = choose.candidates_for(tmp_path, "/my/videos", *args[2:], short_run=False, log=said.append)
    assert (
        other["candidates"] == [] and other["when"] is None and other["source"] == "the one-caller table of section 3"
    )
    assert other["unmeasured"] == [] and len(said) == 1  # the one-caller table ranks every library it measured
    # a short run here where 21 did not measure these files: its candidates, from loader_bench.short_whole_loaders
    monkeypatch.setattr(choose.loader_bench, "short_whole_loaders", lambda *a, **k: {**nb21, "short": True})
    short = choose.candidates_for(tmp_path, "/my/videos", *args[2:], log=lambda _: None)
    assert [c["backend"] for c in short["candidates"]] == ["pyav"] and short["nb21"]["short"] and short["when"] is None


@pytest.mark.media
def test_a_gpu_backend_refusing_a_kind_of_file_when_it_reads_it_refuses_every_file_of_that_kind(tmp_path, monkeypatch):
    # notebook 22 on an H100: TorchCodec on CUDA was counted as taking 19 of 19 files, then refused the AV1 one
    from playbook_utils import child
    from playbook_utils.decoders import adapter

    a = media.make_clip(tmp_path / "a.mp4", "h264", 64, 48, num_frames=4)
    b = media.make_clip(tmp_path / "b.mp4", "h264", 64, 48, num_frames=4)
    v = media.make_clip(tmp_path / "v.webm", "vp9", 64, 48, num_frames=4)
    paths = {"a.mp4": a, "b.mp4": b, "v.webm": v}
    cover = {("torchcodec", "cuda"): {"refusals": {}}, ("pyav", "cpu"): {"refusals": {}}}
    asked = {}

    def fake_call_all(jobs, timeout, env):
        asked.update(jobs)
        return {k: {"status": "unavailable", "cause": "NVDEC cannot decode this vp9 stream"} if k[2][0] == "vp9"
                else {"status": "ok", "error": None} for k in jobs}  # fmt: skip

    monkeypatch.setattr(child, "call_all", fake_call_all)
    monkeypatch.setattr(adapter("torchcodec"), "_learned", {})  # what it learns stays in this test
    refused = choose.refused_when_read(paths, cover)
    # one file of each kind read once, on the GPU only
    assert sorted(k[2][0] for k in asked) == ["h264", "vp9"] and {k[:2] for k in asked} == {("torchcodec", "cuda")}
    assert list(refused) == [("torchcodec", "cuda")] and list(refused[("torchcodec", "cuda")]) == ["v.webm"]
    # learned by the adapter: every later check of a file of that kind says the same
    info = media.probe(v)
    assert adapter("torchcodec")._why_file(info, "cuda") == refused[("torchcodec", "cuda")]["v.webm"]
    assert adapter("torchcodec")._why_file(media.probe(a), "cuda") is None
    # the child itself: frame 0 read, or the failure as data naming the file
    ok = child.call(child.python("-m", "playbook_utils.bench.choose", str(a), "pyav", "cpu"))
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"no video")
    bad = child.call(child.python("-m", "playbook_utils.bench.choose", str(broken), "pyav", "cpu"))
    assert ok["status"] == "ok" and bad["status"] == "error" and "broken.mp4" in bad["error"]


@pytest.mark.media
def test_one_odd_file_refused_when_read_refuses_that_file_not_its_whole_kind(tmp_path, monkeypatch):
    # gray 4:0:0 H.264 (NVDEC's error 801) or a size change, first by name among 4:2:0 H.264 files: a second file of
    # the kind is read before the refusal stands for all of them
    from playbook_utils import child
    from playbook_utils.decoders import adapter

    paths = {n: media.make_clip(tmp_path / n, "h264", 64, 48, num_frames=4) for n in ("a_gray.mp4", "b.mp4", "c.mp4")}
    cover = {("torchcodec", "cuda"): {"refusals": {}}}
    failing, asked = {"a_gray.mp4"}, []

    def fake_call_all(jobs, timeout, env):
        names = {k: next(x.rsplit("/", 1)[-1] for x in argv if x.endswith(".mp4")) for k, argv in jobs.items()}
        asked.append(sorted(names.values()))
        return {k: {"status": "unavailable", "cause": "NVDEC error 801"} if names[k] in failing
                else {"status": "ok", "error": None} for k in jobs}  # fmt: skip

    monkeypatch.setattr(child, "call_all", fake_call_all)
    monkeypatch.setattr(adapter("torchcodec"), "_learned", {})
    refused = choose.refused_when_read(paths, cover)
    assert asked == [["a_gray.mp4"], ["b.mp4"]]  # the second file of the kind only after the first failed
    assert list(refused[("torchcodec", "cuda")]) == ["a_gray.mp4"] and adapter("torchcodec")._learned == {}
    # where the second fails too, the kind is refused: every file of it, and learned
    failing.add("b.mp4")
    asked.clear()
    refused = choose.refused_when_read(paths, cover)
    assert list(refused[("torchcodec", "cuda")]) == ["a_gray.mp4", "b.mp4", "c.mp4"]
    assert list(adapter("torchcodec")._learned) == [("cuda", "h264", 8)]
