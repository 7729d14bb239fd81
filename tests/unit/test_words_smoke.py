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


def test_the_gop_lesson_says_why_the_long_gop_cost_more_or_did_not():
    from types import SimpleNamespace

    from playbook_utils.bench import words

    short, long = (
        SimpleNamespace(num_frames=96, gop_lengths=[12] * 8),
        SimpleNamespace(num_frames=96, gop_lengths=[48] * 2),
    )
    seek = words.gop_lesson({"fps": 900, "spread_pct": 5}, {"fps": 300, "spread_pct": 5}, 16, short, long, True)
    assert "3.0x slower" in seek and "as notebook 01 predicts" in seek and "seeks to each sample" in seek
    # a library that decodes forward inside a GOP, samples every 6 frames: nearly every frame either way
    forward = words.gop_lesson({"fps": 1000, "spread_pct": 40}, {"fps": 1150, "spread_pct": 40}, 16, short, long, False)
    assert forward.split(": ")[-1].startswith("tied") or ": tied." in forward
    assert "decodes forward" in forward and "every 6 frames" in forward and "cost more" not in forward
    odd = words.gop_lesson({"fps": 1000, "spread_pct": 1}, {"fps": 1500, "spread_pct": 1}, 16, short, long)
    assert "1.5x faster" in odd and "does not predict" in odd
    # 12's CUDA row on the H200: forward decoding, 1.2x slower on the long GOP: not notebook 01's seek lesson; and
    # the keyframe interval is the first GOP's (250 and 50 had read 'a keyframe every 150 frames')
    cut = SimpleNamespace(num_frames=300, gop_lengths=[250, 50])
    slower = words.gop_lesson(
        {"fps": 49, "spread_pct": 0.8},
        {"fps": 41, "spread_pct": 0.8},
        16,
        SimpleNamespace(num_frames=300, gop_lengths=[30] * 10),
        cut,
        False,
    )
    assert "1.2x slower" in slower and "as notebook 01 predicts" not in slower and "not measured here" in slower
    assert "a keyframe every 250 frames" in slower


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
    lines = words.codec_probe_notes(gpu, {"h264": "a.mp4", "hevc 10-bit": "b.mkv", "av1": "c.mp4"})
    assert len(lines) == 2 and "91 of 120 frames were other than asked (a .mkv file)" in lines[0]
    assert lines[1] == f"av1 through pynvvideocodec: {reason}"


def test_a_gpu_row_slower_than_the_cpu_is_said_with_what_one_caller_measures():
    from playbook_utils.bench import words

    row = {"workload": "sequential", "clip": "h264_1080p_gop30_8mbps.mp4", "exact": True}
    table = [{**row, "device": "cpu", "fps": 334.0, "spread_pct": 32.0}, {**row, "device": "cuda", "fps": 150.0, "spread_pct": 11.0},
             {**row, "workload": "sparse K=16", "device": "cpu", "fps": 82.0, "spread_pct": 30.0},
             {**row, "workload": "sparse K=16", "device": "cuda:0", "fps": 70.0, "spread_pct": 1.0}]  # fmt: skip
    lines = words.gpu_slower_lines(table)
    assert len(lines) == 1 and lines[0].startswith("sequential on h264_1080p_gop30_8mbps.mp4: the GPU 150 frames/s")
    assert "notebooks 20 and 21" in lines[0]  # the sparse rows are tied inside a 30% spread: nothing said
    assert words.gpu_slower_lines([{**row, "device": "cuda", "fps": 150.0, "spread_pct": 1.0}]) == []
    wrong = [{**table[0], "exact": False}, table[1]]  # a rate of wrong frames is no comparison
    assert words.gpu_slower_lines(wrong) == []


def test_the_ffmpeg_clash_advice_follows_what_each_import_order_did():
    """12's section 5 on the H200: PyNvVideoCodec first broke TorchCodec, TorchCodec first worked; the markdown had
    said 'never let the two meet' beside an order that worked."""
    one = "pynvvideocodec -> torchcodec"
    other = "torchcodec -> pynvvideocodec -> torchcodec"
    mixed = words.clash_line({one: False, other: True})
    assert mixed.startswith(f"{one} failed here while {other} worked") and "keep them apart" in mixed
    assert "did not show" in words.clash_line({one: True, other: True})
    assert words.clash_line({one: False, other: False}).startswith("every order tried failed here")
    assert words.clash_line({}) == "no order was tried"


def test_a_light_clip_is_marked_by_its_measured_bitrate_not_by_a_claim():
    """00 had marked every light clip 'filmed video carries more bytes a frame', beside smoke clips whose bitrate
    01 measured within or above filmed video's range at 256x144."""
    from types import SimpleNamespace

    def clip(mbps, width=1920, height=1080, codec="h264"):
        return SimpleNamespace(codec=codec, width=width, height=height, fps=30, bit_rate=mbps * 1e6)

    assert words.light_clip_note(clip(1.7)) == (
        " (light: a smooth synthetic picture that notebook 01 makes; its bitrate below filmed video's range at this size)"
    )  # says what 'light' means where it is first met
    assert "its bitrate within filmed video's range" in words.light_clip_note(clip(0.1, 256, 144))
    assert "its bitrate above filmed video's range" in words.light_clip_note(clip(0.2, 256, 144, "vp9"))
    assert "no typical bitrate" in words.light_clip_note(clip(1.0, codec="mpeg4"))


def test_the_sparse_speed_up_line_names_each_library_with_the_clips_where_it_lost():
    """20's smoke copy: decord lost beyond the spread on the realistic clip only, and sat inside it on the light one;
    the line had named both libraries beside both clips."""
    from types import SimpleNamespace

    infos = {c: SimpleNamespace(num_frames=96, keyframes=list(range(0, 96, 12))) for c in ("light.mp4", "real.mp4")}
    rows = [("pyav", "real.mp4", 2.05, 10), ("decord", "real.mp4", 0.68, 12), ("decord", "light.mp4", 0.92, 19),
            ("torchcodec", "real.mp4", 0.81, 15), ("torchcodec", "light.mp4", 0.88, 9)]  # fmt: skip
    speedups = [{"backend": b, "clip": c, "speedup": x, "spread_pct": s} for b, c, x, s in rows]
    line = words.sparse_speedup_line(speedups, infos)
    assert line.startswith("asking for 16 ran at 0.68x to 2.05x the speed of decoding every frame of these clips;")
    assert "the quicker way for decord on real.mp4; torchcodec on light.mp4, real.mp4:" in line
    assert "in light.mp4 the 16 frames lie in 8 GOPs, so asking still decodes 80 of the 96 frames" in line
    assert line.endswith("below 1x within the spread, no saving and no loss: decord on light.mp4")
    assert words.sparse_speedup_line([], infos) is None
