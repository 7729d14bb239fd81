"""Notebooks 20, 21 and 22 through the runner on a folder like a reader's own. A file of its own, so that `make test`
runs it on the other worker than the smoke suite's (about 90 s)."""

import json
import re

import pytest

from playbook_utils.bench import media
from playbook_utils.tools import run_notebooks
from tests.footage import footage_frame

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def result(out, stem):
    return json.loads((out / f"{stem}.json").read_text())


@pytest.fixture(scope="module")
def reader_run(tmp_path_factory):
    """20, 21 and 22 through the runner on a folder like a reader's: unstamped clips of three codecs, other GOPs and
    encoder settings than the generated media, and a broken file."""
    folder = tmp_path_factory.mktemp("my_videos")
    for name, codec, gop, bframes in (
        ("street.mp4", "h264", 15, 0),
        ("beach.mkv", "hevc", 45, 2),
        ("park.webm", "vp9", 30, 0),
    ):
        media.make_clip(
            folder / name,
            codec,
            160,
            96,
            num_frames=45,
            gop=gop,
            bframes=bframes,
            preset="veryfast",
            picture=footage_frame,
        )
    good = (folder / "street.mp4").read_bytes()
    (folder / "broken.mp4").write_bytes(good[: len(good) // 3])  # cut short, as an interrupted download is
    out = tmp_path_factory.mktemp("reader")
    code = run_notebooks.main(
        [
            "--mode",
            "smoke",
            "--pattern",
            "2[0-2]*",
            "--video-dir",
            str(folder),
            "--output",
            str(out),
            "--timeout",
            "600",
        ]
    )
    return code, out, json.loads((out / "summary.json").read_text())


def test_the_readers_unstamped_folder_is_measured_and_gets_a_recommendation(reader_run):
    code, out, summary = reader_run
    assert code == 0 and {r["notebook"]: r["status"] for r in summary["notebooks"]} == {
        "20_decode_benchmarks.ipynb": "passed",
        "21_training_loader_benchmarks.ipynb": "passed",
        "22_choosing_a_loader.ipynb": "passed",
    }
    r20 = result(out, "20_decode_benchmarks")
    assert set(r20["unreadable"]) == {"broken.mp4"} and len(r20["unreadable"]["broken.mp4"]) > 20
    rows = r20["rows"]
    assert all(x["status"] == "ok" or (x["status"] == "unavailable" and x["error"]) for x in rows), rows
    ok = [x for x in rows if x["status"] == "ok"]
    assert {x["backend"] for x in ok} >= {"pyav", "decord", "torchcodec"}
    assert all(x["exact"] is True and x["check"].startswith("reference:") for x in ok)
    assert r20["headline"]["jobs_ok"] == len(ok) > 0
    r21 = result(out, "21_training_loader_benchmarks")
    assert r21["video_dir"] and set(r21["unreadable"]) == {"broken.mp4"} and r21["headline"]["exact"] is True
    assert r21["resize_to"] is None  # one size in the folder: nothing to resize
    h22 = result(out, "22_choosing_a_loader")["headline"]
    assert h22["videos_profiled"] == 3 and h22["unreadable_files"] == 1
    assert h22["recommended"] and h22["recommended_fps"] > 0 and h22["runner_up"]
    assert h22["recommended"] in h22["margin_note"] and h22["tied"] in (True, False)
    if h22["tied"]:  # a tie is broken by the stated rule, and the note names the one it took last, with the rule
        assert h22["margin_note"].rsplit("; ", 1)[1].startswith(h22["recommended"]), h22["margin_note"]
    # the table rests on the reader's files alone, and so does the recommendation: whole loaders on these files
    named = set(re.findall(r"[\w-]+\.(?:mp4|mkv|webm)", h22["table_source"]))
    assert named and named <= {"street.mp4", "beach.mkv", "park.webm"}, h22["table_source"]
    assert h22["recommendation_source"] in (  # of the notebook's sources, those that measured these files
        "notebook 21: whole loaders on these files",
        "a short run of notebook 21's whole loaders here, on these files",
    ), h22["recommendation_source"]
