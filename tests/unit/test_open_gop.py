"""Open-GOP video read frame-exactly by one forward pass where a library's seeks go wrong there (issue 30)."""

import pytest

from playbook_utils import decoders, media
from playbook_utils.decoders import adapter, video_info

pytestmark = pytest.mark.media

# stamped open-GOP clips: H.264 and HEVC, MP4 and MKV, short and long GOP, with B-frames
CLIPS = {
    "h264_gop12.mp4": dict(codec="h264", gop=12, bframes=3),
    "hevc_gop12.mp4": dict(codec="hevc", gop=12, bframes=3),
    "hevc_gop24.mkv": dict(codec="hevc", gop=24, bframes=3),
    "h264_gop48.mkv": dict(codec="h264", gop=48, bframes=2),
}


@pytest.fixture(scope="module")
def open_gop_clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("open_gop")
    made = {}
    for name, kw in CLIPS.items():
        made[name] = media.make_clip(folder / name, width=256, height=144, num_frames=96, closed_gop=False, **kw)
        assert video_info(made[name]).open_gop, name
    return made


def _hard_indices(info) -> list[int]:
    """Out of order, repeated, and on both sides of every keyframe (where the leading pictures of open GOP are)."""
    around = sorted({k + d for k in info.keyframes[1:] for d in (-2, -1, 0, 1, 2)})
    return [info.num_frames - 1, *reversed(around), 0, around[0], around[0]]


def test_decord_reads_open_gop_forward_and_exactly_where_its_seeks_go_wrong(open_gop_clips):
    if adapter("decord").why_unavailable("cpu") is not None:
        pytest.skip(adapter("decord").why_unavailable("cpu"))
    import torch

    from playbook_utils.decoders import decord as decord_adapter

    wrong_by_seeking = 0
    for name, path in open_gop_clips.items():
        info = video_info(path)
        assert adapter("decord").why_unavailable("cpu", info) is None and adapter("decord").forward_only(info, "cpu")
        idx = _hard_indices(info)
        got = media.read_stamps(decoders.read_frames(path, idx, backend="decord"))
        assert got == idx, (name, [(i, g) for i, g in zip(idx, got) if i != g])
        # the row has teeth: decord's own batched reads, which seek, return other frames on these clips
        import decord

        unique = sorted(set(idx))
        seeking = decord.VideoReader(str(path)).get_batch(unique)
        stamps = media.read_stamps(torch.from_dlpack(seeking.to_dlpack()).permute(0, 3, 1, 2))
        wrong_by_seeking += sum(s != i for s, i in zip(stamps, unique))
        assert decord_adapter._forward(decord.VideoReader(str(path)), [5]).shape[0] == 1
    assert wrong_by_seeking > 0
