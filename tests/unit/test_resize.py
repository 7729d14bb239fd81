"""Resize in the decoder against decode-then-resize: the right frames, close to the reference, fewer bytes."""

import pytest
import torch

from playbook_utils import decoders, resize
from playbook_utils.bench import media, resizing
from playbook_utils.errors import BackendUnavailable

IDX = [3, 20, 41, 63, 3]
HALF = (180, 320)  # half of 640x360: the stamp cells scale exactly


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return media.make_clip(tmp_path_factory.mktemp("rs") / "r.mp4", "h264", 640, 360, num_frames=64, gop=16)


@pytest.mark.media
@pytest.mark.parametrize("backend", ["pyav", "torchcodec", "spdl"])
def test_decoder_side_resize_gives_the_frames_asked_at_the_size_asked(backend, clip):
    if decoders.why_unavailable(backend, "cpu"):
        pytest.skip(decoders.why_unavailable(backend, "cpu"))
    ref = resize.resize_uint8(decoders.read_frames(clip, IDX, "pyav"), HALF)
    for src in (clip, clip.read_bytes()):
        got = resize.read_resized(src, IDX, HALF, backend)
        assert got.shape == (5, 3, *HALF) and got.dtype == torch.uint8
        assert [media.read_stamp(f) for f in got] == IDX
        assert resize.psnr(got, ref) > 35, "close to torch's antialiased bilinear resize"


@pytest.mark.media
def test_backends_without_it_refuse_and_compare_says_so(clip):
    with pytest.raises(BackendUnavailable, match="decord cannot resize in its decoder"):
        resize.read_resized(clip, [0], HALF, "decord")
    rows = resizing.compare(clip, IDX[:4], HALF, "decord", repeats=1)
    assert [r["method"] for r in rows] == ["decode, then resize"]


@pytest.mark.media
def test_compare_reports_both_ways(clip):
    rows = {r["method"]: r for r in resizing.compare(clip, IDX[:4], HALF, "pyav", repeats=1)}
    assert set(rows) == {"decode, then resize", "in decoder"}
    assert rows["decode, then resize"]["psnr_db"] == float("inf"), "pyav then resize_uint8 is the reference"
    assert 35 < rows["in decoder"]["psnr_db"] < float("inf")
    assert rows["in decoder"]["batch_bytes"] == 4 * 3 * 180 * 320 < rows["decode, then resize"]["batch_bytes"]
    assert all(r["frames_per_s"] > 0 for r in rows.values())


def test_psnr():
    a = torch.zeros(2, 3, 4, 4, dtype=torch.uint8)
    assert resize.psnr(a, a) == float("inf")
    assert resize.psnr(a, a + 1) == pytest.approx(48.13, abs=0.01)


def test_torchcodec_resizes_in_its_decoder_on_the_cpu_only():
    assert resize.can_resize_in_decoder("torchcodec", "cpu") and not resize.can_resize_in_decoder("torchcodec", "cuda")
    assert resize.can_resize_in_decoder("pyav", "cuda") and not resize.can_resize_in_decoder("decord", "cpu")


@pytest.mark.media
def test_dali_cpu_resizes_vp9_in_its_pipeline(tmp_path):
    if decoders.why_unavailable("dali", "cpu"):
        pytest.skip(decoders.why_unavailable("dali", "cpu"))
    clip = media.make_clip(tmp_path / "v.webm", "vp9", 320, 192, num_frames=24, gop=12)
    got = resize.read_resized(clip, [1, 14, 23], (96, 160), "dali")
    assert got.shape == (3, 3, 96, 160) and [media.read_stamp(f) for f in got] == [1, 14, 23]


GPU_RESIZE = [
    b
    for b in ("torchcodec", "dali", "pyav", "spdl")
    if b in decoders.BACKENDS
    and torch.cuda.is_available()
    and decoders.why_unavailable(b, "cuda") is None
    and resize.can_resize_in_decoder(b, "cuda")
]


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif(not GPU_RESIZE, reason="needs a CUDA GPU with a backend that resizes in its decoder")
@pytest.mark.parametrize("backend", GPU_RESIZE or ["none"])
def test_gpu_decoder_side_resize(backend, clip):
    got = resize.read_resized(clip, IDX, HALF, backend, "cuda")
    assert got.is_cuda and [media.read_stamp(f) for f in got] == IDX
    rows = {r["method"]: r for r in resizing.compare(clip, IDX[:4], HALF, backend, "cuda", repeats=2)}
    assert rows["in decoder"]["psnr_db"] > 30
    assert rows["in decoder"]["batch_bytes"] < rows["decode, then resize"]["batch_bytes"]


def test_resize_uint8_works_a_few_frames_at_a_time_and_gives_the_same_bits(monkeypatch):
    # Before: the whole clip went through float32 at full size in one call (8 frames of 4096 x 4096: 2.3 GB peak
    # for an item of VideoClipDataset(size=(144, 256))).
    import torch.nn.functional as F

    frames = torch.randint(0, 256, (5, 3, 40, 60), dtype=torch.uint8)
    whole = F.interpolate(frames.float(), size=(24, 36), mode="bilinear", antialias=True)
    whole = whole.round_().clamp_(0, 255).to(torch.uint8)
    seen, real = [], F.interpolate
    monkeypatch.setattr(F, "interpolate", lambda x, **kw: seen.append(x.shape[0]) or real(x, **kw))
    monkeypatch.setattr(resize, "RESIZE_CHUNK_BYTES", 2 * 3 * 40 * 60 * 4)  # two frames of float32
    assert torch.equal(resize.resize_uint8(frames, (24, 36)), whole)
    assert seen == [2, 2, 1]
