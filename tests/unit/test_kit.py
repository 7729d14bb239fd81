import ast
import json
from pathlib import Path
import os
import re
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from playbook_utils.bench import media, words
from playbook_utils.tools import kit

REP = {
    "gpu": {"available": False, "error": "none", "devices": []},
    "cpu_model": "Test CPU @ 2GHz",
    "cpu_usable_cores": 4,
    "date_utc": "2026-12-01 10:00",
}


def luma_frames(indices, size=(48, 64)):
    """Stamped (H, W) luma planes, as a decoder would return them (read_stamp takes luma)."""
    return [media.synth_frame(i, size[1], size[0])[0] for i in indices]


def test_machine_line_names_the_gpu_cpu_libraries_and_points_to_00():
    sys.modules.setdefault("fake_lib_for_kit", type(sys)("fake_lib_for_kit")).__version__ = "9.9"
    line = kit.machine_line(REP, "cpu", libraries=["fake_lib_for_kit", "not_imported_lib"])
    parts = line.split(" · ")  # GPU, CPU x cores, each imported library's version, date, device (and 00's pointer)
    assert len(parts) == 5 and "NVIDIA" in parts[0]
    assert parts[1:4] == ["Test CPU @ 2GHz x4", "fake_lib_for_kit 9.9", "2026-12-01 10:00 UTC"]
    assert parts[4].split()[:2] == ["device", "cpu"] and re.findall(r"\b\d+\b", parts[4]) == ["00"]  # and 00's
    gpu = {**REP, "gpu": {"available": True, "driver": "580", "devices": [{"name": "H200", "nvdec_count": 7}]}}
    named = kit.machine_line(gpu, "cuda").split(" · ")[0]
    assert "H200" in named and re.findall(r"\b\d+\b", named) == ["580", "7"]  # the driver, the NVDEC engines
    assert line.splitlines() == [line]


def test_show_saves_and_displays_a_png_under_the_agg_backend(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import IPython
    import IPython.display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()  # before IPython is faked: pyplot looks for it at its first figure
    ax.plot([0, 1], [1, 0])
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    kit.show(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert len(shown) == 1 and shown[0].data[:4] == b"\x89PNG"
    assert fig.number not in plt.get_fignums(), "the figure is closed, so the inline backend cannot show it twice"


@pytest.mark.slow
def test_a_kernel_with_mplbackend_agg_still_gets_the_figure_inline(tmp_path):
    # the cause of the missing figures: a runner's environment with MPLBACKEND=Agg, where plt.show() is a no-op
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfrom playbook_utils.tools import kit\n"
            "fig, ax = plt.subplots()\nax.plot([1, 2])\nplt.show()\n"
            f"kit.show(fig, {str(tmp_path / 'g.png')!r})"
        )
    ]
    src, dst = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    environ = {**os.environ, "MPLBACKEND": "Agg"}
    subprocess.run(
        [sys.executable, "-m", "papermill", str(src), str(dst), "-k", "python3", "--log-level", "ERROR"],
        check=True,
        env=environ,
        capture_output=True,
        timeout=300,
    )
    outputs = nbformat.read(dst, as_version=4).cells[0].outputs
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1
    assert (tmp_path / "g.png").exists()


def test_native_output_is_collected_not_printed(capfd):
    import ctypes

    lines = []
    with kit.native_output(lines):
        os.write(1, b"[WARN ][10:00:01] INVALID INDEX 300\n")
        ctypes.CDLL(None).printf(b"buffered C line\n")
        os.write(2, b"[WARN ][10:00:01] INVALID INDEX 301\n")
    assert lines == ["[WARN ][10:00:01] INVALID INDEX 300", "buffered C line", "[WARN ][10:00:01] INVALID INDEX 301"]
    assert capfd.readouterr() == ("", "")
    assert (
        kit.summarize(lines[::2], "PyNvVideoCodec logged")
        == "PyNvVideoCodec logged 2 lines: INVALID INDEX 300; INVALID INDEX 301"
    )
    assert kit.summarize([]) == "the library logged nothing"


