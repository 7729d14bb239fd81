"""Colour: YUV to RGB by a file's tags, and the pixel-agreement matrix of notebook 20."""

import pytest
import torch

from playbook_utils import colour
from playbook_utils.bench import media, pixels
from tests.sentences import numbers, sizes


def _convert(y, u, v, matrix, rng, bits=8):
    planes = [torch.full((1, 2, 2), c, dtype=torch.int32) for c in (y, u, v)]
    return colour.yuv_to_rgb(*planes, matrix, rng, bits)[0, :, 0, 0].tolist()


@pytest.mark.parametrize(
    "yuv, matrix, rng, bits, rgb",
    [
        ((16, 128, 128), "bt601", "limited", 8, [0, 0, 0]),
        ((235, 128, 128), "bt709", "limited", 8, [255, 255, 255]),
        ((0, 128, 128), "bt709", "full", 8, [0, 0, 0]),
        ((255, 128, 128), "bt601", "full", 8, [255, 255, 255]),
        ((63, 102, 240), "bt709", "limited", 8, [255, 0, 0]),  # BT.709 red: Y' 62.6, Cb 102.0, Cr 240
        ((81, 90, 240), "bt601", "limited", 8, [255, 0, 0]),  # BT.601 red: Y' 81.5, Cb 90.2, Cr 240
        ((940, 512, 512), "bt2020", "limited", 10, [255, 255, 255]),  # 10 bits: white at 940
    ],
)
def test_known_colours_convert_by_the_matrix_and_range_they_name(yuv, matrix, rng, bits, rgb):
    assert all(abs(a - b) <= 2 for a, b in zip(_convert(*yuv, matrix, rng, bits), rgb)), _convert(
        *yuv, matrix, rng, bits
    )


def test_the_wrong_matrix_gives_other_colours_and_bad_names_are_refused():
    bt601_red = _convert(81, 90, 240, "bt601", "limited")
    assert _convert(81, 90, 240, "bt709", "limited") != bt601_red
    with pytest.raises(ValueError, match="unknown matrix"):
        _convert(16, 128, 128, "bt2100", "limited")
    with pytest.raises(ValueError, match="colour_range"):
        _convert(16, 128, 128, "bt601", "studio")


@pytest.mark.media
def test_every_cpu_library_agrees_with_the_tags_and_the_threshold_has_teeth(tmp_path):
    if not media.ffmpeg_cli():
        pytest.skip("the colour clips are made with the ffmpeg command-line tool")
    clips = media.colour_clips(tmp_path, smoke=True, frames=6)
    assert {n for n in clips} == {c[0] for c in media.COLOUR_CASES}
    for name, path in clips.items():
        c = pixels.controls(path, [0, 3])
        # a wrong matrix or a wrong range lands below the threshold on every case: a disagreement is seen
        assert c["wrong_matrix_db"] < pixels.THRESHOLD_DB and c["wrong_range_db"] < pixels.THRESHOLD_DB, (name, c)
    rows = pixels.run(clips, ["pyav", "torchcodec", "pynvvideocodec"], "cpu", indices=(0, 3), rounds=2)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len([r for r in ok if r["backend"] == "pyav"]) == 2 * len(clips)  # every clip, twice, alternately
    assert all(r["agrees"] for r in ok), [r for r in ok if not r["agrees"]]
    summary = pixels.summary(rows)
    assert summary["pynvvideocodec on cpu"]["refused"] and not summary["pyav on cpu"]["disagree"]
    lines = dict(zip(summary, pixels.verdict_lines(summary)))  # one line per backend, each named first
    assert all(line.split(":")[0] == key for key, line in lines.items())
    assert numbers(lines["pyav on cpu"])[0] == str(len(clips))  # all (that none disagreed: the summary, above)
    refused = summary["pynvvideocodec on cpu"]["refused"]  # every clip: no rate, the reason given
    assert set(refused) == set(clips) and lines["pynvvideocodec on cpu"].endswith(next(iter(refused.values())))


def test_verdicts_of_a_backend_whose_every_frame_was_identical_give_no_decibels():
    """On the H200 (2026-12-04) a backend that read every colour clip bit for bit like the reference had no dB
    to print, and the verdict line raised TypeError on None: such a read says so instead."""

    def row(backend, clip, db, agrees=True):
        return {"backend": backend, "device": "cuda", "clip": clip, "status": "ok", "psnr_db": db, "agrees": agrees}

    rows = [row("pyav", c, None) for c in ("a", "b")] + [row("torchcodec", "a", 48.0), row("torchcodec", "b", None)]
    rows += [row("dali", "a", 22.5, agrees=False), row("dali", "b", 47.0)]
    summ = pixels.summary(rows)
    assert summ["pyav on cuda"]["worst_db"] is None and summ["pyav on cuda"]["identical"] == 2
    lines = pixels.verdict_lines(summ)
    assert lines[0] == "pyav on cuda: agrees on all 2 clips it read (every frame identical to the reference)"
    assert lines[1] == "torchcodec on cuda: agrees on all 2 clips it read (worst frame 48.0 dB, median 48.0)"
    assert lines[2] == "dali on cuda: DISAGREES on 1 of 2 clips (a 22.5 dB)"


