import json
import multiprocessing
from pathlib import Path

import av
import numpy as np
import pytest

from playbook_utils import DecodeError
from playbook_utils.bench import media
from playbook_utils.bench.media import StampError, make_clip, probe, read_stamp

CODECS = [c for c in ("h264", "hevc", "vp9", "av1") if media.encoder_for(c)]
SIZES = [(160, 96), (320, 180), (640, 360)]
SPAWN = multiprocessing.get_context("spawn")
SUFFIX = {"vp9": ".webm"}


def decode_rgb(path):
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def test_h264_and_hevc_encoders_exist():
    # The default media set and every decoder test stand on these two.
    assert "h264" in CODECS and "hevc" in CODECS


@pytest.mark.media
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_stamp_round_trip_after_lossy_encoding(tmp_path, codec, size):
    path = make_clip(tmp_path / f"c{SUFFIX.get(codec, '.mp4')}", codec, *size, num_frames=24, gop=8)
    frames = decode_rgb(path)
    assert len(frames) == 24
    assert [read_stamp(f) for f in frames] == list(range(24))


@pytest.mark.media
@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
def test_stamp_round_trip_at_1080p(tmp_path, codec):
    # Fast encoder presets at 1080p skip flat blocks; the stamp must still come through.
    path = make_clip(tmp_path / f"c{SUFFIX.get(codec, '.mp4')}", codec, 1920, 1080, num_frames=30, gop=10)
    assert [read_stamp(f) for f in decode_rgb(path)] == list(range(30))


@pytest.mark.media
def test_stamp_survives_10_bit_and_large_indices(tmp_path):
    path = make_clip(tmp_path / "c.mkv", "hevc", 320, 180, num_frames=6, gop=3, pix_fmt="yuv420p10le")
    assert probe(path).pix_fmt == "yuv420p10le"
    assert [read_stamp(f) for f in decode_rgb(path)] == list(range(6))
    y, _, _ = media.synth_frame(media.MAX_STAMP, 320, 180)
    assert read_stamp(y) == media.MAX_STAMP


@pytest.mark.parametrize("layout", ["hwc", "chw", "torch", "half_size", "gray"])
def test_read_stamp_accepts_layouts_and_resizing(layout):
    y, _, _ = media.synth_frame(1234, 320, 180)
    rgb = np.repeat(y[:, :, None], 3, axis=2)
    frame = {
        "hwc": rgb,
        "chw": rgb.transpose(2, 0, 1),
        "gray": y,
        "half_size": rgb[::2, ::2],
    }.get(layout)
    if layout == "torch":
        torch = pytest.importorskip("torch")
        frame = torch.from_numpy(rgb.transpose(2, 0, 1).copy())
    assert read_stamp(frame) == 1234


def test_read_stamp_refuses_frames_without_a_valid_stamp():
    y, _, _ = media.synth_frame(77, 320, 180)
    with pytest.raises(StampError):
        read_stamp(np.full((180, 320), 128, np.uint8))  # no stamp at all
    with pytest.raises(StampError):
        read_stamp(y[::-1, ::-1])  # rotated 180 degrees
    ch, cw = media._stamp_cells(180, 320)
    damaged = y.copy()
    damaged[:ch, 5 * cw : 6 * cw] = 255 - damaged[:ch, 5 * cw : 6 * cw]  # one bit flipped in the code row only
    with pytest.raises(StampError, match="complement"):
        read_stamp(damaged)


@pytest.mark.media
def test_make_clip_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="even"):
        make_clip(tmp_path / "odd.mp4", width=161, height=96)
    with pytest.raises(ValueError, match="stamp"):
        media.synth_frame(media.MAX_STAMP + 1, 160, 96)