def test_check_skip_rate_table_and_finish(tmp_path, capsys):
    nb = kit.Notebook("90_kit", tmp_path, "cpu")
    assert nb.device == "cpu" and not nb.gpu and nb.no_gpu == "DEVICE='cpu'"
    stamp = capsys.readouterr().out.splitlines()  # the machine line, of the machine the JSON records
    assert len(stamp) == 1 and nb.results.data["environment"]["date_utc"] in stamp[0]
    nb.check("right", luma_frames([3, 1, 1]), [3, 1, 1])
    nb.check("wrong", luma_frames([3, 2]), [3, 1], record=False)
    assert nb.checks == {"right": True}
    said = capsys.readouterr().out.splitlines()  # a line per check, the wrong one with what was asked and got
    assert [line.split()[:2] for line in said[:2]] == [["exact", "right:"], ["WRONG", "wrong:"]]
    shown = [(word, ast.literal_eval(rest)) for word, rest in (line.split(None, 1) for line in said[2:4])]
    assert re.findall(r"\b\d+\b", said[1]) == ["1", "2"] and shown == [("asked", [3, 1]), ("got", [3, 2])]
    assert nb.needs_gpu("a GPU part") is False
    assert nb.results.skipped == ["a GPU part: DEVICE='cpu'"]

    def fails():
        raise RuntimeError("planted")

    table = nb.rate_table(
        [
            ("cpu", "sequential", "a.mp4", lambda: luma_frames(range(4)), range(4)),
            ("cpu", "sparse K=2", "a.mp4", lambda: luma_frames([0, 2]), [0, 3]),
            ("cpu", "sparse K=2", "b.mp4", fails, [0, 1]),
        ],
        min_time=0.01,
    )
    assert [r["exact"] for r in table] == [True, False, None]
    assert table[0]["fps"] > 0 and table[2]["fps"] is None and table[2]["error"] == "RuntimeError: planted"
    assert nb.headline_rates(table, "a.mp4") == {
        "cpu_sequential_fps": table[0]["fps"],
        "cpu_sparse_fps": None,
        "gpu_sequential_fps": None,
        "gpu_sparse_fps": None,
        "rates_clip": "a.mp4",
    }
    with pytest.raises(AssertionError, match="table: cpu sparse K=2 a.mp4"):
        nb.finish(answer=42)
    doc = json.loads((tmp_path / "90_kit.json").read_text())
    assert doc["headline"] == {"answer": 42, "exact": False}
    assert doc["checks"]["right"] is True and doc["skipped"] == ["a GPU part: DEVICE='cpu'"]


def test_finish_passes_when_every_check_does(tmp_path):
    nb = kit.Notebook("90_ok", tmp_path, "cpu")
    nb.check("right", luma_frames([0, 5]), [0, 5])
    nb.finish()
    assert json.loads((tmp_path / "90_ok.json").read_text())["headline"] == {"exact": True}
    kit.Notebook("90_none", tmp_path, "cpu").finish(answer=1)
    assert json.loads((tmp_path / "90_none.json").read_text())["headline"] == {"answer": 1, "exact": None}


def test_a_smoke_rate_table_says_so_again_above_the_headline(tmp_path, capsys):
    """A newcomer read 10's headline ('cpu_sequential_fps': 1912.0) far below its table's smoke caveat."""
    nb = kit.Notebook("90_smoke", tmp_path, "cpu")
    nb.rate_table([("cpu", "sequential", "a.mp4", lambda: luma_frames(range(4)), range(4))], 0.01, smoke=True)
    capsys.readouterr()
    nb.finish()
    out = capsys.readouterr().out.splitlines()  # the table's caveat first, then the JSON's path and headline
    assert out[0].startswith(words.smoke_caveat(True)) and out[1].endswith("90_smoke.json")
    mine = kit.Notebook("90_yours", tmp_path, "cpu")  # the reader's files in smoke mode: their rates are the answer
    mine.rate_table([("cpu", "sequential", "a.mp4", lambda: luma_frames(range(4)), range(4))], 0.01, True, "/v")
    capsys.readouterr()
    mine.finish()
    assert capsys.readouterr().out.splitlines()[0].endswith("90_yours.json")  # no caveat above it


@pytest.mark.media
def test_pick_chooses_by_codec_and_gop(tmp_path, monkeypatch):
    nb = kit.Notebook("90_pick", tmp_path, "cpu")
    clips = {"h264_short.mp4": dict(gop=6), "h264_long.mp4": dict(gop=24)}
    for name, kw in clips.items():
        media.make_clip(tmp_path / name, "h264", 64, 48, num_frames=24, **kw)
    nb.infos = {name: media.probe(tmp_path / name) for name in clips}
    assert nb.pick("h264").path.endswith("h264_short.mp4")
    assert nb.pick("h264", long_gop=True).path.endswith("h264_long.mp4")
    assert nb.pick("vp9") is None


def test_plots_title_each_frame_with_its_stamp_and_count_gops():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from playbook_utils.tools import plots

    rgb = np.stack([np.repeat(y[..., None], 3, axis=2) for y in luma_frames([4, 9])])  # (N, H, W, 3)
    fig = plots.stamped_grid(rgb, [4, 8], "which frames?")
    assert [ax.get_title() for ax in fig.axes[:2]] == ["asked 4 · stamp 4", "asked 8 · stamp 9"]
    fig = plots.sampling_timeline({"a": [1, 2], "b": [1, 11, 25], "clips": [3, 5, 5, 7]}, [0, 10, 20], 30)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    # overlapping random clips: their coinciding dots counted once as well (01's figure showed 10 dots for "16")
    assert labels == [
        "a\n2 frames, 1 of 3 GOPs",
        "b\n3 frames, 3 of 3 GOPs",
        "clips\n4 frames (3 distinct), 1 of 3 GOPs",
    ]
    plt.close("all")


