"""The smoke-mode sentences of `bench.words`: a caveat above smoke rates, and why extrapolations are left out."""

from playbook_utils import media
from playbook_utils.bench import words


def test_smoke_caveat_only_in_smoke_mode_on_the_generated_media():
    line = words.smoke_caveat(True)
    spec = media.default_media_specs(True)[0]
    assert line.startswith("smoke mode: ") and f"{spec.width}x{spec.height} generated clips" in line
    assert "not comparable with full mode" in line and "\n" not in line
    assert words.smoke_caveat(False) is None
    assert words.smoke_caveat(False, "/videos") is None
    assert words.smoke_caveat(True, "/videos") is None, "the reader's own files: the rates are the answer"
    assert words.smoke_caveat(True, "", "a 640x360 generated clip") == (
        "smoke mode: a 640x360 generated clip, so rates and timings are not comparable with full mode"
    )


def test_smoke_skip_reason_names_the_media_and_the_way_out():
    with_dir = words.smoke_skip_reason()
    assert "generated clips" in with_dir and "SMOKE = False" in with_dir and "VIDEO_DIR" in with_dir
    without = words.smoke_skip_reason(reader_files=False, media="256x144 and 640x360 generated clips")
    assert "VIDEO_DIR" not in without and "256x144 and 640x360 generated clips" in without


def test_a_setting_is_advised_only_where_this_run_measured_it_winning():
    from playbook_utils.bench import verdicts, words

    tied = verdicts.rank([("thread_type=AUTO", 105, 30), ("thread_type=SLICE", 100, 30)])
    assert "bought nothing" in words.setting_takeaway(tied, "thread_type=AUTO", 2, "256x144", "on large frames")
    won = verdicts.rank([("thread_type=AUTO", 300, 5), ("thread_type=SLICE", 100, 5)])
    assert words.setting_takeaway(won, "thread_type=AUTO", 16, "1920x1080", "x").endswith(
        "won by 200%, more than the spread: set it"
    )
    lost = verdicts.rank([("thread_type=SLICE", 300, 5), ("thread_type=AUTO", 100, 5)])
    assert "LOST by 200%" in words.setting_takeaway(lost, "thread_type=AUTO", 2, "256x144", "on large frames")
