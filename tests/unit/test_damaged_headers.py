"""Damaged headers and byte streams: whatever goes wrong while probing or reading one file is that file's
`DecodeError` (or `BackendUnavailable`), so `on_error='skip'` absorbs it (issue 29). The crafted cases first,
then a property-based search over mutated MP4, MKV and WebM headers."""

import io
import resource
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playbook_utils.bench import media
from playbook_utils.decoders import read_frames
from playbook_utils.errors import BackendUnavailable, DecodeError
from playbook_utils.probe import probe
from tests.sentences import numbers

pytestmark = pytest.mark.media
OURS = (DecodeError, BackendUnavailable)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("headers")
    made = {
        "mp4": media.make_clip(d / "c.mp4", "h264", 64, 64, num_frames=8, gop=4),
        "mkv": media.make_clip(d / "c.mkv", "h264", 64, 64, num_frames=8, gop=4),
    }
    if media.encoder_for("vp9"):
        made["webm"] = media.make_clip(d / "c.webm", "vp9", 64, 64, num_frames=8, gop=4)
    return made


@pytest.mark.parametrize("how", media.DAMAGES)
def test_a_crafted_mp4_header_is_read_or_refused_with_our_error(clips, tmp_path, how):
    # Before: 'short track header' raised struct.error and 'huge moov' MemoryError from the probe's own box
    # reader, 'unknown sample entry' AttributeError: each ended a DataLoader epoch with on_error='skip'.
    path = media.damage_mp4(clips["mp4"], tmp_path / "d.mp4", how)
    if how == "unknown sample entry":
        with pytest.raises(DecodeError, match=r"d\.mp4 \[probe\]: no decoder for its video stream"):
            probe(path)
        with pytest.raises(DecodeError, match=r"d\.mp4 \[pyav\]: no decoder"):
            read_frames(path, [0])
        return
    # the damaged box holds nothing the frames need (the display matrix, read as no rotation): read as usual
    info = probe(path)
    assert (info.num_frames, info.rotation) == (8, 0)
    assert media.read_stamp(read_frames(path, [7])[0].permute(1, 2, 0).numpy()) == 7


class _FailsAfter(io.BytesIO):
    """A file-like object whose reads fail after its first `calls` reads (a connection dropped mid-file)."""

    def __init__(self, data, calls):
        super().__init__(data)
        self.calls = calls

    def read(self, n=-1):
        self.calls -= 1
        if self.calls < 0:
            raise OSError(5, "Input/output error")
        return super().read(n)


def test_a_file_object_whose_read_fails_part_way_is_our_error(clips):
    # Before: a failure in the last reads (the probe's own reading of the MP4 header) was a raw OSError.
    data = clips["mp4"].read_bytes()
    counting = _FailsAfter(data, 10**6)
    probe(counting)
    reads = 10**6 - counting.calls
    for calls in range(reads):
        with pytest.raises(OURS):
            probe(_FailsAfter(data, calls))


CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"dinf", b"udta"}


def _box_starts(data: bytes, start: int, end: int) -> list[int]:
    """Where each MP4 box header starts, the boxes inside the container boxes too."""
    out = []
    for kind, at, size in media._boxes(data, start, end):
        if size < 8 or at + size > end:
            break
        out.append(at)
        if kind in CONTAINERS:
            out += _box_starts(data, at + 8, at + size)
    return out


def _mutate(data: bytes, kind: str, draw) -> bytes:
    """One damage to `data`'s header: MP4's ftyp and moov (at the end of our files), often right at a box's
    size or type, where a reader's trust in the header shows; MKV/WebM's first 4 KiB."""
    if kind == "mp4":
        moov = data.rindex(b"moov") - 4
        lo, hi = draw(st.sampled_from([(0, 40), (moov, len(data))]))
        at = draw(st.one_of(st.integers(lo, hi - 1), st.sampled_from(_box_starts(data, 0, len(data)))))
    else:
        at = draw(st.integers(0, min(4096, len(data)) - 1))
    op = draw(st.sampled_from(["bytes", "size", "cut", "insert"]))
    if op == "bytes":
        new = draw(st.binary(min_size=1, max_size=8))
        return data[:at] + new + data[at + len(new) :]
    if op == "size":  # an absurd 32-bit length where a box or element size may sit
        value = draw(st.sampled_from([0, 1, 7, 8, 2**31 - 1, 2**32 - 1]))
        return data[:at] + value.to_bytes(4, "big") + data[at + 4 :]
    if op == "cut":  # the file ends here; or, in a box, the box does (its size says so, the parent's not)
        return data[:at] if draw(st.booleans()) else data[:at] + (8).to_bytes(4, "big") + data[at + 4 : at + 8]
    return data[:at] + draw(st.binary(min_size=1, max_size=64)) + data[at:]


@settings(
    max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_mutated_header_raises_only_our_errors_without_hanging_or_growing(clips, tmp_path, data):
    kind = data.draw(st.sampled_from(sorted(clips)))
    blob = _mutate(clips[kind].read_bytes(), kind, data.draw)
    path = tmp_path / f"m.{kind}"
    path.write_bytes(blob)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    for attempt in (lambda: probe(path), lambda: read_frames(path, [0, 7]), lambda: probe(io.BytesIO(blob))):
        try:
            attempt()
        except OURS:
            pass  # anything else fails the test, with the mutation hypothesis found
    assert time.monotonic() - start < 20, "a damaged 2 KB file took more than 20 s"
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    assert grown_mb < 512, f"reading a damaged 2 KB file raised the peak memory by {grown_mb:.0f} MB"


def test_a_download_cut_inside_its_first_frame_is_our_error(tmp_path):
    # A faststart 1080p file cut at 300 kB (the reader's mixed folder) kept one packet, flagged corrupt and not a
    # keyframe: the probe reported 1 frame and no keyframes, and pick_clip divided by its empty GOP list.
    from playbook_utils import folders

    full = media.make_clip(tmp_path / "full.mp4", "h264", 320, 180, num_frames=4, gop=4, picture=media.detailed_frame)
    fast = tmp_path / "fast.mp4"
    import av

    with av.open(str(full)) as inp, av.open(str(fast), "w", options={"movflags": "faststart"}) as out:
        s_out = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(video=0):
            if packet.dts is not None:
                packet.stream = s_out
                out.mux(packet)
    blob = fast.read_bytes()
    first_packet_ends = blob.index(b"mdat") + 4 + 1000  # inside the first (key)frame's data
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "cut.mp4").write_bytes(blob[:first_packet_ends])
    with pytest.raises(DecodeError, match=r"cut\.mp4 \[probe\]: no keyframe among its 1 video packets"):
        probe(folder / "cut.mp4")
    with pytest.raises(DecodeError, match=r"folder: no readable video: cut\.mp4: no keyframe among"):  # alone
        folders.scan_videos(folder)
    (folder / "whole.mp4").write_bytes(blob)
    scanned = folders.scan_videos(folder)
    assert list(scanned.videos) == ["whole.mp4"] and list(scanned.unreadable) == ["cut.mp4"]
    assert numbers(scanned.unreadable["cut.mp4"]) == ["1"]  # the cause: no keyframe among its 1 video packet