@pytest.mark.media
@pytest.mark.parametrize("gop,bframes", [(10, 0), (25, 2)])
def test_probe_reports_what_was_encoded(tmp_path, gop, bframes):
    path = make_clip(tmp_path / "c.mp4", "h264", 320, 180, fps=25, num_frames=60, gop=gop, bframes=bframes)
    info = probe(path)
    assert (info.codec, info.width, info.height, info.pix_fmt) == ("h264", 320, 180, "yuv420p")
    assert info.fps == pytest.approx(25)
    assert info.num_frames == 60
    assert info.duration_s == pytest.approx(60 / 25, rel=1e-3)
    assert info.keyframes == list(range(0, 60, gop))
    assert info.gop_lengths == [min(gop, 60 - k) for k in range(0, 60, gop)]
    assert not info.variable_frame_rate
    json.dumps(info.to_dict())


@pytest.mark.media
def test_a_realistic_clip_is_written_at_the_rate_its_name_gives(tmp_path):
    """Two seconds of detailed 1080p H.264 asked at 8 Mbit/s: held to it by the encoder's one-second buffer. With
    the average rate alone x264 wrote 12.1 Mbit/s here (and 50 for 300 frames of 4K asked at 32), so a clip's
    name and the Mbit/s column of notebook 01 disagreed; these are the realistic clips' settings."""
    options = media._encoder_options("libx264", 30, 2, True, "fast", bit_rate=8_000_000)
    assert options["x264-params"].endswith(":vbv-maxrate=8000:vbv-bufsize=8000")
    assert "vbv" not in media._encoder_options("libx264", 30, 2, True, "fast")["x264-params"]  # light clips: quality
    assert "vbv" in media._encoder_options("libx265", 30, 2, False, "fast", defaults=True, bit_rate=1)["x265-params"]
    path = make_clip(
        tmp_path / "r.mp4", "h264", 1920, 1080, 30, 60, 30, picture=media.detailed_frame, bit_rate=8_000_000
    )
    assert probe(path).bit_rate == pytest.approx(8_000_000, rel=0.1)


@pytest.mark.media
def test_probe_finds_b_frames_and_variable_frame_rate(tmp_path):
    times = [i / 30 + (0.01 if i % 4 == 0 else 0) for i in range(30)]
    path = make_clip(tmp_path / "vfr.mp4", "h264", 160, 96, num_frames=30, gop=10, frame_times=times)
    assert probe(path).variable_frame_rate
    with av.open(str(path)) as c:
        types = {int(f.pict_type) for f in c.decode(video=0)}
    assert 3 in types, "expected B-frames (AVPictureType 3) with the default bframes=2"


@pytest.mark.media
@pytest.mark.parametrize(
    "content,cause",
    [
        (None, "does not exist"),
        (b"", "empty"),
        (b"not a video at all\n" * 10, "cannot open"),
        (bytes(range(256)) * 64, "cannot open"),
    ],
)
def test_probe_errors_name_the_file_and_cause(tmp_path, content, cause):
    path = tmp_path / "bad.mp4"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DecodeError, match=cause) as e:
        probe(path)
    assert str(path) in str(e.value)
    # the path once, FFmpeg's reason without its raw code (23's table had '[Errno 1094995529] ... : PATH')
    assert str(e.value).count(str(path)) == 1 and "Errno" not in str(e.value)


@pytest.mark.media
def test_probe_refuses_a_file_without_video(tmp_path):
    path = tmp_path / "audio.mkv"
    with av.open(str(path), "w") as out:
        s = out.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for p in s.encode(frame):
            out.mux(p)
        for p in s.encode():
            out.mux(p)
    with pytest.raises(DecodeError, match="no video stream"):
        probe(path)


def test_probe_refuses_a_still_picture_whatever_its_name(tmp_path):
    # a poster or a thumbnail beside the videos, even one named .mp4, is not a video of one frame
    from tests import reader_folder

    picture = Path(reader_folder.still_picture(tmp_path / "poster.jpg"))
    for path in (picture, picture.rename(tmp_path / "poster.mp4")):
        with pytest.raises(DecodeError) as e:
            probe(path)
        assert e.value.backend == "probe"


