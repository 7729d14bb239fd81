"""The smoke-mode sentences of `bench.words`: a caveat above smoke rates, and why extrapolations are left out."""

import re
from pathlib import Path

from playbook_utils.bench import media, words
from tests.sentences import libraries, numbers, sizes


def _verdict(text):
    """('3.0', 'slower'), ('1.5', 'faster') or (None, 'tied'): what a `gop_lesson` concluded."""
    m = re.search(r"(\d+\.\d)x (slower|faster)", text)
    return m.groups() if m else (None, "tied") if re.search(r"\btied\b", text) else None


def test_smoke_caveat_only_in_smoke_mode_on_the_generated_media():
    line = words.smoke_caveat(True)
    smoke_sizes = sorted({(s.width, s.height) for s in media.default_media_specs(True)}, key=lambda wh: wh[0] * wh[1])
    assert sizes(line) == smoke_sizes and line.splitlines() == [line]  # names the generated media's sizes, one line
    assert words.smoke_caveat(False) is None
    assert words.smoke_caveat(False, "/videos") is None
    assert words.smoke_caveat(True, "/videos") is None, "the reader's own files: the rates are the answer"
    assert words.smoke_caveat(True, "", "a 640x360 generated clip") == (
        "smoke mode: a 640x360 generated clip, so rates and timings are not comparable with full mode"
    )


def test_say_smoke_prints_the_caveat_with_its_tail_and_returns_it(capsys):
    assert words.say_smoke(True, None, "a 640x360 generated clip", after="; more") == words.smoke_caveat(
        True, None, "a 640x360 generated clip")  # fmt: skip
    assert capsys.readouterr().out == words.smoke_caveat(True, None, "a 640x360 generated clip") + "; more\n"
    assert words.say_smoke(False) is None and words.say_smoke(True, "/videos") is None
    assert capsys.readouterr().out == ""


def test_smoke_skip_reason_names_the_media_and_the_way_out():
    with_dir = words.smoke_skip_reason()
    smoke_sizes = sorted({(s.width, s.height) for s in media.default_media_specs(True)}, key=lambda wh: wh[0] * wh[1])
    assert sizes(with_dir) == smoke_sizes and "SMOKE = False" in with_dir and "VIDEO_DIR" in with_dir
    named = "256x144 and 640x360 generated clips"
    without = words.smoke_skip_reason(reader_files=False, media=named)
    assert "VIDEO_DIR" not in without and "SMOKE = False" in without and named in without


def test_the_gop_lesson_gives_the_long_gop_against_the_short_with_a_verdict():
    from types import SimpleNamespace

    short, long = (
        SimpleNamespace(num_frames=96, gop_lengths=[12] * 8),
        SimpleNamespace(num_frames=96, gop_lengths=[48] * 2),
    )
    slower = words.gop_lesson({"fps": 900, "spread_pct": 5}, {"fps": 300, "spread_pct": 5}, 16, short, long)
    # K, the long GOP's keyframe interval, its rate, the short one's rate and interval, the ratio, the spread
    assert numbers(slower)[:7] == ["16", "48", "300", "900", "12", "3.0", "5.0"]
    assert _verdict(slower) == ("3.0", "slower")
    tied = words.gop_lesson({"fps": 1000, "spread_pct": 40}, {"fps": 1150, "spread_pct": 40}, 16, short, long)
    assert _verdict(tied) == (None, "tied")
    faster = words.gop_lesson({"fps": 1000, "spread_pct": 1}, {"fps": 1500, "spread_pct": 1}, 16, short, long)
    assert _verdict(faster) == ("1.5", "faster")
    # the keyframe interval is the median GOP but the last, which the clip's end cuts: 250, not (250 + 50) / 2
    cut = SimpleNamespace(num_frames=300, gop_lengths=[250, 50])
    line = words.gop_lesson({"fps": 49, "spread_pct": 0.8}, {"fps": 41, "spread_pct": 0.8}, 16, short, cut)
    assert numbers(line)[:2] == ["16", "250"] and _verdict(line) == ("1.2", "slower")


