"""Frame-index strategies used to feed video to vision-language models (introduced in notebook 01).

Pure functions of the frame count (and a seed where random), except `torchcodec_samplers` (notebook 24). The
Qwen2-VL rules are our own code, written from and tested against `qwen-vl-utils` 0.0.14.
"""

from __future__ import annotations

import math
import random

__all__ = [
    "all_frames",
    "at_fps",
    "clip_span",
    "QWEN_FRAME_FACTOR",
    "QWEN_MERGE",
    "QWEN_PATCH",
    "QWEN_VIDEO_MIN_TOKENS",
    "random_clips",
    "smart_resize",
    "torchcodec_samplers",
    "uniform",
    "vlm_frame_size",
    "vlm_indices",
    "vlm_most_frames_at_full_size",
    "vlm_num_frames",
    "vlm_tokens",
]


def _check_count(num_frames: int) -> None:
    if num_frames <= 0:
        raise ValueError(f"a video needs at least one frame, got num_frames={num_frames}")


def all_frames(num_frames: int) -> list[int]:
    """Every frame: [0, 1, ..., num_frames - 1]."""
    _check_count(num_frames)
    return list(range(num_frames))


def uniform(num_frames: int, k: int) -> list[int]:
    """K frames spread evenly over the video: the frame shown at the middle of each of K equal segments.

    The usual VLM recipe ("8 / 16 / 32 frames per video"). Non-decreasing; when K exceeds the
    frame count, frames repeat, so the model always gets exactly K frames.
    """
    _check_count(num_frames)
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    return [min(num_frames - 1, (2 * i + 1) * num_frames // (2 * k)) for i in range(k)]


def at_fps(num_frames: int, video_fps: float, target_fps: float, max_frames: int | None = None) -> list[int]:
    """Frames at a fixed rate in time (e.g. 2 fps whatever the source rate), starting at frame 0.

    When more than `max_frames` would result, falls back to `uniform(num_frames, max_frames)`,
    as VLM pipelines cap the frames of long videos.
    """
    _check_count(num_frames)
    if video_fps <= 0 or target_fps <= 0:
        raise ValueError(f"frame rates must be positive, got video_fps={video_fps}, target_fps={target_fps}")
    duration = num_frames / video_fps
    count = max(1, math.floor(duration * target_fps + 1e-9))
    if max_frames is not None and count > max_frames:
        return uniform(num_frames, max_frames)
    indices = [min(num_frames - 1, math.floor(i * video_fps / target_fps + 1e-9)) for i in range(count)]
    return sorted(set(indices))


def clip_span(clip_len: int, stride: int) -> int:
    """Frames covered by one clip of `clip_len` frames taken every `stride` frames."""
    return (clip_len - 1) * stride + 1


def random_clips(
    num_frames: int, clip_len: int, stride: int = 1, num_clips: int = 1, seed: int | None = 0
) -> list[list[int]]:
    """`num_clips` clips of `clip_len` frames, `stride` apart, each at a random start.

    Deterministic for a given seed (None draws fresh randomness). Raises ValueError when one
    clip does not fit in the video.
    """
    _check_count(num_frames)
    if clip_len <= 0 or stride <= 0 or num_clips <= 0:
        raise ValueError(f"clip_len, stride and num_clips must be positive, got {clip_len}, {stride}, {num_clips}")
    span = clip_span(clip_len, stride)
    if span > num_frames:
        raise ValueError(
            f"a clip of {clip_len} frames at stride {stride} spans {span} frames; the video has {num_frames}"
        )
    rng = random.Random(seed)
    starts = [rng.randrange(0, num_frames - span + 1) for _ in range(num_clips)]
    return [[s + j * stride for j in range(clip_len)] for s in starts]


# --------------------------------------------------------------------------- VLM sampling (Qwen2-VL rules)

QWEN_FPS = 2.0  # frames per second of video the model is given by default
QWEN_FRAME_FACTOR = 2  # frames go in pairs: the vision encoder merges 2 frames in time
QWEN_MIN_FRAMES = 4
QWEN_MAX_FRAMES = 768
QWEN_PATCH = 14  # Qwen2-VL / Qwen2.5-VL patch side (Qwen3-VL: 16)
QWEN_MERGE = 2  # 2x2 patches merge into one token, so sides are multiples of 28
QWEN_VIDEO_MIN_TOKENS = 128
QWEN_VIDEO_MAX_TOKENS = 768
QWEN_MAX_RATIO = 200
QWEN_SEQ_LEN = 128000  # qwen-vl-utils' MODEL_SEQ_LEN default: the budget of all frames of a video


def _round_to(x: float, factor: int) -> int:
    return round(x / factor) * factor  # Python's round: ties to even, as qwen-vl-utils


def _ceil_to(x: float, factor: int) -> int:
    return math.ceil(x / factor) * factor


def _floor_to(x: float, factor: int) -> int:
    return math.floor(x / factor) * factor


def vlm_num_frames(
    num_frames: int,
    video_fps: float,
    fps: float = QWEN_FPS,
    min_frames: int = QWEN_MIN_FRAMES,
    max_frames: int | None = None,
    nframes: int | None = None,
) -> int:
    """How many frames a Qwen2-VL-style model takes from a video of `num_frames` at `video_fps`, as qwen-vl-utils'
    `smart_nframes`. Raises ValueError for a video too short for the model. Introduced in notebook 24."""
    _check_count(num_frames)
    if nframes is not None:
        n = _round_to(nframes, QWEN_FRAME_FACTOR)
    else:
        if video_fps <= 0 or fps <= 0:
            raise ValueError(f"frame rates must be positive, got video_fps={video_fps}, fps={fps}")
        lo = _ceil_to(min_frames, QWEN_FRAME_FACTOR)
        hi = _floor_to(min(QWEN_MAX_FRAMES, num_frames) if max_frames is None else max_frames, QWEN_FRAME_FACTOR)
        n = num_frames / video_fps * fps
        n = _floor_to(min(min(max(n, lo), hi), num_frames), QWEN_FRAME_FACTOR)
    if not QWEN_FRAME_FACTOR <= n <= num_frames:
        raise ValueError(
            f"a VLM needs between {QWEN_FRAME_FACTOR} and {num_frames} frames of this video "
            f"({num_frames} frames at {video_fps} fps), the rules give {n}"
        )
    return n


def _spread(first: int, last: int, k: int) -> list[int]:
    """k indices from `first` to `last` (both included), evenly spaced, each the nearest frame (ties to even):
    exact integer arithmetic, no floating point."""
    if k == 1:
        return [first]
    out = []
    for i in range(k):
        q, r = divmod((last - first) * i, k - 1)
        v = first + q
        if 2 * r > k - 1 or (2 * r == k - 1 and v % 2):
            v += 1
        out.append(v)
    return out


def vlm_indices(
    num_frames: int,
    video_fps: float,
    fps: float = QWEN_FPS,
    max_frames: int | None = None,
    start_s: float | None = None,
    end_s: float | None = None,
) -> list[int]:
    """The frame indices a Qwen2-VL-style model takes: `vlm_num_frames` of them, evenly from the first to the last frame
    of the range (`start_s`/`end_s`), rounded exactly (ties to even). Introduced in notebook 24."""
    _check_count(num_frames)
    first, last = 0, num_frames - 1
    if start_s is not None or end_s is not None:
        if video_fps <= 0:
            raise ValueError(f"video_fps must be positive, got {video_fps}")
        duration = num_frames / video_fps
        if start_s is not None:
            first = math.ceil(max(0.0, min(start_s, duration)) * video_fps)
        if end_s is not None:
            last = min(math.floor(max(0.0, min(end_s, duration)) * video_fps), num_frames - 1)
        if first >= last:
            raise ValueError(f"the range {start_s}..{end_s} s holds no frames of a {duration:.2f} s video")
    count = last - first + 1
    n = vlm_num_frames(count, video_fps, fps, max_frames=max_frames)
    return _spread(first, last, n)


def smart_resize(
    height: int,
    width: int,
    factor: int = QWEN_PATCH * QWEN_MERGE,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
) -> tuple[int, int]:
    """(height, width) for a frame, both multiples of `factor`, the pixel count within [min_pixels, max_pixels], the
    aspect ratio kept. Raises ValueError past an aspect ratio of 200. Introduced in notebook 24."""
    max_pixels = 16384 * factor**2 if max_pixels is None else max_pixels
    min_pixels = 4 * factor**2 if min_pixels is None else min_pixels
    if max_pixels < min_pixels:
        raise ValueError(f"max_pixels ({max_pixels}) must be at least min_pixels ({min_pixels})")
    if max(height, width) / min(height, width) > QWEN_MAX_RATIO:
        raise ValueError(f"aspect ratio {max(height, width) / min(height, width):.1f} is above {QWEN_MAX_RATIO}")
    h = max(factor, _round_to(height, factor))
    w = max(factor, _round_to(width, factor))
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = _floor_to(height / beta, factor), _floor_to(width / beta, factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = _ceil_to(height * beta, factor), _ceil_to(width * beta, factor)
    return h, w


def vlm_frame_size(
    height: int,
    width: int,
    nframes: int,
    patch: int = QWEN_PATCH,
    merge: int = QWEN_MERGE,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    total_pixels: float | None = None,
) -> tuple[int, int]:
    """(height, width) each of `nframes` video frames is resized to for a Qwen2-VL-style model, within qwen-vl-utils'
    per-frame token budget (`fetch_video`). Introduced in notebook 24."""
    factor = patch * merge
    lo = QWEN_VIDEO_MIN_TOKENS * factor**2 if min_pixels is None else min_pixels
    total = QWEN_SEQ_LEN * factor**2 * 0.9 if total_pixels is None else total_pixels
    hi = max(min(QWEN_VIDEO_MAX_TOKENS * factor**2, total / nframes * QWEN_FRAME_FACTOR), int(lo * 1.05))
    if max_pixels is not None:
        hi = min(max_pixels, hi)
    return smart_resize(height, width, factor, lo, hi)


def vlm_most_frames_at_full_size(height: int, width: int, **budget) -> int:
    """The most frames (even, at most QWEN_MAX_FRAMES) a video can have before `total_pixels` shrinks each frame below
    the size `vlm_frame_size` gives a pair; `budget`: its keywords. Notebook 24."""
    first, n = vlm_frame_size(height, width, 2, **budget), 2
    while n + 2 <= QWEN_MAX_FRAMES and vlm_frame_size(height, width, n + 2, **budget) == first:
        n += 2
    return n


def vlm_tokens(height: int, width: int, nframes: int, patch: int = QWEN_PATCH, merge: int = QWEN_MERGE) -> int:
    """Visual tokens of `nframes` frames of `height` x `width` (sides already multiples of patch x merge):
    one token per merge x merge patches per frame pair. What a frame budget costs in sequence length (notebook 24)."""
    return (nframes // QWEN_FRAME_FACTOR) * (height // (patch * merge)) * (width // (patch * merge))


def torchcodec_samplers(
    source, fps: float = QWEN_FPS, num_clips: int = 4, frames_per_clip: int = 2, max_frames: int | None = None
) -> dict:
    """TorchCodec's own samplers beside `vlm_indices` on one video (a path or bytes), as frame indices: {'vlm',
    'regular_timestamps', 'regular_indices', 'num_frames', 'fps'} (notebook 24)."""
    import io

    import av
    from torchcodec.decoders import VideoDecoder
    from torchcodec.samplers import clips_at_regular_indices, clips_at_regular_timestamps

    in_memory = isinstance(source, (bytes, bytearray))
    dec = VideoDecoder(source if in_memory else str(source), seek_mode="exact")
    n, video_fps = dec.metadata.num_frames, dec.metadata.average_fps
    with av.open(io.BytesIO(source) if in_memory else str(source)) as c:  # each frame's time, from its packets
        stream = c.streams.video[0]
        times = sorted(float(p.pts * stream.time_base) for p in c.demux(stream) if p.size and p.pts is not None)
    if len(times) != n:
        raise ValueError(f"TorchCodec counts {n} frames, the packets {len(times)}")

    def to_indices(batch) -> list[int]:
        return [min(range(n), key=lambda j: abs(times[j] - t)) for t in batch.pts_seconds.flatten().tolist()]

    by_time = clips_at_regular_timestamps(dec, seconds_between_clip_starts=1.0 / fps, num_frames_per_clip=1)
    by_index = clips_at_regular_indices(dec, num_clips=num_clips, num_frames_per_clip=frames_per_clip)
    return {
        "vlm": vlm_indices(n, video_fps, fps=fps, max_frames=max_frames),
        "regular_timestamps": to_indices(by_time),
        "regular_indices": to_indices(by_index),
        "num_frames": n,
        "fps": video_fps,
    }