@pytest.mark.media
def test_default_media_is_built_once_and_reused(tmp_path):
    logged = []
    clips = media.default_media(tmp_path, smoke=True, log=logged.append)
    expected = {s.name for s in media.default_media_specs(True)} - set(media.skipped_media(tmp_path))
    assert set(clips) == expected and len(logged) == len(expected)
    mtimes = {n: p.stat().st_mtime_ns for n, p in clips.items()}
    logged.clear()
    again = media.default_media(tmp_path, smoke=True, log=logged.append)
    assert logged == [] and {n: p.stat().st_mtime_ns for n, p in again.items()} == mtimes
    for name, path in clips.items():
        spec = next(s for s in media.default_media_specs(True) if s.name == name)
        info = probe(path)
        assert (info.codec, info.width, info.num_frames) == (spec.codec, spec.width, spec.num_frames)
        assert info.keyframes == list(range(0, spec.num_frames, spec.gop))
        assert [read_stamp(f) for f in decode_rgb(path)] == list(range(spec.num_frames))


def test_full_media_set_covers_the_issue_matrix():
    specs = media.default_media_specs(smoke=False)
    grid = {(s.codec, s.height, s.gop) for s in specs}
    for codec in ("h264", "hevc"):
        for height in (720, 1080, 2160):
            for gop in (30, 250):
                assert (codec, height, gop) in grid
    assert {"vp9", "av1"} <= {s.codec for s in specs}
    heavy = {(s.codec, s.height, s.open_gop): s.bitrate for s in specs if s.bitrate}
    for (codec, height, _), rate in heavy.items():  # each realistic clip inside the typical range for its size
        lo, hi = media.typical_bit_rate(codec, height * 16 // 9, height)
        assert lo <= rate <= hi, (codec, height, rate)
    assert {("h264", 1080, False), ("hevc", 1080, False), ("hevc", 1080, True), ("h264", 2160, False)} <= set(heavy)


@pytest.mark.media
@pytest.mark.parametrize("spec", [s for s in media.default_media_specs(smoke=True) if s.bitrate], ids=lambda s: s.name)
def test_realistic_clips_reach_their_bitrate_and_keep_their_stamps(tmp_path, spec):
    path = spec.make(tmp_path / spec.name)
    info = probe(path)
    assert abs(info.bit_rate / spec.bitrate - 1) < 0.3, f"{info.bit_rate} bit/s for a target of {spec.bitrate}"
    assert media.bitrate_class(info) == "within"
    assert info.open_gop == spec.open_gop and info.gop_lengths[0] == spec.gop
    with av.open(str(path)) as c:
        assert media.read_stamps(f.to_ndarray(format="rgb24") for f in c.decode(video=0)) == list(
            range(spec.num_frames)
        )
    # the light clip of the same codec and GOP spends fewer bits on the same frames
    light = make_clip(
        tmp_path / "light.mp4", spec.codec, spec.width, spec.height, num_frames=spec.num_frames, gop=spec.gop
    )
    assert probe(light).bit_rate < info.bit_rate


def test_bitrate_class_scales_the_typical_range_with_the_picture():
    def info(codec, width, height, rate):
        return media.VideoInfo("x.mp4", "mp4", codec, width, height, "yuv420p", 30.0, 300, 10.0, [0], rate, 0, False)

    assert media.bitrate_class(info("h264", 1920, 1080, 1_700_000)) == "below"
    assert media.bitrate_class(info("h264", 1920, 1080, 8_000_000)) == "within"
    assert media.bitrate_class(info("h264", 960, 540, 8_000_000)) == "above"  # a quarter of the pixels
    assert media.bitrate_class(info("mpeg4", 1920, 1080, 8_000_000)) == "unknown"
    assert media.bitrate_class(info("hevc", 1920, 1080, None)) == "unknown"


def test_pick_clip_can_lead_with_the_realistic_clips():
    names = [s.name for s in media.default_media_specs(smoke=False)]
    infos = {}
    for s in media.default_media_specs(smoke=False):
        keys = list(range(0, s.num_frames, s.gop))
        infos[s.name] = media.VideoInfo(
            s.name, "mp4", s.codec, s.width, s.height, "yuv420p", 30.0, s.num_frames, 10.0, keys, s.bitrate, 0, False
        )
    assert media.pick_clip(infos, "h264") == "h264_1080p_gop30.mp4"  # unchanged for the library notebooks
    assert media.pick_clip(infos, "h264", realistic=True) == "h264_1080p_gop30_8mbps.mp4"
    assert media.pick_clip(infos, "hevc", True, realistic=True) == "hevc_1080p_gop250_open_3.5mbps.mp4"
    assert media.pick_clip(infos, "vp9", realistic=True) is None
    assert not media.is_light("my_own_video.mp4") and media.is_light(names[0])


@pytest.mark.media
def test_default_media_builds_in_parallel_on_large_machines(tmp_path, monkeypatch):
    # 8 cores: two spawned worker processes (it patched os.cpu_count before, which default_media never read)
    monkeypatch.setattr(media.os, "sched_getaffinity", lambda pid: set(range(8)))
    pools = []
    real = media.ProcessPoolExecutor
    monkeypatch.setattr(media, "ProcessPoolExecutor", lambda *a, **k: pools.append((a, k)) or real(*a, **k))
    clips = media.default_media(tmp_path, smoke=True)
    assert [(a[0], k["mp_context"].get_start_method()) for a, k in pools] == [(2, "spawn")]
    assert list(clips) == [s.name for s in media.default_media_specs(True) if s.name in clips]
    for path in clips.values():
        assert probe(path).num_frames == 96


@pytest.mark.media
def test_constant_rate_webm_is_not_called_vfr(tmp_path):
    # WebM keeps millisecond timestamps: 30 fps gives 33/34 ms gaps, which is not variable frame rate.
    assert not probe(make_clip(tmp_path / "c.webm", "vp9", 160, 96, num_frames=30)).variable_frame_rate


def test_pick_clip_takes_the_size_nearest_1080p_then_the_gop():
    from types import SimpleNamespace as V

    infos = {
        "a": V(codec="h264", height=720, gop_lengths=[30], num_frames=300),
        "b": V(codec="h264", height=1080, gop_lengths=[30], num_frames=300),
        "c": V(codec="h264", height=1080, gop_lengths=[250, 50], num_frames=300),
        "d": V(codec="hevc", height=1080, gop_lengths=[30], num_frames=300),
    }
    assert media.pick_clip(infos, "h264") == "b" and media.pick_clip(infos, "h264", long_gop=True) == "c"
    assert media.pick_clip(infos, "h264", height=700) == "a"
    assert media.pick_clip(infos, "vp9") is None
    # a one-frame video (a GOP of 1) would time opening the file: a longer clip is timed, where there is one
    infos["one"] = V(codec="h264", height=1080, gop_lengths=[1], num_frames=1)
    assert media.pick_clip(infos, "h264") == "b"
    assert media.pick_clip({"one": infos["one"]}, "h264") == "one"


def test_two_processes_making_the_same_clip_at_once_both_succeed(tmp_path):
    # notebooks running side by side can both find a clip missing and build it
    from concurrent.futures import ProcessPoolExecutor

    path = tmp_path / "same.mp4"
    with ProcessPoolExecutor(2, mp_context=SPAWN) as pool:  # spawned: a forked child of this threaded worker can hang
        done = [pool.submit(make_clip, path, "h264", 640, 360, 30, 60) for _ in range(2)]
        assert [f.result() for f in done] == [path, path]
    info = probe(path)
    assert info.num_frames == 60 and (info.width, info.height) == (640, 360)
    assert [p.name for p in tmp_path.iterdir()] == ["same.mp4"]  # no temporary file left behind


@pytest.mark.media
@pytest.mark.skipif(not media.ffmpeg_cli(), reason="needs the ffmpeg command-line tool")
def test_probe_reads_the_best_stream_the_shown_frames_and_the_display_rotation(tmp_path):
    base = make_clip(tmp_path / "base.mp4", "h264", 320, 180, num_frames=24, gop=12, bframes=0)
    first = make_clip(tmp_path / "first.mp4", "h264", 256, 144, num_frames=18, gop=6, bframes=0)
    two = media.mux_video_streams(tmp_path / "two.mp4", [first, base], best=1)
    info = probe(two)
    assert (info.stream, info.best_stream, info.video_streams, info.width, info.num_frames) == (1, 1, 2, 320, 24)
    other = probe(two, stream=0)
    assert (other.stream, other.width, other.num_frames, other.keyframes) == (0, 256, 18, [0, 6, 12])
    with pytest.raises(DecodeError, match="stream 5 is not a video stream"):
        probe(two, stream=5)
    edit = media.hide_leading_frames(base, tmp_path / "edit.mp4", 5)
    info = probe(edit)
    assert (info.num_frames, info.edit_list_hidden, info.keyframes) == (19, 5, [7])
    assert media.shown_stamps(edit) == list(range(5, 24))
    for degrees in (90, 180, 270):
        rotated = media.rotate_display(base, tmp_path / f"rot{degrees}.mp4", degrees)
        assert probe(rotated).rotation == degrees and (probe(rotated).width, probe(rotated).height) == (320, 180)
        with av.open(str(rotated)) as c:  # FFmpeg's own reading of the display matrix agrees
            assert next(c.decode(video=0)).rotation % 360 == degrees
    assert probe(base).rotation == 0 and probe(base).edit_list_hidden == 0


@pytest.mark.media
def test_pad_mp4_makes_a_same_size_file_every_reader_still_reads(tmp_path):
    path = make_clip(tmp_path / "c.mp4", "h264", 160, 96, num_frames=12, gop=6)
    size = path.stat().st_size
    media.pad_mp4(path, size + 1000)
    assert path.stat().st_size == size + 1000 and probe(path).num_frames == 12
    assert [read_stamp(f) for f in decode_rgb(path)] == list(range(12))
    with pytest.raises(ValueError, match="free box"):
        media.pad_mp4(path, size + 1003)


def test_an_encode_the_muxer_rejects_is_tried_again_then_named(tmp_path, monkeypatch):
    real, calls = media._encode, []

    def flaky(tmp, **settings):
        calls.append(tmp)
        if len(calls) == 1:
            raise av.error.ArgumentError(22, "Invalid argument")
        return real(tmp, **settings)

    monkeypatch.setattr(media, "_encode", flaky)
    path = make_clip(tmp_path / "a.mp4", num_frames=8)
    assert len(calls) == 2 and read_stamp(next(av.open(str(path)).decode(video=0)).to_ndarray(format="rgb24")) == 0
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind

    monkeypatch.setattr(
        media, "_encode", lambda *a, **k: (_ for _ in ()).throw(av.error.ArgumentError(22, "Invalid argument"))
    )
    with pytest.raises(RuntimeError, match=r"b\.mp4: libx264 could not write this clip .*three times"):
        make_clip(tmp_path / "b.mp4", num_frames=8)


def test_the_manifest_record_of_a_light_clip_did_not_change_with_the_realistic_fields():
    light = media.ClipSpec("h264", 256, 144, 96, 12)
    assert light.record() == {
        "codec": "h264",
        "width": 256,
        "height": 144,
        "num_frames": 96,
        "gop": 12,
        "bframes": 2,
        "fps": 30,
        "version": media.MEDIA_VERSION,
    }  # media cached before them is reused
    heavy = media.ClipSpec("hevc", 256, 144, 96, 12, bitrate=62_000, open_gop=True)
    assert heavy.record()["bitrate"] == 62_000 and heavy.record()["open_gop"] is True


def _hangs_at_frame_3(index, width, height, num_frames):
    """A `picture` for the watched child: frame 3 never comes, as SVT-AV1's flush once never returned. With
    $HANG_ONCE set to a path, only the first child hangs (it leaves the file behind), so a retry succeeds."""
    import os
    import time
    from pathlib import Path

    marker = os.environ.get("HANG_ONCE")
    if index == 3 and (marker is None or not Path(marker).exists()):
        if marker:
            Path(marker).touch()
        time.sleep(3600)
    return media.synth_frame(index, width, height, num_frames)


def _fails_at_frame_2(index, width, height, num_frames):
    if index == 2:
        raise ValueError("no picture for frame 2")
    return media.synth_frame(index, width, height, num_frames)


@pytest.mark.media
def test_a_watched_encode_that_stops_making_progress_is_killed_and_named(tmp_path, monkeypatch):
    import time

    monkeypatch.delenv("HANG_ONCE", raising=False)
    settings = dict(encoder="libx264", width=64, height=64, fps=30, num_frames=8, gop=4, bframes=0)
    settings.update(pix_fmt="yuv420p", closed_gop=True, preset="fast", bit_rate=None, frame_times=None)
    start = time.monotonic()
    with pytest.raises(media.EncoderFailed, match=r"no progress for 2 s after \d+ steps: hung"):
        media._encode_watched(tmp_path / "x.mp4", {**settings, "picture": _hangs_at_frame_3}, stall_s=2)
    assert time.monotonic() - start < 30  # killed, not waited for
    with pytest.raises(media.EncoderFailed, match="ValueError: no picture for frame 2"):
        media._encode_watched(tmp_path / "y.mp4", {**settings, "picture": _fails_at_frame_2})
    media._encode_watched(tmp_path / "z.mp4", {**settings, "picture": None})
    assert [read_stamp(f) for f in decode_rgb(tmp_path / "z.mp4")] == list(range(8))
    # a picture the child cannot import by name is encoded here, unwatched
    media._encode_watched(tmp_path / "w.mp4", {**settings, "picture": lambda *a: media.synth_frame(*a)})
    assert len(decode_rgb(tmp_path / "w.mp4")) == 8


@pytest.mark.media
def test_make_clip_kills_a_hung_encoder_and_encodes_again(tmp_path, monkeypatch):
    # make_clip watches the encoders in WATCHED_ENCODERS (SVT-AV1); here x264 stands in, hanging the first time
    monkeypatch.setattr(media, "WATCHED_ENCODERS", frozenset({"libx264"}))
    monkeypatch.setattr(media, "STALL_S", 2.0)
    monkeypatch.setenv("HANG_ONCE", str(tmp_path / "hung-once"))
    path = make_clip(tmp_path / "a.mp4", "h264", 64, 64, num_frames=8, gop=4, picture=_hangs_at_frame_3)
    assert (tmp_path / "hung-once").exists()  # the first child did hang
    assert [read_stamp(f) for f in decode_rgb(path)] == list(range(8))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "hung-once"]  # no temporary file left behind


