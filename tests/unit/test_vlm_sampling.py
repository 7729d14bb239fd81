"""Our Qwen2-VL sampling rules against the published ones (qwen-vl-utils, a test dependency).

qwen_vl_utils imports torchvision at the top of its module although the functions compared here
never use it. Where torchvision is not installed (this CPU image has none), a stand-in module is
put in its place for the import only: its `resize` returns a blank tensor of the size asked, so
`fetch_video`'s own size arithmetic runs and its output shape is what is compared.
"""

import importlib
import math
import sys
import types
from fractions import Fraction

import pytest
import torch

from playbook_utils import sampling


def _torchvision_stand_in():
    tv = types.ModuleType("torchvision")
    tv.__version__ = "0.0-stand-in"
    tv_io = types.ModuleType("torchvision.io")
    tf = types.ModuleType("torchvision.transforms")
    fn = types.ModuleType("torchvision.transforms.functional")

    class InterpolationMode:
        BICUBIC = "bicubic"
        BILINEAR = "bilinear"

    def resize(video, size, interpolation=None, antialias=True):
        return torch.zeros((*video.shape[:-2], *size), dtype=torch.uint8)

    fn.resize = resize
    tf.functional, tf.InterpolationMode = fn, InterpolationMode
    tv.io, tv.transforms = tv_io, tf
    return {
        "torchvision": tv,
        "torchvision.io": tv_io,
        "torchvision.transforms": tf,
        "torchvision.transforms.functional": fn,
    }


@pytest.fixture(scope="module")
def qwen():
    pytest.importorskip("PIL")
    try:
        import torchvision  # noqa: F401

        stubs = {}
    except ImportError:
        stubs = _torchvision_stand_in()
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        try:
            mod = importlib.import_module("qwen_vl_utils.vision_process")
        except ImportError as e:
            pytest.skip(f"qwen-vl-utils is not installed (pip install qwen-vl-utils==0.0.14): {e}")
        yield mod
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


DURATIONS = [0.04, 0.1, 0.4, 1.0, 2.3, 7.0, 30.0, 61.5, 600.0, 3600.0]
VIDEO_FPS = [23.976, 24, 25, 29.97, 30, 60]
TARGET_FPS = [0.5, 1.0, 2.0, 4.0]
CAPS = [{}, {"min_frames": 8}, {"max_frames": 16}, {"max_frames": 64, "min_frames": 2}]


def _qwen_count(qwen, ele, n, vfps):
    try:
        return qwen.smart_nframes(ele, total_frames=n, video_fps=vfps)
    except ValueError:
        return "error"


def _ours_count(n, vfps, ele):
    try:
        return sampling.vlm_num_frames(n, vfps, **ele)
    except ValueError:
        return "error"


def test_frame_counts_match_qwen_on_the_grid(qwen):
    compared = errors = 0
    for d in DURATIONS:
        for vfps in VIDEO_FPS:
            n = max(1, round(d * vfps))
            for fps in TARGET_FPS:
                for cap in CAPS:
                    ele = {"fps": fps, **cap}
                    want = _qwen_count(qwen, ele, n, vfps)
                    assert _ours_count(n, vfps, ele) == want, (d, vfps, ele)
                    compared += 1
                    errors += want == "error"
            for nf in (1, 2, 7, 8, 33):
                want = _qwen_count(qwen, {"nframes": nf}, n, vfps)
                assert _ours_count(n, vfps, {"nframes": nf}) == want, (d, vfps, nf)
    assert compared == len(DURATIONS) * len(VIDEO_FPS) * len(TARGET_FPS) * len(CAPS)
    assert 0 < errors < compared, "the grid reaches both the too-short refusal and real counts"


def _near_tie(first, last, k, i, tol=0.02):
    """Whether the exact point i of linspace(first, last, k) lies within `tol` of a half-frame."""
    if k == 1:
        return False
    exact = Fraction(first) + Fraction((last - first) * i, k - 1)
    return abs(exact - math.floor(exact) - Fraction(1, 2)) < tol


def test_indices_match_qwens_readers(qwen):
    """qwen-vl-utils' decord and TorchCodec readers take torch.linspace(first, last, n).round() in float32.
    Ours are the exact points: equal wherever float32 cannot tip a point across a half-frame, else a
    neighbour. The grid reaches such ties on its long videos (counted, so this check cannot pass empty)."""
    checked = ties = 0
    for d in DURATIONS + [1234.5, 7200.0]:
        for vfps in VIDEO_FPS:
            n = max(1, round(d * vfps))
            for fps in TARGET_FPS:
                for rng in ({}, {"video_start": 0.3, "video_end": d * 0.8}, {"max_frames": 256}):
                    ele = {"fps": fps, **rng}
                    kw = {
                        "start_s": rng.get("video_start"),
                        "end_s": rng.get("video_end"),
                        "max_frames": rng.get("max_frames"),
                    }
                    try:
                        first, last, count = qwen.calculate_video_frame_range(ele, n, vfps)
                        k = qwen.smart_nframes(ele, total_frames=count, video_fps=vfps)
                    except ValueError:
                        with pytest.raises(ValueError):
                            sampling.vlm_indices(n, vfps, fps=fps, **kw)
                        continue
                    want = torch.linspace(first, last, k).round().long().tolist()
                    got = sampling.vlm_indices(n, vfps, fps=fps, **kw)
                    assert len(got) == len(want) == k
                    for i, (a, b) in enumerate(zip(got, want)):
                        if a != b:
                            assert abs(a - b) == 1 and _near_tie(first, last, k, i), (d, vfps, ele, i, a, b)
                            ties += 1
                    checked += k
    assert checked > 100_000
    assert ties < checked / 500, f"{ties} of {checked} frames differ"


