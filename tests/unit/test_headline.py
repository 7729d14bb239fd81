"""The README's table of the reference run (`tools.headline`): made from summary.json alone, each figure cited."""

import json

from playbook_utils import media
from playbook_utils.tools import headline


def _copy(path, printed: list[str]):
    """An executed notebook: one cell printing each of `printed`, then the closing cell that dumps the headline."""
    cells = [
        {"cell_type": "code", "execution_count": n + 1, "source": "print(x)",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": [line + "\n"]}]}
        for n, line in enumerate(printed)
    ]  # fmt: skip
    cells.append({"cell_type": "code", "execution_count": 99, "source": "nb.finish(**h)",
                  "outputs": [{"output_type": "stream", "name": "stdout", "text": ["8,187 7,923 16.8 videos/s"]}]})  # fmt: skip
    path.write_text(json.dumps({"cells": cells}))


def _reference(tmp_path, **extra):
    machine = {"date_utc": "2026-12-06 10:00", "commit": "abcdef0123456789", "gpu": "NVIDIA H200", "cores": 16}
    summary = {
        "mode": "full",
        "machine": machine,
        "nvdec_ceiling_fps": {
            "hevc": {
                "hevc_1080p_gop30_3.5mbps.mp4": {"fps": 8187, "layout": "16x4", "decoder": "torchcodec",
                                                 "nvdec_util_median": 97, "saturated": False},
                "hevc_1080p_gop30.mp4": {"fps": 9675, "layout": "16x4", "decoder": "torchcodec",
                                         "nvdec_util_median": 100, "saturated": True},  # a light clip: left out
            }
        },
        "best_loader": {
            "hevc": {"clip": "hevc_1080p_gop30_3.5mbps.mp4", "loader": "torchcodec x64 threads", "fps": 7923,
                     "ceiling_fps": 8203, "ceiling_saturated": True, "fraction_of_ceiling": 0.966, "spread_pct": 0.9,
                     "clip_mbps": 2.96}
        },
        "harness_overhead": {"bare_fps": 266.5, "harness_fps": 369.6, "overhead_pct": -27.9, "spread_pct": 20.5,
                             "readable": False},
        "notebooks": [
            {"notebook": "20_decode_benchmarks.ipynb", "machine": machine,
             "headline": {"nvdec_ceiling_mbps": {"hevc_1080p_gop30_3.5mbps.mp4": 2.96}}},
            {"notebook": "21_training_loader_benchmarks.ipynb", "machine": {"date_utc": "2026-11-30 03:00"},
             "headline": {"gpu_sampled_videos_per_s": 16.8, "gpu_sampled_loader": "torchcodec x16 threads"}},
        ],
        **extra,
    }  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    _copy(tmp_path / "20_decode_benchmarks.ipynb", ["ceiling: 8,187 frames/s", "the harness: 266 against 370"])
    _copy(tmp_path / "21_training_loader_benchmarks.ipynb", ["torchcodec x64 threads 7,923 frames/s"])
    return tmp_path


def test_the_table_quotes_summary_json_and_cites_the_cell_that_printed_each_figure(tmp_path):
    text = headline.table(_reference(tmp_path), tmp_path)
    ceiling = next(line for line in text.splitlines() if line.startswith("| NVDEC ceiling"))
    assert "8,187 frames/s, decoders 97% busy, a lower bound: more decoders still gained" in ceiling
    assert "9,675" not in ceiling  # a light clip is no realistic ceiling
    assert "counted with each decoder's last 32-frame chunk whole" in ceiling  # TorchCodec's, before 12-05
    assert "[20, In [1]](20_decode_benchmarks.ipynb), 2026-12-06, `abcdef0`" in ceiling
    loader = next(line for line in text.splitlines() if line.startswith("| best GPU-side loader"))
    assert (
        "7,923 frames/s ± 0.9%, 96.6% of the ceiling 21 measured beside it (8,203, saturated)" in loader
        and "[21, In [1]]" in loader
    )
    # the older copy printed no such line: the closing headline dump is not taken for it, and the row says so
    sampled = next(line for line in text.splitlines() if line.startswith("| 16 sampled frames"))
    assert "[21, not found in its output]" in sampled and "2026-11-30, no commit recorded" in sampled
    harness = next(line for line in text.splitlines() if "harness" in line)
    assert "no cost read" in harness and "27.9" not in harness
    assert "not recorded in it, so not shown: training, sparse, choice, robustness, scaling" in text
    assert "each library" not in harness  # a record made before 20 set every library against its own loop
    # both copies predate the media version stamp: the realistic clips were encoded otherwise then
    assert ". Notebooks 20, 21 ran before today's media version" in text.splitlines()[-1]
    summary = json.loads((tmp_path / "summary.json").read_text())
    for row in summary["notebooks"]:
        row["machine"] = {**row["machine"], "media_version": media.MEDIA_VERSION}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert "older media version" not in headline.table(tmp_path, tmp_path)


def test_the_harness_row_gives_every_librarys_cost_where_20_recorded_them(tmp_path):
    by_library = {
        "pyav": {"overhead_pct": 34.0, "spread_pct": 9.0},
        "torchcodec": {"overhead_pct": -1.0, "spread_pct": 5.0},
    }
    ref = _reference(tmp_path)
    summary = json.loads((ref / "summary.json").read_text())
    summary["harness_overhead"] = {
        "bare_fps": 300.0,
        "harness_fps": 224.0,
        "overhead_pct": 34.0,
        "spread_pct": 9.0,
        "readable": True,
        "by_library": by_library,
    }
    (ref / "summary.json").write_text(json.dumps(summary))
    harness = next(line for line in headline.table(ref, ref).splitlines() if "harness" in line)
    assert "the harness costs 34.0%" in harness and "pyav +34%, torchcodec -1%: 35 points apart" in harness
    assert "not one number here" in harness and harness.count("[20, ") == 2


def test_write_puts_the_table_between_the_markers_and_check_tells_a_stale_one(tmp_path):
    (tmp_path / "ref").mkdir()
    ref = _reference(tmp_path / "ref")
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{headline.START}\nold table\n{headline.END}\n\nmore\n")
    assert headline.main([str(ref), "--readme", str(readme), "--check"]) == 1
    assert headline.main([str(ref), "--readme", str(readme), "--write"]) == 0
    text = readme.read_text()
    assert "old table" not in text and text.endswith(f"{headline.END}\n\nmore\n") and "(ref/20_decode" in text
    assert headline.main([str(ref), "--readme", str(readme), "--check"]) == 0
    readme.write_text("# no markers\n")
    assert headline.main([str(ref), "--readme", str(readme), "--check"]) == 2


def test_the_readme_quotes_the_reference_summary_and_nothing_else():
    assert headline.main(["--check"]) == 0, "run: python -m playbook_utils.tools.headline --write"


def test_rows_that_contradict_each_other_across_runs_say_so(tmp_path):
    ref = _reference(tmp_path)
    summary = json.loads((ref / "summary.json").read_text())
    # 20's ceiling for the loader's clip, called saturated in another run, below what 21's loader delivered there
    summary["nvdec_ceiling_fps"]["hevc"]["hevc_1080p_gop30_3.5mbps.mp4"].update(
        fps=7500, saturated=True, counted="within the window"
    )  # counted as today's code counts: no caveat
    summary["notebooks"].append(
        {"notebook": "22_choosing_a_loader.ipynb", "machine": {"date_utc": "2026-11-29 03:00"},
         "headline": {"recommended": "torchcodec on cuda", "recommended_fps": 400, "workload": "uniform16"}}
    )  # fmt: skip
    (ref / "summary.json").write_text(json.dumps(summary))
    text = headline.table(ref, tmp_path)
    assert "above the 7,500 that notebook 20 measured as saturated on this clip in another run" in text
    assert "no loader beats the engines" in text
    assert "32-frame chunk" not in next(line for line in text.splitlines() if line.startswith("| NVDEC ceiling"))
    choice = next(line for line in text.splitlines() if line.startswith("| notebook 22's recommendation"))
    assert "made from an earlier run of 20 and 21 than the one above: stale until 22 runs again" in choice
    assert "another media version" not in choice  # older by date already says it
    # 22 ran after 20 and 21, but 21 and 22 on today's media and 20 on the older: 22 set other bytes side by side
    rows = {r["notebook"][:2]: r for r in summary["notebooks"]}
    rows["21"]["machine"] = {"date_utc": "2026-12-07 01:00", "media_version": media.MEDIA_VERSION}
    rows["22"]["machine"] = {"date_utc": "2026-12-07 02:00", "media_version": media.MEDIA_VERSION}
    (ref / "summary.json").write_text(json.dumps(summary))
    choice = next(line for line in headline.table(ref, tmp_path).splitlines() if line.startswith("| notebook 22's"))
    assert "stale until 22" not in choice
    assert choice.endswith(
        "; 20 ran on the generated clips of another media version than 22 (the same names over other bytes): "
        "stale until it runs again, then 22 |"
    )