def test_two_processes_building_the_media_set_at_once_build_each_clip_once(tmp_path, monkeypatch):
    # pytest's two workers start with an empty cache and both ask for the default set: one builds, the other
    # waits for it and reuses its clips; the manifest keeps every entry
    from concurrent.futures import ProcessPoolExecutor

    specs = [media.ClipSpec("h264", 64, 64, 8, 4), media.ClipSpec("hevc", 64, 64, 8, 4)]
    with ProcessPoolExecutor(2, mp_context=SPAWN) as pool:
        runs = [pool.submit(_build_and_log, tmp_path, specs) for _ in range(2)]
        built = [f.result() for f in runs]
    assert sorted(len(b) for b in built) == [0, 2]  # the second found both clips built
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert {s.name for s in specs} <= set(manifest)


def _build_and_log(directory, specs):
    logged = []
    media.default_media(directory, smoke=True, log=logged.append, specs=specs)
    return logged


def test_clip_table_gives_one_row_per_clip_with_its_facts():
    from types import SimpleNamespace

    info = SimpleNamespace(codec="hevc", width=1920, height=1080, num_frames=300, gop_lengths=[250], open_gop=True,
                           bit_rate=3_500_000)  # fmt: skip
    rows = media.clip_table({"x.mp4": info, "y.mp4": SimpleNamespace(**{**vars(info), "open_gop": False})}).splitlines()
    assert len(rows) == 2 and rows[0].split()[:9] == ["x.mp4", "hevc", "1920x1080", "300", "frames,", "GOP", "250",
                                                       "open,", "3.50"]  # fmt: skip
    assert rows[1].split()[6:9] == ["250,", "3.50", "Mbit/s"]  # a closed GOP says nothing more
