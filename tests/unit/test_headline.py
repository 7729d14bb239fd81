"""The README's table of the reference run (`tools.headline`): made from summary.json alone, each figure cited."""

import json
import re

from playbook_utils.bench import media
from playbook_utils.tools import headline
from tests.sentences import numbers


def _reference(tmp_path, **extra):
    machine = {
        "date_utc": "2026-12-06 10:00",
        "commit": "abcdef0123456789",
        "gpu": "NVIDIA H100 80GB HBM3",
        "cores": 16,
    }
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
                     "ceiling_fps": 8203, "ceiling_saturated": True, "fraction_of_ceiling": 0.966, "spread_pct": 0.9}
        },
        "harness_overhead": {"bare_fps": 266.5, "harness_fps": 369.6, "overhead_pct": -27.9, "spread_pct": 20.5,
                             "readable": False},
        "notebooks": [
            {"notebook": "20_decode_benchmarks.ipynb", "machine": machine, "headline": {}},
            {"notebook": "21_training_loader_benchmarks.ipynb", "machine": {"date_utc": "2026-11-30 03:00"},
             "headline": {"gpu_sampled_videos_per_s": 16.8, "gpu_sampled_loader": "torchcodec x16 threads"}},
        ],
        **extra,
    }  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def _row(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def _cited(row: str) -> list[tuple[str, str]]:
    """(link target, date) of each citation in a table row."""
    return re.findall(r"\]\(([^)]+)\), (\d{4}-\d\d-\d\d)", row)


def test_the_table_quotes_summary_json_and_cites_each_figures_executed_copy_and_date(tmp_path):
    text = headline.table(_reference(tmp_path), tmp_path)
    machine = json.loads((tmp_path / "summary.json").read_text())["machine"]
    assert text.splitlines()[0].split("|")[1].strip() == machine["gpu"]  # the machine the reference ran on
    ceiling = _row(text, "| NVDEC ceiling")
    assert "8,187" in ceiling and "9,675" not in ceiling  # a light clip is no filmed-like ceiling
    assert _cited(ceiling) == [("20_decode_benchmarks.ipynb", "2026-12-06")]
    loader = _row(text, "| best GPU loader")
    assert "7,923 ± 0.9%" in loader and "97%" in loader
    assert _cited(loader) == [("21_training_loader_benchmarks.ipynb", "2026-11-30")]  # 21's row has its own date
    sampled = _row(text, "| 16 sampled frames")
    assert "16.8" in sampled and _cited(sampled) == [("21_training_loader_benchmarks.ipynb", "2026-11-30")]
    assert "27.9" not in _row(text, "| notebook 20's harness")  # a cost the run could not read is not quoted
    for left in ("training", "sparse", "choice", "robustness", "scaling"):
        assert left in text.splitlines()[-1]
    # both cited copies predate the media version stamp; once stamped with today's, they are not named
    assert numbers(text.splitlines()[-1]) == ["20", "21"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    for row in summary["notebooks"]:
        row["machine"] = {**row["machine"], "media_version": media.MEDIA_VERSION}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert numbers(headline.table(tmp_path, tmp_path).splitlines()[-1]) == []


def test_every_row_is_short_enough_to_quote():
    rows = [line for line in headline.table().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows and max(len(re.sub(r"\]\([^)]*\)", "]", r).split()) for r in rows) <= 60


def test_write_puts_the_table_between_the_markers_and_check_tells_a_stale_one(tmp_path):
    (tmp_path / "ref").mkdir()
    ref = _reference(tmp_path / "ref")
    readme = tmp_path / "README.md"
    old, after = "old table", "\n\nmore\n"
    readme.write_text(f"# title\n\n{headline.START}\n{old}\n{headline.END}{after}")
    assert headline.main([str(ref), "--readme", str(readme), "--check"]) == 1
    assert headline.main([str(ref), "--readme", str(readme), "--write"]) == 0
    text = readme.read_text()
    assert old not in text and text.split(headline.END)[1] == after and "(ref/20_decode" in text
    assert headline.main([str(ref), "--readme", str(readme), "--check"]) == 0
    readme.write_text("# no markers\n")
    assert headline.main([str(ref), "--readme", str(readme), "--check"]) == 2


def test_the_readme_quotes_the_reference_summary_and_nothing_else():
    assert headline.main(["--check"]) == 0, "run: python -m playbook_utils.tools.headline --write"
    # the answer above the table quotes only figures the table holds
    text = (headline.ROOT / "README.md").read_text()
    answer = text.split("<!-- answer -->")[1].split("<!-- /answer -->")[0]
    table = text.split(headline.START)[1].split(headline.END)[0]
    figures = re.findall(r"\b\d[\d,]*\.?\d*\b", re.sub(r"`[^`]*`|\([^)]*\.(?:ipynb|md|py)[^)]*\)", "", answer))
    assert figures and [f for f in figures if f not in table and len(f) > 1] == []
