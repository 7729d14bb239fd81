"""Open-GOP video read frame-exactly by one forward pass where a library's seeks go wrong there (issue 30)."""

import pytest

from playbook_utils import decoders
from playbook_utils.bench import matrix, media
from playbook_utils.decoders import adapter, video_info
from tests.sentences import numbers

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


def test_decord_reads_open_gop_forward_and_exactly_where_its_seeks_go_wrong(open_gop_clips, monkeypatch):
    if adapter("decord").why_unavailable("cpu") is not None:
        pytest.skip(adapter("decord").why_unavailable("cpu"))
    import torch

    from playbook_utils.decoders import decord as decord_adapter

    wrong_by_seeking = 0
    for name, path in open_gop_clips.items():
        info = video_info(path)
        assert adapter("decord").why_unavailable("cpu", info) is None and decoders.reads_forward("decord", "cpu", path)
        assert not decoders.reads_forward("pyav", "cpu", path)  # PyAV seeks right on these clips
        idx = matrix.around_keyframes(info)
        got = media.read_stamps(decoders.read_frames(path, idx, backend="decord"))
        assert got == idx, (name, [(i, g) for i, g in zip(idx, got) if i != g])
        # the row has teeth: decord's own batched reads, which seek, return other frames on these clips
        import decord

        unique = sorted(set(idx))
        seeking = decord.VideoReader(str(path)).get_batch(unique)
        stamps = media.read_stamps(torch.from_dlpack(seeking.to_dlpack()).permute(0, 3, 1, 2))
        wrong_by_seeking += sum(s != i for s, i in zip(stamps, unique))
        assert decord_adapter._forward(decord.VideoReader(str(path)), [5]).shape[0] == 1
        whole = list(range(info.num_frames))  # every frame: one get_batch call from the first
        got = media.read_stamps(decord_adapter._forward(decord.VideoReader(str(path)), whole).permute(0, 3, 1, 2))
        assert got == whole, (name, [(i, g) for i, g in zip(whole, got) if i != g])
        for run in (7, 12):  # runs that end inside a GOP and runs that start on a keyframe (GOP 12 and 24, 48)
            monkeypatch.setattr(decord_adapter, "FORWARD_RUN", run)
            got = media.read_stamps(decord_adapter._forward(decord.VideoReader(str(path)), unique).permute(0, 3, 1, 2))
            assert got == unique, (name, run, [(i, g) for i, g in zip(unique, got) if i != g])
    assert wrong_by_seeking > 0


def _read_forward_everywhere(monkeypatch, name: str, kind: str) -> None:
    """Make `name`'s open-GOP row apply to every open-GOP file on `kind` and its forward read serve it there."""
    import dataclasses

    cls = type(adapter(name))
    rows = tuple(
        dataclasses.replace(r, traits=frozenset({"open-gop"}), devices=(kind,)) if "open-gop" in r.traits else r
        for r in cls.KNOWN_WRONG
    )
    monkeypatch.setattr(cls, "KNOWN_WRONG", rows)
    monkeypatch.setattr(cls, "FORWARD_ON", (kind,))


def test_torchcodec_forward_read_takes_a_frame_table_with_one_keyframe_and_is_exact(open_gop_clips, monkeypatch):
    """TorchCodec's forward-only read, the one its CUDA path takes on open-GOP HEVC (FORWARD_ON, proven on the H200):
    a frame table that flags only the first frame as a keyframe, so VideoDecoder never seeks into a later GOP."""
    import json

    from playbook_utils.decoders import torchcodec as tc

    if adapter("torchcodec").why_unavailable("cpu") is not None:
        pytest.skip(adapter("torchcodec").why_unavailable("cpu"))
    _read_forward_everywhere(monkeypatch, "torchcodec", "cpu")
    for name, path in open_gop_clips.items():
        info = video_info(path)
        assert adapter("torchcodec").forward_only(info, "cpu")
        table = json.loads(tc.frame_mappings(info, forward=True))["frames"]
        assert [f["key_frame"] for f in table] == [1] + [0] * (info.num_frames - 1)
        idx = matrix.around_keyframes(info)
        assert media.read_stamps(decoders.read_frames(path, idx, backend="torchcodec")) == idx, name
        assert tc.cached_decoder(str(path), "cpu", info.stream, info) is tc.cached_decoder(
            str(path), "cpu", info.stream, info
        )


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["torchcodec", "pynvvideocodec"])
def test_the_gpu_forward_read_is_exact_on_open_gop(open_gop_clips, monkeypatch, backend):
    """The proof behind FORWARD_ON = ('cuda',) (issue 30): on NVDEC, every open-GOP clip read forward, with
    out-of-order, repeated and keyframe-boundary indices, returns exactly the frames asked for (clips the backend
    refuses for another trait, such as PyNvVideoCodec's MKV, are named and left out)."""
    import torch

    if not torch.cuda.is_available() or adapter(backend).why_unavailable("cuda") is not None:
        pytest.skip("needs a CUDA GPU and " + backend)
    _read_forward_everywhere(monkeypatch, backend, "cuda")
    wrong, other = {}, {}
    for name, path in open_gop_clips.items():
        info = video_info(path)
        if adapter(backend).why_unavailable("cuda", info):
            other[name] = adapter(backend).why_unavailable("cuda", info)
            continue
        assert adapter(backend).forward_only(info, "cuda"), name
        idx = matrix.around_keyframes(info)
        got = media.read_stamps(decoders.read_frames(path, idx, backend=backend, device="cuda").cpu())
        wrong[name] = [(i, g) for i, g in zip(idx, got) if i != g]
    assert len(wrong) >= 2 and not any(wrong.values()), (wrong, other)


