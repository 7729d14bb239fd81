import pytest

from playbook_utils.bench import faults, media
from tests.sentences import numbers


def _kind(outcome: str) -> str:
    """The class `faults.classify` put an answer in: 'exact', 'WRONG', 'clear error', 'refused', 'RAW' or 'CRASHED'."""
    return outcome.split(":")[0]


def test_classify():
    assert faults.classify({"status": "ok", "stamps": [1, 2]}, [1, 2]) == "exact"
    wrong = faults.classify({"status": "ok", "stamps": [1, 3]}, [1, 2])
    assert _kind(wrong) == "WRONG" and numbers(wrong)[:2] == ["1", "2"]  # 1 of the 2 frames asked
    assert _kind(faults.classify({"status": "crashed", "error": "exit -11"}, [1])) == "CRASHED"
    assert _kind(faults.classify({"status": "error", "error": "unexpected KeyError: x"}, [1])) == "RAW"


@pytest.mark.media
def test_soak_reports_growth_after_warmup():
    from playbook_utils.bench import media

    clip = media.default_media(smoke=True)["h264_144p_gop12.mp4"]
    r = faults.soak(clip, "pyav", calls=60, warmup=20, every=10)
    assert r["calls"] == 60 and r["warmup"] == 20 and r["curve"][-1]["call"] == 80 and not r["warmup_cut_by_time"]
    assert abs(r["rss_growth_pct"]) < 50 and all(p["rss_mb"] > 0 for p in r["curve"])
    assert isinstance(r["rss_bytes_per_call"], float)


def test_soak_slope_is_the_steady_growth_per_call():
    curve = [{"call": c, "rss_mb": 100 + c * 1024 / 2**20} for c in range(0, 5000, 500)]  # 1 KiB per call
    assert faults._slope(curve) == pytest.approx(1024)
    assert faults._slope(curve[:2]) is None


@pytest.mark.media
def test_soak_cut_short_inside_its_warmup_reports_no_growth():
    """The time cap covers the warm-up too; growth over a window shorter than the warm-up is not reported."""
    from playbook_utils.bench import media

    clip = media.default_media(smoke=True)["h264_144p_gop12.mp4"]
    r = faults.soak(clip, "pyav", calls=10_000, warmup=10_000, every=10, max_seconds=1e-4)  # one call is longer
    assert r["stopped_by_time"] and r["calls"] == 0 and r["seconds"] < 30
    # why: the warm-up it got, and the calls measured after it (none)
    assert r["rss_growth_pct"] is None and numbers(r["not_measured"])[-2:] == [str(r["warmup"]), str(r["calls"])]


@pytest.mark.media
def test_a_slow_soak_ends_its_warmup_at_a_fifth_of_the_cap_and_measures_the_rest():
    from playbook_utils.bench import media

    clip = media.default_media(smoke=True)["h264_144p_gop12.mp4"]
    r = faults.soak(clip, "pyav", calls=10_000, warmup=10_000, every=10, max_seconds=2.0)
    assert r["warmup_cut_by_time"] and 0 < r["warmup"] < 10_000 and r["stopped_by_time"]
    assert r["calls"] >= r["warmup"] and r["rss_growth_pct"] is not None
    assert r["curve"][0]["call"] == 0 and any(p["call"] == r["warmup"] for p in r["curve"])


def test_a_short_soaks_slope_is_not_read_as_a_leak_rate():
    r = {"calls": 150, "warmup": 50, "curve": [{"call": 0, "rss_mb": 240.0}, {"call": 50, "rss_mb": 249.0},
         {"call": 200, "rss_mb": 251.0}], "rss_growth_pct": 0.22, "rss_bytes_per_call": 4817.0}  # fmt: skip
    line = faults.format_soak("pyav cpu", "/x/clip.mp4", r, None)
    # the growth is measured from the end of the warm-up: that RSS is shown, not only the start's
    # calls; RSS at the start, after the warm-up, at the end; growth; bytes per call, with the 5,000 calls under which
    # a slope is too few to tell a leak by
    assert numbers(line) == ["150", "240", "249", "251", "0.22", "4817", str(faults.LEAK_MIN_CALLS)]
    assert "+4,817" in line
    long = faults.format_soak("pyav cpu", "/x/clip.mp4", {**r, "calls": 10_000}, None)
    assert numbers(long) == ["10000", "240", "249", "251", "0.22", "4817"]  # enough calls: no such caveat