def test_refusals_with_one_reason_say_it_once_and_a_childs_long_message_is_cut_at_a_word():
    """On the H200 (2026-12-04) DALI refused 4 colour clips with one reason, printed 4 times with its file's path,
    and each cut mid-word at 400 characters by the child that reported it."""
    from playbook_utils.errors import clipped

    why = "BackendUnavailable: /tmp/c/{}.mp4 [dali]: DALI's decoders are cached per process. Read it in another process"
    rows = [{"backend": "dali", "device": "cuda", "clip": "a", "status": "ok", "psnr_db": 47.0, "agrees": True}]
    rows += [{"backend": "dali", "device": "cuda", "clip": c, "status": "unavailable", "error": why.format(c)}
             for c in ("b", "c")]  # fmt: skip
    rows.append({"backend": "dali", "device": "cuda", "clip": "d", "status": "unavailable", "error": "10-bit"})
    line = pixels.verdict_lines(pixels.summary(rows))[0]
    reason = why.split("]: ", 1)[1]  # the reason without the file's path
    paths = [row["error"].split()[1] for row in rows if row.get("error", "").startswith("BackendUnavailable")]
    assert line.count(reason) == 1 and len(paths) == 2 and not [p for p in paths if p in line]  # once, with no path
    refused = line.split("; ", 1)[1]  # 3 refused: b and c for that reason, d for its own
    assert numbers(refused)[0] == "3" and refused.index("b, c") < refused.index(reason) < refused.index("d (10-bit)")
    long = "Error: " + "word " * 200
    assert len(clipped(long)) <= 400 and clipped(long).endswith("word (...)") and clipped("short") == "short"


def test_dali_keeps_a_pipeline_per_picture_its_decoder_was_made_for():
    # one coded size (1088 rows), two display sizes: two pipelines, so no decoder is reused across the crop
    from types import SimpleNamespace

    from playbook_utils.decoders import dali

    cropped = SimpleNamespace(codec="h264", width=1920, height=1080, pix_fmt="yuv420p")
    full = SimpleNamespace(codec="h264", width=1920, height=1088, pix_fmt="yuv420p")
    ten_bit = SimpleNamespace(codec="hevc", width=1920, height=1080, pix_fmt="yuv420p10le")
    keys = {dali.pipeline_key("cuda", 0, None, i) for i in (cropped, full, ten_bit, cropped)}
    assert len(keys) == 3 and dali.pipeline_key("cuda", 0, (224, 224), cropped) not in keys


