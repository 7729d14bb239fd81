"""Frame-index strategies used to feed video to vision-language models (introduced in notebook 01).

Pure functions of the frame count (and a seed where random): each returns a sorted or ordered
list of frame indices in [0, num_frames). They never open a file.
"""

from __future__ import annotations

import math
import random


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


def random_clips(num_frames: int, clip_len: int, stride: int = 1, num_clips: int = 1,
                 seed: int | None = 0) -> list[list[int]]:
    """`num_clips` clips of `clip_len` frames, `stride` apart, each at a random start.

    Deterministic for a given seed (None draws fresh randomness). Raises ValueError when one
    clip does not fit in the video.
    """
    _check_count(num_frames)
    if clip_len <= 0 or stride <= 0 or num_clips <= 0:
        raise ValueError(f"clip_len, stride and num_clips must be positive, got {clip_len}, {stride}, {num_clips}")
    span = clip_span(clip_len, stride)
    if span > num_frames:
        raise ValueError(f"a clip of {clip_len} frames at stride {stride} spans {span} frames; "
                         f"the video has {num_frames}")
    rng = random.Random(seed)
    starts = [rng.randrange(0, num_frames - span + 1) for _ in range(num_clips)]
    return [[s + j * stride for j in range(clip_len)] for s in starts]
