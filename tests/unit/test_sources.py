"""Inputs beyond a path: bytes, file-like objects, tar members and s3:// URLs, frame-exact against the file on disk.

The object store is real: moto's S3 server runs on localhost inside the test session (`s3` fixture in
conftest-free form below), and the reads go through s3fs exactly as they would against a bucket.
"""

import io
import json
import os
import tarfile

import pytest

from playbook_utils import decoders, media, sources
from playbook_utils.errors import BackendUnavailable, DecodeError

CPU_NATIVE = ("pyav", "torchcodec", "decord", "spdl")
IDX = [0, 13, 29, 5, 5, 40]  # out of order, a repeat, across GOPs


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    return media.make_clip(d / "c.mp4", "h264", 96, 64, num_frames=42, gop=12)


@pytest.fixture(scope="module")
def shard(clip, tmp_path_factory):
    path = tmp_path_factory.mktemp("shard") / "s-000.tar"
    with tarfile.open(path, "w") as t:
        t.add(clip, arcname="a.mp4")
        info = tarfile.TarInfo("a.json")
        body = b'{"caption": "stamped bars"}'
        info.size = len(body)
        t.addfile(info, io.BytesIO(body))
        t.add(clip, arcname="b.mp4")
    return path


def _stamps(frames):
    return [media.read_stamp(f) for f in frames]


def _available(backend):
    why = decoders.why_unavailable(backend, "cpu")
    if why:
        pytest.skip(f"{backend}: {why}")


@pytest.mark.media
@pytest.mark.parametrize("backend", CPU_NATIVE)
def test_memory_and_tar_inputs_are_frame_exact(backend, clip, shard):
    _available(backend)
    want = _stamps(decoders.read_frames(clip, IDX, backend))
    assert want == IDX
    data = clip.read_bytes()
    inputs = {
        "bytes": data,
        "bytearray": bytearray(data),
        "file-like": io.BytesIO(data),
        "open file": open(clip, "rb"),
        "TarMember": sources.TarMember(str(shard), "b.mp4"),
        "tar:// string": f"tar://a.mp4::{shard}",
        "file:// URL": f"file://{clip}",
    }
    try:
        for name, src in inputs.items():
            got = decoders.read_source(src, IDX, backend)
            assert _stamps(got.frames) == want, name
            assert got.how == "native", name
            assert decoders.read_frames(src, [7], backend).shape[0] == 1, name  # the file-like can be read again
    finally:
        inputs["open file"].close()


@pytest.mark.media
def test_file_like_is_read_from_where_it_stands(clip):
    """A caller's file object positioned at a video embedded in a larger stream: reads are relative to it."""
    f = io.BytesIO(b"x" * 1000 + clip.read_bytes())
    f.seek(1000)
    assert _stamps(decoders.read_frames(f, [2, 20], "pyav")) == [2, 20]
    assert f.tell() == 1000, "the caller's position is given back"


@pytest.mark.media
def test_probe_takes_every_input(clip, shard):
    ref = media.probe(clip)
    for src in (clip.read_bytes(), io.BytesIO(clip.read_bytes()), sources.TarMember(str(shard), "a.mp4")):
        got = media.probe(src)
        assert (got.num_frames, got.keyframes, got.pts, got.codec) == (
            ref.num_frames,
            ref.keyframes,
            ref.pts,
            ref.codec,
        )
    assert media.probe(sources.TarMember(str(shard), "a.mp4")).path == f"tar://a.mp4::{shard}"
    assert decoders.video_info(f"tar://b.mp4::{shard}").num_frames == 42