@pytest.mark.media
def test_spdls_short_decode_of_damaged_data_says_so_not_an_index_error(tmp_path):
    # SPDL raised "IndexError: Index 4 is outside of [0, 4)" on garbage in the compressed frames (23 on the H200)
    from playbook_utils.decoders import read_frames, why_unavailable
    from playbook_utils.errors import DecodeError

    if why_unavailable("spdl", "cpu"):
        pytest.skip(why_unavailable("spdl", "cpu"))
    path, frames = faults.make_bad_files(tmp_path)["corrupt packets mid-stream"]
    with pytest.raises(DecodeError, match="some of its data did not decode") as e:
        read_frames(path, frames, "spdl")
    assert str(path) in str(e.value)


@pytest.mark.media
def test_a_faststart_file_cut_after_its_index_is_named_cut_short(tmp_path):
    """A faststart MP4 cut at half its bytes keeps its whole index: its first frames read as a complete, shorter
    video. The probe counts the index's frames that no packet holds; an error reading such a file says it is cut
    (an index past the end, a frame near the cut that waits for one that is gone), and a folder's scan lists it
    with the unreadable files: a sampler spreading its frames over what is there would read part of a video."""
    from playbook_utils import DecodeError, folders
    from playbook_utils.decoders import read_frames

    cases = faults.make_bad_files(tmp_path / "bad")
    cut, _ = cases["truncated at 50%, faststart"]
    info = media.probe(cut)
    assert (info.num_frames, info.missing_frames, info.cut_short) == (20, 28, True)  # the 20th packet cut inside
    good = media.probe(cases["good, faststart (control)"][0])
    assert (good.num_frames, good.missing_frames, good.cut_short) == (48, 0, False)
    assert read_frames(cut, [0, 12], "pyav").shape[0] == 2  # what is there reads
    said = r"; its index lists 28 more frames that the file does not hold: it is cut short"
    with pytest.raises(DecodeError, match=r"the video has 20 frames \(0..19\)" + said):
        read_frames(cut, [47], "pyav")
    with pytest.raises(DecodeError, match=said):  # the last packets, cut inside or waited for, do not decode
        read_frames(cut, [19], "pyav")
    folder = tmp_path / "yours"
    folder.mkdir()
    for name in ("good_faststart.mp4", cut.name):
        (folder / name).write_bytes((tmp_path / "bad" / name).read_bytes())
    scanned = folders.scan_videos(folder)  # listed with the unreadable ones: a loader's epoch leaves it out
    assert sorted(scanned.videos) == ["good_faststart.mp4"] and list(scanned.unreadable) == [cut.name]
    assert numbers(scanned.unreadable[cut.name])[:2] == ["20", "28"]  # the frames there and the ones missing
    (folder / "moved.mp4").symlink_to("gone/clip.mp4")  # a link whose target was moved: named, not passed over
    (folder / "link.mp4").symlink_to("good_faststart.mp4")
    scanned = folders.scan_videos(folder)
    assert sorted(scanned.videos) == ["good_faststart.mp4", "link.mp4"]
    assert (
        sorted(scanned.unreadable) == sorted([cut.name, "moved.mp4"])
        and "gone/clip.mp4" in scanned.unreadable["moved.mp4"]
    )
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "readme.txt").write_text("no video here")
    with pytest.raises(DecodeError, match=r"none: no file with a video suffix \(\.mp4"):  # said, not an empty table
        folders.scan_videos(tmp_path / "none")