@pytest.mark.media
@pytest.mark.parametrize("pad_rows, pad_cols", [(0, 0), (8, 64)])  # as decoded, and on a coded-size, pitched surface
def test_nv12_surfaces_convert_as_the_planes_do(tmp_path, pad_rows, pad_cols):
    """The GPU adapters' NV12 path (PyNvVideoCodec's and SPDL's NVDEC output) gives exactly the reference RGB of
    the same decoded planes, with the picture taken from a surface larger than it, as NVDEC's are."""
    import av
    import numpy as np

    clip = media.make_clip(tmp_path / "c.mp4", "h264", 150, 86, num_frames=4, gop=4)  # odd chroma size: 75 x 43
    with av.open(str(clip)) as c:
        frames = [f.to_ndarray(format="nv12") for f in c.decode(video=0)][:3]
    h, w = 86, 150
    surfaces = []
    for f in frames:  # (h * 3 / 2 rounded up, w): luma rows then interleaved chroma rows
        y, uv = f[:h], f[h:]
        s = np.zeros((3 * (h + pad_rows) // 2, w + pad_cols), np.uint8)
        s[:h, :w] = y
        s[h + pad_rows : h + pad_rows + uv.shape[0], : uv.shape[1]] = uv
        surfaces.append(s)
    got = colour.nv12_to_rgb(torch.from_numpy(np.stack(surfaces)), h, w, "bt601", "limited")
    want = pixels.reference_rgb(clip, [0, 1, 2], "bt601", "limited")
    assert got.shape == (3, 3, h, w) and torch.equal(got, want)
    with pytest.raises(ValueError, match="cannot hold"):
        colour.nv12_to_rgb(torch.from_numpy(np.stack(surfaces)), h + 40, w, "bt601", "limited")


GPU_BACKENDS = ("torchcodec", "pynvvideocodec", "dali", "spdl", "pyav")


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_gpu_backend_converts_by_the_tags_and_is_not_confused_by_the_previous_file(tmp_path):
    """27 on the GPU: each GPU backend reads the colour clips (tags, 10-bit, and clips of one coded size and two
    display sizes, H.264 and HEVC) alternately, three rounds, in one process; every read agrees with the tag
    reference, or the backend refuses that clip with its reason (on the H200, before: DALI 17-20 dB after a clip
    of the same coded size, PyNvVideoCodec and SPDL 24-25 dB on untagged HD)."""
    if not media.ffmpeg_cli() and not (media.default_media_dir(True) / "colour").exists():
        pytest.skip("the colour clips are made with the ffmpeg command-line tool")
    clips = media.colour_clips(tmp_path if media.ffmpeg_cli() else None, smoke=True, frames=6)
    rows = pixels.run(clips, GPU_BACKENDS, "cuda", indices=(0, 3, 5), rounds=3)
    read = [r for r in rows if r["status"] == "ok"]
    assert read, rows
    assert all(r["agrees"] for r in read), [
        (r["backend"], r["clip"], r["round"], r["psnr_db"]) for r in read if not r["agrees"]
    ]
    failed = [(r["backend"], r["clip"], r["error"]) for r in rows if r["status"] not in ("ok", "unavailable")]
    assert failed == [], "a read that fails is not a refusal"


@pytest.mark.parametrize("wanted", [("bt709", "limited"), ("bt709", "full"), ("bt2020", "limited")])
def test_rgb_converted_by_the_wrong_matrix_is_mended_by_reconverting(wanted):
    # DALI's NVDEC path converts every file as BT.601 (its range is the file's): on smooth 4:2:0 gradients of
    # colours inside what BT.601 shows, converting its RGB back and again by the file's matrix lands within
    # rounding of the right conversion, where the BT.601 one is visibly off
    n, h, w = 2, 32, 48
    yy, xx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    y = (60 + 120 * (0.5 * yy + 0.5 * xx)).round().to(torch.int32).expand(n, h, w)
    u = (128 + 100 * (xx[::2, ::2] - 0.5)).round().to(torch.int32).expand(n, h // 2, w // 2)
    v = (128 + 100 * (yy[::2, ::2] - 0.5)).round().to(torch.int32).expand(n, h // 2, w // 2)
    right = colour.yuv_to_rgb(y, u, v, *wanted)
    as_bt601 = colour.yuv_to_rgb(y, u, v, "bt601", wanted[1])
    mended = colour.reconvert(as_bt601, ("bt601", wanted[1]), wanted)
    assert pixels.psnr(as_bt601, right) < 35 and pixels.psnr(mended, right) > 50
    assert colour.reconvert(right, wanted, wanted) is right


def test_dali_refuses_a_cropped_file_its_process_wide_decoder_cache_would_crop_wrong(monkeypatch):
    # DALI caches NVDEC decoders per process and reuses one by coded size, keeping the picture size it was made
    # for: after a file shown at 1920x1088, one shown at 1920x1080 (coded 1088) would get its chroma from the
    # wrong rows. The adapter refuses that read with the reason, and nothing else.
    from types import SimpleNamespace

    from playbook_utils.decoders import dali

    monkeypatch.setattr(dali, "_shown_whole", set())

    def info(codec, w, h, bits=8):
        return SimpleNamespace(codec=codec, width=w, height=h, bit_depth=bits)

    cropped, whole = info("h264", 1920, 1080), info("h264", 1920, 1088)
    assert dali.coded_size(cropped) == (1920, 1088) and dali.coded_size(info("hevc", 1916, 1076)) == (1920, 1080)
    assert dali._cache_clash(0, cropped) is None  # nothing shown whole yet
    dali._shown_whole.add((0, "h264", 1920, 1088, 8))
    why = dali._cache_clash(0, cropped)
    # the codec named, and the sizes: shown, coded, and the clash's
    assert why and cropped.codec in why and sizes(why) == [(1920, 1080), (1920, 1088), (1920, 1088)]
    assert dali._cache_clash(1, cropped) is None and dali._cache_clash(0, info("hevc", 1920, 1080)) is None
    assert dali._cache_clash(0, info("h264", 1920, 1080, 10)) is None and dali._cache_clash(0, whole) is None