class _FakeSpdlIo:
    """What `decoders.spdl._frames_cuda` calls of spdl.io, for a machine without NVDEC: the file's timestamps and
    a demux by time window (the windows asked for are recorded)."""

    def __init__(self, num_frames: int):
        self.times, self.windows = [i / 24 for i in range(num_frames)], []

    def demux_video(self, src, timestamp=None):
        import types

        if timestamp is not None:
            self.windows.append(timestamp)
        return types.SimpleNamespace(get_timestamps=lambda: list(self.times))

    def cuda_config(self, device_index=0):
        return device_index


@pytest.mark.parametrize("failure", ["short window", "no frames"])
def test_spdl_cuda_refuses_an_open_gop_file_it_cannot_read_exactly_and_never_indexes_a_short_window(
    open_gop_clips, monkeypatch, failure
):
    """On the H200 (SPDL 0.8.0, open_gop_matrix.py) NVDEC windows starting at a later keyframe of some open-GOP MP4s
    came back one frame short, or SPDL raised "No frames were decoded". Frames taken by position from a short
    window would be neighbours of the ones asked for; a raw error would count a valid file as broken. Such a file
    is refused by name (BackendUnavailable, which a skip policy does not count as damage); the same shortfall in a
    closed-GOP file stays an error."""
    import dataclasses
    import sys
    import types

    import torch

    from playbook_utils.decoders import spdl as spdl_adapter
    from playbook_utils.device import Device
    from playbook_utils.errors import BackendUnavailable

    name, path = next((n, p) for n, p in open_gop_clips.items() if n.endswith(".mp4"))
    info = video_info(path)
    assert info.open_gop and len(info.keyframes) > 1
    fake = _FakeSpdlIo(info.num_frames)
    package = types.ModuleType("spdl")
    package.io = fake
    monkeypatch.setitem(sys.modules, "spdl", package)
    monkeypatch.setitem(sys.modules, "spdl.io", fake)
    monkeypatch.setattr(spdl_adapter, "_load", lambda: None)

    def nvdec(packets, cfg, info, size=None):  # the window of the second GOP comes back short
        first = fake.times.index(fake.windows[-1][0])
        if first == 0:
            return torch.zeros((info.keyframes[1], 3, 8, 8), dtype=torch.uint8)
        if failure == "no frames":
            raise RuntimeError("[INTERNAL ASSERTION FAILED] No frames were decoded. (decoder.cpp:744)")
        return torch.zeros((1, 3, 8, 8), dtype=torch.uint8)

    monkeypatch.setattr(spdl_adapter, "_nvdec_rgb", nvdec)
    second = info.keyframes[1]
    wanted = [0, second, second + 1]
    with pytest.raises(BackendUnavailable) as refused:
        spdl_adapter.ADAPTER.read(str(path), wanted, Device("cuda"), info)
    e = refused.value
    assert e.path == str(path) and e.backend == "spdl"
    assert "open-GOP" in e.cause and "TorchCodec" in e.cause  # what the file is, and what reads it
    window = [str(second), str(second + 1)]  # the frames of the window that came back short
    if failure == "short window":
        assert numbers(e.cause)[:4] == [*window, "1", "2"]  # 1 of its 2 frames came back
    else:
        assert numbers(e.cause)[:2] == window and "RuntimeError" in e.cause  # the library's error, described
    # read from bytes, the file's name still in the refusal (read_file hands SPDL the bytes, not the path)
    with open(path, "rb") as f, pytest.raises(BackendUnavailable) as from_bytes:
        spdl_adapter.ADAPTER.read_file(f, wanted, Device("cuda"), info)
    assert from_bytes.value.path == str(path)
    closed = dataclasses.replace(info, open_gop=False)
    with pytest.raises(RuntimeError, match="NVDEC returned|No frames were decoded"):
        spdl_adapter.ADAPTER.read(str(path), wanted, Device("cuda"), closed)
    # a read inside the first GOP, whose window came back whole, is served
    assert spdl_adapter.ADAPTER.read(str(path), [0, 1], Device("cuda"), info).shape[0] == 2
