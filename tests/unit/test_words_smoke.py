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