def test_spread_is_exact_rounding():
    for first, last, k in [(0, 9, 3), (0, 1799, 768), (3, 107999, 768), (0, 4, 4), (17, 86399, 64), (0, 1, 2)]:
        want = [round(Fraction(first) + Fraction((last - first) * i, k - 1)) for i in range(k)]
        assert sampling._spread(first, last, k) == want
    assert sampling._spread(0, 9, 3) == [0, 4, 9], "4.5 rounds to the even 4"


SIZES = [
    (144, 256),
    (180, 320),
    (360, 640),
    (480, 854),
    (720, 1280),
    (1080, 1920),
    (2160, 3840),
    (1080, 1080),
    (1920, 1080),
    (28, 5000),
    (10, 10),
    (4000, 3000),
]


def test_smart_resize_matches_qwen(qwen):
    for h, w in SIZES:
        for factor in (28, 32):
            for lo, hi in ((None, None), (128 * factor**2, 768 * factor**2), (4 * factor**2, 64 * factor**2)):
                kw = {"min_pixels": lo, "max_pixels": hi}
                assert sampling.smart_resize(h, w, factor, **kw) == qwen.smart_resize(h, w, factor, **kw), (h, w, kw)
    with pytest.raises(ValueError, match="aspect ratio"):
        sampling.smart_resize(10, 2500)


def test_frame_size_matches_fetch_video(qwen):
    """fetch_video on a list of frames runs qwen's own video pixel budget; the shape it returns is the size our
    vlm_frame_size gives. (Its per-image step first rounds each frame to multiples of 56, since it passes the
    28-pixel factor on as a patch size; sides already multiples of 56 go through that step unchanged.)"""
    from PIL import Image

    # (height, width, frames, extra keys): the default budget, then a total_pixels that binds (as 300+ frames
    # would under the default). min_pixels / max_pixels would also reach the per-image step, so they are
    # compared through smart_resize above instead.
    cases = [
        (224, 448, 4, {}),
        (504, 896, 8, {}),
        (112, 112, 4, {}),
        (112, 2240, 4, {}),
        (504, 896, 8, {"total_pixels": 8 * 64 * 784}),
        (504, 896, 6, {"total_pixels": 6 * 200 * 784}),
        (224, 448, 4, {"total_pixels": 4 * 20 * 784}),
    ]
    for h, w, k, extra in cases:
        frames = [Image.new("RGB", (w, h)) for _ in range(k)]
        out = qwen.fetch_video({"video": frames, **extra})
        assert tuple(out.shape[-2:]) == sampling.vlm_frame_size(h, w, k, **extra), (h, w, k, extra)
        assert out.shape[0] == k


def test_vlm_tokens_counts_merged_patches():
    h, w = sampling.vlm_frame_size(1080, 1920, 16)
    assert h % 28 == 0 and w % 28 == 0
    assert sampling.vlm_tokens(h, w, 16) == 8 * (h // 28) * (w // 28)
    assert sampling.vlm_tokens(h, w, 16) <= 8 * sampling.QWEN_VIDEO_MAX_TOKENS
    assert math.isclose(h / w, 1080 / 1920, rel_tol=0.1)


@pytest.mark.media
def test_torchcodec_samplers_beside_ours(tmp_path):
    pytest.importorskip("torchcodec")
    from playbook_utils.bench import media

    path = media.make_clip(tmp_path / "c.mp4", "h264", 64, 48, fps=24, num_frames=48, gop=12)
    got = sampling.torchcodec_samplers(path, fps=2.0, num_clips=3, frames_per_clip=2)
    assert got["num_frames"] == 48
    assert got["vlm"] == sampling.vlm_indices(48, 24, fps=2.0)
    assert got["regular_timestamps"] == [0, 12, 24, 36], "one frame every 0.5 s from 0"
    assert len(got["regular_indices"]) == 6
    assert all(b - a == 1 for a, b in zip(got["regular_indices"][::2], got["regular_indices"][1::2]))
    # ours spreads its frames from the first frame to the last; TorchCodec's time sampler starts at 0 and
    # steps 1/fps, so it never reaches the last frame
    assert got["vlm"][-1] == 47 and got["regular_timestamps"][-1] < 47


def test_frames_keep_their_size_up_to_the_video_budget_then_shrink():
    n = sampling.vlm_most_frames_at_full_size(1080, 1920)
    pair = sampling.vlm_frame_size(1080, 1920, 2)
    assert 2 < n < sampling.QWEN_MAX_FRAMES and n % 2 == 0
    assert sampling.vlm_frame_size(1080, 1920, n) == pair  # the pair's size, up to n frames
    smaller = sampling.vlm_frame_size(1080, 1920, n + 2)
    assert smaller[0] * smaller[1] < pair[0] * pair[1]  # past it, every frame shrinks
    # small frames never reach the budget: every frame count keeps their size
    assert sampling.vlm_most_frames_at_full_size(144, 256) == sampling.QWEN_MAX_FRAMES
