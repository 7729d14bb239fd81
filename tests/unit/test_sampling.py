from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from playbook_utils import sampling

counts = st.integers(min_value=1, max_value=5000)


@given(n=counts, k=st.integers(min_value=1, max_value=256))
def test_uniform_gives_k_sorted_indices_in_range(n, k):
    idx = sampling.uniform(n, k)
    assert len(idx) == k
    assert all(0 <= i < n for i in idx)
    assert idx == sorted(idx)
    if k <= n:
        assert len(set(idx)) == k, "no repeats while the video has enough frames"
        mids = [Fraction(2 * j + 1, 2) * Fraction(n, k) for j in range(k)]
        assert all(i <= m < i + 1 for i, m in zip(idx, mids)), "the frame at each segment's middle"


def test_uniform_examples():
    assert sampling.uniform(100, 4) == [12, 37, 62, 87]
    assert sampling.uniform(3, 5) == [0, 0, 1, 2, 2]


@given(n=counts, video_fps=st.sampled_from([24, 25, 29.97, 30, 60]), target=st.sampled_from([0.5, 1, 2, 4]))
def test_at_fps_spacing_matches_the_target_rate(n, video_fps, target):
    idx = sampling.at_fps(n, video_fps, target)
    assert idx[0] == 0 and all(0 <= i < n for i in idx)
    assert idx == sorted(set(idx))
    expected = max(1, int(n / video_fps * target + 1e-9))
    assert len(idx) == expected or video_fps < target
    if len(idx) > 1 and video_fps >= target:
        gaps = [b - a for a, b in zip(idx, idx[1:])]
        assert max(gaps) - min(gaps) <= 1


def test_at_fps_caps_long_videos_with_uniform():
    assert sampling.at_fps(3000, 30, 2, max_frames=16) == sampling.uniform(3000, 16)


@given(
    n=counts, clip_len=st.integers(1, 32), stride=st.integers(1, 8), clips=st.integers(1, 8), seed=st.integers(0, 10**6)
)
def test_random_clips_fit_and_are_deterministic(n, clip_len, stride, clips, seed):
    span = sampling.clip_span(clip_len, stride)
    if span > n:
        with pytest.raises(ValueError, match="spans"):
            sampling.random_clips(n, clip_len, stride, clips, seed)
        return
    got = sampling.random_clips(n, clip_len, stride, clips, seed)
    assert got == sampling.random_clips(n, clip_len, stride, clips, seed)
    assert len(got) == clips
    for clip in got:
        assert len(clip) == clip_len and 0 <= clip[0] and clip[-1] < n
        assert all(b - a == stride for a, b in zip(clip, clip[1:]))


def test_random_clips_vary_with_seed():
    draws = {tuple(sampling.random_clips(1000, 8, 2, 1, seed)[0]) for seed in range(20)}
    assert len(draws) > 10


def test_all_frames_and_bad_arguments():
    assert sampling.all_frames(5) == [0, 1, 2, 3, 4]
    for bad in (
        lambda: sampling.uniform(0, 4),
        lambda: sampling.uniform(10, 0),
        lambda: sampling.at_fps(10, 0, 1),
        lambda: sampling.random_clips(10, 0),
    ):
        with pytest.raises(ValueError):
            bad()