def test_codec_probe_notes_give_whole_reasons_and_wrong_frames_with_the_container():
    """00's H200 table cut 'no: PyNvVCExceptionUnsupported: HandleVideoSequence :' at 60 characters, and listed hevc
    10-bit among NVDEC's codecs beside 91 wrong frames of 120 from one library, unexplained."""
    from playbook_utils.bench import words

    reason = "PyNvVCExceptionUnsupported: HandleVideoSequence : AV1 is not supported on this GPU (cuvidGetDecoderCaps)"
    gpu = {
        "h264": {"pynvvideocodec": {"ok": True}, "pyav_hwaccel": {"ok": True}},
        "hevc 10-bit": {"pynvvideocodec": {"ok": False, "error": None, "frames": 120, "wrong_frames": 91},
                        "pyav_hwaccel": {"ok": True}},
        "av1": {"pynvvideocodec": {"ok": False, "error": reason}},
    }  # fmt: skip
    clips = {"h264": "a.mp4", "hevc 10-bit": "b.mkv", "av1": "c.mp4"}
    lines = words.codec_probe_notes(gpu, clips)
    assert len(lines) == 2 and lines[0].startswith(list(gpu)[1]) and libraries(lines[0]) == ["pynvvideocodec"]
    assert re.search(r"(\d+) of (\d+)", lines[0]).groups() == ("91", "120")  # wrong of all
    assert Path(clips[list(gpu)[1]]).suffix in lines[0]  # and the container of the file that gave them
    assert lines[1].startswith("av1") and lines[1].endswith(reason)  # the whole reason, not cut


def test_a_gpu_row_slower_than_the_cpu_is_said_with_what_one_caller_measures():
    from playbook_utils.bench import words

    row = {"workload": "sequential", "clip": "h264_1080p_gop30_8mbps.mp4", "exact": True}
    table = [{**row, "device": "cpu", "fps": 334.0, "spread_pct": 32.0}, {**row, "device": "cuda", "fps": 150.0, "spread_pct": 11.0},
             {**row, "workload": "sparse K=16", "device": "cpu", "fps": 82.0, "spread_pct": 30.0},
             {**row, "workload": "sparse K=16", "device": "cuda:0", "fps": 70.0, "spread_pct": 1.0}]  # fmt: skip
    lines = words.gpu_slower_lines(table)
    # the sparse rows are tied inside a 30% spread: nothing said of them
    assert len(lines) == 1 and lines[0].startswith("sequential")
    _, after = lines[0].split(row["clip"])  # the clip named once; after it, the GPU's rate, the CPU's, the spread,
    assert numbers(after) == ["150", "334", "32", "20", "21"]  # and the notebooks that measure NVDEC at scale
    assert words.gpu_slower_lines([{**row, "device": "cuda", "fps": 150.0, "spread_pct": 1.0}]) == []
    wrong = [{**table[0], "exact": False}, table[1]]  # a rate of wrong frames is no comparison
    assert words.gpu_slower_lines(wrong) == []
    # notebook 10 on an H100: the same decode with its frames kept on the GPU beat the CPU, so the host trip is the cause
    kept = {**row, "workload": "sequential, kept on GPU", "device": "cuda", "fps": 336.0, "spread_pct": 2.0}
    table = [
        {**row, "device": "cpu", "fps": 150.0, "spread_pct": 7.0},
        {**row, "device": "cuda", "fps": 110.0, "spread_pct": 17.0},
    ]
    (line,) = words.gpu_slower_lines([*table, kept])
    assert numbers(line.split(row["clip"])[1]) == ["110", "150", "17", "336"]


def test_a_light_clip_is_marked_by_its_measured_bitrate_not_by_a_claim():
    """00 had marked every light clip 'filmed video carries more bytes a frame', beside smoke clips whose bitrate
    01 measured within or above filmed video's range at 256x144."""
    from types import SimpleNamespace

    def clip(mbps, width=1920, height=1080, codec="h264"):
        return SimpleNamespace(codec=codec, width=width, height=height, fps=30, bit_rate=mbps * 1e6)

    assert words.light_clip_note(clip(1.7)) == (
        " (light: a smooth synthetic picture that notebook 01 makes; its bitrate below filmed video's range at this size)"
    )  # says what 'light' means where it is first met
    for c, where in ((clip(0.1, 256, 144), "within"), (clip(0.2, 256, 144, "vp9"), "above")):
        assert media.bitrate_class(c) == where and re.search(rf"\b{where}\b", words.light_clip_note(c))
    unknown = clip(1.0, codec="mpeg4")
    assert media.bitrate_class(unknown) == "unknown"
    assert not re.search(r"\b(below|within|above)\b", words.light_clip_note(unknown))