@pytest.mark.media
def test_backends_without_memory_input_get_a_spooled_copy(clip, monkeypatch, tmp_path):
    """A library that needs a file name gets a temporary copy, said in the result, deleted afterwards."""
    assert decoders.how_read("pynvvideocodec") == "spooled"
    assert {b: decoders.how_read(b) for b in CPU_NATIVE} == {b: "native" for b in CPU_NATIVE}
    monkeypatch.setattr(sources.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(decoders.adapter("pyav"), "read_file", None)  # pyav as if it took only file names
    got = decoders.read_source(clip.read_bytes(), IDX, "pyav")
    assert got.how == "spooled" and _stamps(got.frames) == IDX
    assert not list(tmp_path.glob("playbook-spool-*")), "the spooled copy is deleted"


@pytest.mark.media
def test_refusals_name_the_input(clip, shard):
    data = clip.read_bytes()
    with pytest.raises(BackendUnavailable, match=r"<\d+ bytes> \[dali\].*does not take h264"):
        decoders.read_frames(data, [0], "dali")
    with pytest.raises(BackendUnavailable, match=r"\[pynvvideocodec\].*no cpu path"):
        decoders.read_frames(data, [0], "pynvvideocodec")
    with pytest.raises(DecodeError, match=r"tar://nope.mp4::.*has no member 'nope.mp4'"):
        decoders.read_frames(f"tar://nope.mp4::{shard}", [0], "pyav")
    with pytest.raises(DecodeError, match=r"<5000 bytes> \[pyav\].*cannot open as a media file"):
        decoders.read_frames(b"\0" * 5000, [0], "pyav")
    with pytest.raises(DecodeError, match=r"frame index 42 is out of range"):
        decoders.read_frames(data, [42], "torchcodec")
    with pytest.raises(DecodeError, match="not a video source: int"):
        decoders.read_frames(12, [0], "pyav")
    with pytest.raises(DecodeError, match="not a readable uncompressed tar"):
        sources.tar_index(clip)


@pytest.mark.media
def test_dali_cpu_takes_vp9_bytes(tmp_path):
    if decoders.why_unavailable("dali", "cpu"):
        pytest.skip(decoders.why_unavailable("dali", "cpu"))
    clip = media.make_clip(tmp_path / "v.webm", "vp9", 96, 64, num_frames=24, gop=12)
    got = decoders.read_source(clip.read_bytes(), [1, 14, 23], "dali")
    assert got.how == "native" and _stamps(got.frames) == [1, 14, 23]


def test_range_file_counts_requests_and_serves_prefetched_bytes():
    blob = bytes(range(256)) * 4000  # 1 MB
    calls = []

    def fetch(a, b):
        calls.append((a, b))
        return blob[a:b]

    f = sources.RangeFile(fetch, len(blob), block_size=64 * 1024)
    f.seek(100_000)
    assert f.read(10) == blob[100_000:100_010]
    assert f.read(200_000) == blob[100_010:300_010]
    assert f.stats.requests == len(calls) == 2, "one miss, then one request for the run of missing blocks"
    assert f.stats.bytes_fetched == sum(b - a for a, b in calls)
    f.seek(-5, os.SEEK_END)
    assert f.read() == blob[-5:]
    held = sources.RangeFile(fetch, len(blob), prefetched={500_000: blob[500_000:600_000]})
    before = len(calls)
    held.seek(510_000)
    assert held.read(1000) == blob[510_000:511_000] and len(calls) == before and held.stats.requests == 0
    held.seek(590_000)
    assert held.read(20_000) == blob[590_000:600_000], "a short read at the edge of a prefetched range"
    held.seek(0)
    assert held.read() == blob, "read() with no size returns everything"


@pytest.mark.media
def test_loader_dataset_takes_tar_members(shard):
    from playbook_utils.loaders import VideoClipDataset

    ds = VideoClipDataset([sources.TarMember(str(shard), "a.mp4"), f"tar://b.mp4::{shard}"], k=4)
    assert [_stamps(ds[i]) for i in range(2)] == [[5, 15, 26, 36]] * 2


@pytest.mark.media
def test_torchcodec_takes_the_probes_frame_table_for_memory_inputs(tmp_path):
    """A file-like input gets TorchCodec's custom_frame_mappings from the probe (no scan of the file): exact on a
    variable-frame-rate clip with B-frames, where a wrong table would show as wrong frames."""
    _available("torchcodec")
    from playbook_utils.decoders import torchcodec as tc

    times = [0.0, 0.04, 0.05, 0.1, 0.18, 0.2, 0.26, 0.3, 0.41, 0.45, 0.5, 0.62, 0.7, 0.71, 0.8, 0.9]
    clip = media.make_clip(tmp_path / "vfr.mp4", "h264", 96, 64, num_frames=16, gop=6, frame_times=times)
    info = media.probe(clip)
    table = json.loads(tc.frame_mappings(info))["frames"]
    assert [f["pts"] for f in table] == info.pts and sum(f["key_frame"] for f in table) == len(info.keyframes)
    idx = [15, 0, 7, 8, 3]
    assert _stamps(decoders.read_frames(io.BytesIO(clip.read_bytes()), idx, "torchcodec")) == idx


GPU_BACKENDS = [b for b in decoders.BACKENDS if b != "decord"] if __import__("torch").cuda.is_available() else []


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif(not GPU_BACKENDS, reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", GPU_BACKENDS or ["none"])
def test_gpu_backends_take_memory_and_tar_inputs_or_spool_them(backend, clip, shard):
    """On the GPU: bytes and tar members frame-exact for every GPU backend; PyNvVideoCodec (a file name only)
    through a spooled temporary file, the others natively."""
    why = decoders.why_unavailable(backend, "cuda")
    if why:
        pytest.skip(why)
    for src in (clip.read_bytes(), sources.TarMember(str(shard), "a.mp4")):
        got = decoders.read_source(src, IDX, backend, "cuda")
        assert got.frames.is_cuda and _stamps(got.frames) == IDX
        assert got.how == ("spooled" if backend == "pynvvideocodec" else "native")
