"""Frame checks without stamps: a reference decode by another library catches neighbouring frames."""

import pytest

from playbook_utils.bench import exactness, media
from playbook_utils.decoders import read_frames
from tests.footage import footage_frame
from tests.sentences import numbers

pytestmark = pytest.mark.media  # every test here encodes or decodes video


@pytest.fixture(scope="module")
def footage(tmp_path_factory):
    """An unstamped clip (moving texture), as a reader's own video would be."""
    return media.make_clip(
        tmp_path_factory.mktemp("footage") / "walk.mp4",
        "h264",
        160,
        96,
        num_frames=40,
        gop=15,
        picture=footage_frame,
    )


def test_footage_has_no_stamp(footage):
    with pytest.raises(media.StampError):
        media.read_stamp(read_frames(footage, [0], "pyav")[0])


@pytest.mark.parametrize("backend", ["pyav", "torchcodec", "decord"])
def test_right_frames_pass_against_another_librarys_decode(footage, backend):
    want = [39, 0, 20, 20, 7, 16]
    check = exactness.check_frames(footage, want, read_frames(footage, want, backend), backend)
    assert check.exact is True and check.wrong == [] and check.checked == len(want)
    assert check.method.startswith("reference:") and check.method != f"reference:{backend}"


def test_neighbouring_frames_are_caught(footage):
    want = [10, 20, 30, 5]
    got = read_frames(footage, [11, 20, 29, 5], "pyav")  # off by one at positions 0 and 2
    check = exactness.check_frames(footage, want, got, "pyav")
    assert check.exact is False and check.wrong == [0, 2]
    far = read_frames(footage, [30, 20, 10, 5], "pyav")  # frames from elsewhere in the clip
    assert exactness.check_frames(footage, want, far, "pyav").wrong == [0, 2]


def test_frames_of_another_size_are_wrong_and_the_check_gives_both_sizes(footage):
    # a rotated file batched at its stored size: every frame failed on its shape, and the line said "identical pixels"
    want = [3, 9]
    got = read_frames(footage, want, "pyav").transpose(2, 3)  # (96, 160) read as (160, 96)
    check = exactness.check_frames(footage, want, got, "pyav")
    assert check.exact is False and check.wrong == [0, 1] and check.lowest_db is None
    assert numbers(check.detail) == ["0", "2", "2", "160", "96", "96", "160"]  # none of 2 match; 2 of (H, W) 160x96


def test_long_requests_are_sampled_and_say_so(footage):
    want = list(range(40))
    check = exactness.check_frames(footage, want, read_frames(footage, want, "torchcodec"), "torchcodec", max_frames=8)
    assert check.exact and check.checked == 8 and numbers(check.detail)[-2:] == ["8", "40"]  # 8 of the 40 compared


def test_stamped_clips_are_checked_by_their_stamps(tmp_path):
    clip = media.make_clip(tmp_path / "s.mp4", "h264", 128, 72, num_frames=20, gop=10)
    assert exactness.check_frames(clip, [3, 1], read_frames(clip, [3, 1], "pyav"), "pyav").method == "stamp"
    wrong = exactness.check_frames(clip, [3, 1], read_frames(clip, [3, 2], "pyav"), "pyav")
    assert wrong.exact is False and wrong.wrong == [1]
    assert exactness.check_frames(clip, [3, 1], read_frames(clip, [3], "pyav"), "pyav").method == "count"


def test_a_still_scene_is_reported_as_indistinguishable(tmp_path):
    def still(index, width, height, num_frames):
        return footage_frame(0, width, height, num_frames)

    clip = media.make_clip(tmp_path / "still.mp4", "h264", 96, 64, num_frames=12, gop=6, picture=still)
    check = exactness.check_frames(clip, [4, 8], read_frames(clip, [5, 8], "pyav"), "pyav")
    # exact, with a second clause for the 2 frames that look like their neighbours, so cannot be told apart
    clauses = check.detail.split("; ")
    assert check.exact and len(clauses) == 2 and numbers(clauses[1]) == ["2"]


def test_no_other_cpu_library_means_unchecked_not_passed(footage, monkeypatch):
    monkeypatch.setattr(exactness, "REFERENCE_BACKENDS", ("pyav",))
    check = exactness.check_frames(footage, [1], read_frames(footage, [1], "pyav"), "pyav")
    assert check.method == "unchecked" and check.exact is None


def test_the_right_frame_in_other_colours_is_not_exact(footage):
    """The frames asked for, converted with the wrong matrix (BT.709 for this untagged file, as PyNvVideoCodec's and
    SPDL's own RGB did on the H200): each is still the nearest of its neighbours, and above FLOOR_DB, so the index
    check alone passed it; the pixel agreement fails it, apart from wrong frames."""
    from playbook_utils.bench import pixels

    want = [3, 17, 30]
    right = exactness.check_frames(footage, want, pixels.reference_rgb(footage, want), "pynvvideocodec")
    assert right.exact is True and right.lowest_db >= exactness.AGREE_DB
    shifted = pixels.reference_rgb(footage, want, matrix="bt709")
    check = exactness.check_frames(footage, want, shifted, "pynvvideocodec")
    assert check.wrong == [] and check.off_colour == [0, 1, 2] and check.exact is False
    assert exactness.FLOOR_DB < check.lowest_db < exactness.AGREE_DB
    # the count of frames off in colour and the threshold they fell under, in a clause of their own
    assert numbers(check.detail.split("; ")[1])[:2] == [str(len(check.off_colour)), f"{exactness.AGREE_DB:.0f}"]


def test_the_reference_decode_is_kept_for_the_same_frames_of_the_same_file(footage, tmp_path, monkeypatch):
    import os
    import shutil

    calls = []
    real = exactness.read_frames
    monkeypatch.setattr(exactness, "read_frames", lambda p, i, b, d: calls.append((str(p), b)) or real(p, i, b, d))
    copy = shutil.copy(footage, tmp_path / "copy.mp4")
    want = [3, 17, 31]
    got = read_frames(copy, want, "torchcodec")
    first = exactness.check_frames(copy, want, got, "torchcodec")
    again = exactness.check_frames(copy, want, got, "torchcodec")  # the same frames checked again: no decode
    assert first == again and first.exact and len(calls) == 1
    exactness.check_frames(copy, [4, 17], read_frames(copy, [4, 17], "torchcodec"), "torchcodec")  # other frames
    assert len(calls) == 2
    # the file replaced by another under the same name (a new modification time): decoded again, and judged anew
    shutil.copy(media.make_clip(tmp_path / "other.mp4", "h264", 160, 96, num_frames=40, gop=15), copy)
    os.utime(copy, ns=(os.stat(copy).st_atime_ns, os.stat(copy).st_mtime_ns + 10**9))
    assert exactness.check_frames(copy, want, got, "torchcodec").exact is False and len(calls) == 3