def test_headline_rates_take_the_gpu_rows_of_their_own_clip():
    table = [
        {"device": "cpu", "workload": "sequential", "clip": "a.webm", "fps": 10.0, "exact": True},
        {"device": "cpu", "workload": "sparse K=16", "clip": "a.webm", "fps": 2.0, "exact": True},
        {"device": "cuda:0", "workload": "sequential", "clip": "b.mp4", "fps": 500.0, "exact": True},
        {"device": "cuda:0", "workload": "sparse K=16", "clip": "b.mp4", "fps": 30.0, "exact": False},
    ]
    assert kit.Notebook.headline_rates(table, "a.webm", "b.mp4") == {
        "cpu_sequential_fps": 10.0,
        "cpu_sparse_fps": 2.0,
        "gpu_sequential_fps": 500.0,
        "gpu_sparse_fps": None,
        "rates_clip": "a.webm",
        "gpu_rates_clip": "b.mp4",
    }
    assert kit.Notebook.headline_rates(table, "a.webm")["gpu_sequential_fps"] is None


def test_the_printed_headline_is_rounded_and_the_file_keeps_every_digit():
    assert kit._for_reading({"a": 1772.5692799133767, "b": [0.123456789, "x", 3], "c": None}) == {
        "a": 1773.0,
        "b": [0.1235, "x", 3],
        "c": None,
    }


def test_reference_for_is_the_newest_gpu_reference_copy_that_ran_the_notebook(tmp_path):
    """The copy a notebook's skipped sections point to: the newest GPU reference whose run of it passed."""

    def reference(gpu, date, status):
        folder = tmp_path / "results" / gpu
        folder.mkdir(parents=True)
        machine = {"date_utc": date, "gpu": f"NVIDIA {gpu.upper()}"}
        row = {"notebook": "90_x.ipynb", "status": status}
        (folder / "summary.json").write_text(json.dumps({"machine": machine, "notebooks": [row]}))
        (folder / "90_x.ipynb").write_text("{}")

    assert kit.reference_for("90_x", root=tmp_path) is None  # no reference has run it
    reference("h200", "2026-12-01 10:00", "passed")
    assert kit.reference_for("90_x", root=tmp_path) == Path("results/h200/90_x.ipynb")
    reference("h100", "2026-12-06 10:00", "failed")  # newer, but its run did not pass
    assert kit.reference_for("90_x", root=tmp_path) == Path("results/h200/90_x.ipynb")
    summary = tmp_path / "results" / "h100" / "summary.json"
    summary.write_text(summary.read_text().replace('"failed"', '"passed"'))
    assert kit.reference_for("90_x", root=tmp_path) == Path("results/h100/90_x.ipynb")


def test_timed_takes_the_realistic_pair_where_the_set_has_one(tmp_path):
    """10-13's measured tables on the H200 timed the light 1.7 Mbit/s clips while the set held the 8 Mbit/s pair
    of short and long GOP: the tables now time filmed video's bitrate; smoke mode's set, with one realistic clip
    per codec, keeps the light pair (a short and a long GOP are both needed)."""
    from types import SimpleNamespace

    nb = kit.Notebook("90_timed", tmp_path, "cpu", stamp=False)

    def info(name, gop):
        return SimpleNamespace(name=name, codec="h264", height=1080, gop_lengths=[gop], num_frames=300)

    light = {"h264_1080p_gop30.mp4": 30, "h264_1080p_gop250.mp4": 250}
    nb.infos = {n: info(n, g) for n, g in {**light, "h264_1080p_gop30_8mbps.mp4": 30}.items()}
    assert nb.timed("h264").name == "h264_1080p_gop30.mp4"  # one realistic clip: no pair, the light ones
    assert nb.timed("h264", long_gop=True).name == "h264_1080p_gop250.mp4"
    nb.infos["h264_1080p_gop250_8mbps.mp4"] = info("h264_1080p_gop250_8mbps.mp4", 250)
    assert nb.timed("h264").name == "h264_1080p_gop30_8mbps.mp4"
    assert nb.timed("h264", long_gop=True).name == "h264_1080p_gop250_8mbps.mp4"
    assert nb.pick("h264").name == "h264_1080p_gop30.mp4"  # the recipes' checks keep the light clip


@pytest.mark.media
def test_the_readers_folder_is_scanned_once_and_its_unreadable_files_kept_for_the_summary(tmp_path, monkeypatch):
    media.make_clip(tmp_path / "videos" / "a.mp4", "h264", 96, 64, num_frames=8, gop=4)
    (tmp_path / "videos" / "broken.mp4").write_bytes(b"not a video")
    nb = kit.Notebook("90_folder", tmp_path / "out", "cpu", stamp=False)
    yours = nb.folder(tmp_path / "videos")
    assert list(yours.infos) == ["a.mp4"] and list(nb.results.data["unreadable"]) == ["broken.mp4"]
    monkeypatch.setattr(kit.folders, "scan_videos", lambda d: pytest.fail("scanned again"))
    assert nb.folder(tmp_path / "videos") is yours and nb.timed("h264", tmp_path / "videos").name == "a.mp4"
