"""What a video file holds, read from its packets without decoding: `VideoInfo`, `probe`, and the cached
`video_info` for every kind of source (path, bytes, file-like, tar member, URL). Introduced in notebook 01."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from playbook_utils import sources
from playbook_utils.errors import DecodeError, describe, first_line

__all__ = ["forget", "probe", "size_change", "video_info", "VideoInfo"]


@dataclasses.dataclass
class VideoInfo:
    """What `probe` found in a file. Introduced in notebook 01."""

    path: str
    container: str
    codec: str
    width: int
    height: int
    pix_fmt: str
    fps: float
    num_frames: int
    duration_s: float
    keyframes: list[int]
    bit_rate: int | None
    rotation: int  # degrees counterclockwise a player turns the stored picture (the display matrix): 0/90/180/270
    variable_frame_rate: bool
    b_frames: bool = False
    open_gop: bool = False
    pts: list[int] = dataclasses.field(default_factory=list, repr=False)  # per frame, presentation order
    stream: int = 0  # the container's index of the stream described (FFmpeg's numbering, as ffprobe's)
    best_stream: int = 0  # the video stream FFmpeg picks by default (av_find_best_stream)
    video_streams: int = 1  # video streams in the file
    edit_list_hidden: int = 0  # frames decoded, never shown (an edit list hides them, or a cut left them untimed)
    color_matrix: str | None = None  # what the file says: 'bt601', 'bt709' or 'bt2020'; None: no tag (`colour`)
    color_range: str | None = None  # 'limited' or 'full'; None: no tag
    bit_depth: int = 8  # bits per sample of the decoded picture
    missing_frames: int = 0  # frames the container's index lists (MP4's sample table) that no packet holds: cut short
    key_dts: dict = dataclasses.field(default_factory=dict, repr=False)  # keyframe index -> its dts, where not its pts
    decode_order_times: bool = False  # B-frames timed in decode order (an AVI remuxed with -c copy): frames misplaced

    @property
    def name(self) -> str:
        """The file name, without its folder."""
        return Path(self.path).name

    @property
    def gop_lengths(self) -> list[int]:
        """Frames between consecutive keyframes (the last GOP runs to the end)."""
        ks = self.keyframes + [self.num_frames]
        return [b - a for a, b in zip(ks, ks[1:])]

    @property
    def keyframe_of(self) -> list[int]:
        """For each frame index, the index of the keyframe at or before it (where a seek lands)."""
        keys, k, out = set(self.keyframes), 0, []
        for i in range(self.num_frames):
            k = i if i in keys else k
            out.append(k)
        return out

    @property
    def cut_short(self) -> bool:
        """Whether the container's index lists frames that the file's packets do not hold (`missing_frames`): a file cut
        short after its index, read as a shorter video (notebook 23)."""
        return self.missing_frames > 0

    @functools.cached_property  # `decoders.read` asks before every read; the frames' times are many
    def unplaceable(self) -> str | None:
        """Why no library can place this file's frames exactly (an AVI with B-frames, frames sharing a time, MPEG-PS),
        or None (notebooks 20, 23)."""
        if self.b_frames and self.container == "avi":
            fix = (  # MPEG-4 Part 2 (XviD, DivX): FFmpeg's parser gives each frame its time; for H.264 none does
                "remux it: ffmpeg -fflags +genpts -i IN -c copy -bsf:v mpeg4_unpack_bframes OUT.mp4"
                if self.codec == "mpeg4"
                else "re-encode it: ffmpeg -i IN -c:v libx264 -crf 18 OUT.mp4 (a remux with -c copy leaves them out of "
                "place)"
            )
            return (
                f"AVI with B-frames stores no presentation timestamps, so no library can locate a frame exactly; {fix}"
            )
        if self.container == "mpeg":  # the container first: its remux is the fix, whatever else is wrong
            return (
                "MPEG-PS (.mpg, .vob) may store no time for a frame, and seeks in it miss (PyAV, TorchCodec, decord; "
                "SPDL raised); remux it to MP4: ffmpeg -fflags +genpts -i IN -c copy OUT.mp4"
            )
        if self.decode_order_times:
            return (
                "its B-frames carry their decode order as presentation times (an AVI remuxed with -c copy?), so every "
                "library returns frames out of place; re-encode it: ffmpeg -i IN -c:v libx264 -crf 18 OUT.mp4"
            )
        if len(set(self.pts)) < len(self.pts):
            return (
                "some of its frames share a presentation time (overlapping pieces joined?), so no library can "
                "order them; re-encode it"
            )
        return None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# FFmpeg's AVColorSpace and AVColorRange numbers (libavutil/pixfmt.h) -> what `colour` calls them
AVCOL_SPC = {1: "bt709", 5: "bt601", 6: "bt601", 9: "bt2020", 10: "bt2020"}
AVCOL_RANGE = {1: "limited", 2: "full"}


def probe(path, stream: int | None = None) -> VideoInfo:
    """Return a `VideoInfo` for FFmpeg's best video stream of `path` (or the container's `stream`) from its packets,
    decoding at most the first 16 frames (`_out_of_order`); `path`: any input `sources.resolve` takes. Raises
    `DecodeError` naming the file and the cause. Introduced in notebook 01."""
    import av

    opened = None
    with contextlib.ExitStack() as stack:
        if sources.is_local(path):
            path = Path(path)
            if not path.exists():
                raise DecodeError(path, "file does not exist", backend="probe")
            if path.stat().st_size == 0:
                raise DecodeError(path, "file is empty (0 bytes)", backend="probe")
        else:
            src = sources.resolve(path)
            path = src.name
            if src.size == 0:
                raise DecodeError(path, "file is empty (0 bytes)", backend="probe")
            opened = stack.enter_context(src.open())
        try:
            container = stack.enter_context(av.open(opened if opened is not None else str(path)))
        except Exception as e:  # PyAV raises its own FFmpeg error types
            raise DecodeError(path, f"cannot open as a media file ({describe(e)})", backend="probe") from e
        try:
            return _describe(container, path, opened, stream)
        except DecodeError:
            raise
        except Exception as e:  # our box reader, PyAV or the byte layer on a damaged header: the file's failure
            cause = f"{type(e).__name__}: {first_line(e, type(e).__name__)[:300]}"
            raise DecodeError(path, f"cannot read its header or packets ({cause})", backend="probe") from e


def _describe(container, path, opened, stream: int | None) -> VideoInfo:
    """`probe`'s reading of an open container (any exception is the caller's to name)."""
    import av

    if not container.streams.video:
        raise DecodeError(path, "contains no video stream", backend="probe")
    if container.format.name.startswith("image2") or container.format.name.endswith("_pipe"):
        raise DecodeError(path, f"a still picture ({container.format.name}), not a video", backend="probe")
    videos = {s.index: s for s in container.streams.video}
    best = container.streams.best("video") or container.streams.video[0]
    if stream is not None and stream not in videos:
        why = f"stream {stream} is not a video stream of this file (its video streams: {', '.join(map(str, videos))})"
        raise DecodeError(path, why, backend="probe")
    stream = videos[best.index if stream is None else stream]
    cover = av.stream.Disposition.attached_pic
    if stream.disposition & cover:  # an audio file's artwork
        raise DecodeError(path, "its video stream is a cover picture, not a video", backend="probe")
    ctx = stream.codec_context
    if ctx is None or ctx.codec is None:  # a damaged or unknown sample entry: FFmpeg opens the file, decodes nothing
        why = "its sample description names no codec FFmpeg knows (a damaged or unknown codec tag)"
        raise DecodeError(path, f"no decoder for its video stream: {why}", backend="probe")
    pts_key, dts_of = [], {}
    open_gop, key_pts, hidden, demuxed, starts_on_key = False, None, 0, 0, True
    try:
        for packet in container.demux(stream):
            demuxed += packet.size > 0  # every packet that holds data (the flush packet at the end holds none)
            if packet.size == 0:
                continue
            if demuxed == 1:  # the first packet in decode order
                starts_on_key = packet.is_keyframe
            # decoded for reference, never shown: before an edit list's start, or left without a time by a cut
            # made by stream copy (open-GOP HEVC in MKV: the leading frames of its first keyframe)
            if packet.is_discard or packet.pts is None:
                hidden += 1
                continue
            # Open GOP: after a keyframe (in decode order) come frames shown before it.
            if packet.is_keyframe and pts_key:
                key_pts = packet.pts
            elif key_pts is not None and packet.pts < key_pts:
                open_gop = True
            pts_key.append((packet.pts, bool(packet.is_keyframe)))
            if packet.is_keyframe and packet.dts is not None and packet.dts != packet.pts:
                dts_of[packet.pts] = packet.dts
    except Exception as e:
        raise DecodeError(path, f"demuxing failed after {len(pts_key)} packets ({e})", backend="probe") from e
    if not pts_key:
        raise DecodeError(path, "video stream has no packets", backend="probe")
    rising = all(b > a for (a, _), (b, _) in zip(pts_key, pts_key[1:]))  # the times in decode order
    pts_key.sort()
    keyframes = [i for i, (_, key) in enumerate(pts_key) if key]
    if not keyframes:  # nothing to start decoding from: a download cut inside its first frame leaves one such packet
        raise DecodeError(
            path, f"no keyframe among its {len(pts_key)} video packets: nothing can be decoded (cut short?)", "probe"
        )
    if not starts_on_key:  # in decode order: before the first keyframe, nothing decodes
        why = "it starts between keyframes (a piece cut from a stream?): its first frames cannot be decoded"
        raise DecodeError(path, why, backend="probe")
    tb = stream.time_base
    deltas = np.diff([p for p, _ in pts_key])
    # A one-tick wobble is rounding (WebM stores milliseconds: 33, 34, 33 ms at 30 fps), not VFR.
    vfr = bool(len(deltas) > 1 and (deltas.max() - deltas.min()) > max(1, 0.02 * np.median(deltas)))
    rate = stream.average_rate or stream.guessed_rate
    fps = float(rate) if rate else 0.0
    if len(pts_key) > 1 and tb is not None:
        span = float((pts_key[-1][0] - pts_key[0][0]) * tb)
        duration = span + (span / (len(pts_key) - 1))
    else:
        duration = len(pts_key) / fps if fps else 0.0
    rotation = 0
    if container.format.name.startswith("mov"):
        rotation = _mp4_rotations(opened if opened is not None else path).get(stream.id, 0)
    fmt = ctx.format.name if ctx.format is not None else (ctx.pix_fmt or "unknown")
    depth = next((b for b in (16, 14, 12, 10, 9) if f"p{b}" in fmt), 8)
    full = fmt.startswith("yuvj")  # the old full-range formats carry their range in their name
    return VideoInfo(
        path=str(path),
        container=container.format.name,
        codec=ctx.codec.canonical_name,
        width=ctx.width,
        height=ctx.height,
        pix_fmt=fmt,
        fps=round(fps, 3),
        num_frames=len(pts_key),
        duration_s=round(duration, 3),
        keyframes=keyframes,
        bit_rate=container.bit_rate or None,
        rotation=rotation,
        variable_frame_rate=vfr,
        b_frames=bool(ctx.has_b_frames),
        open_gop=open_gop,
        pts=[p for p, _ in pts_key],
        stream=stream.index,
        best_stream=best.index,
        video_streams=sum(not s.disposition & cover for s in videos.values()),
        edit_list_hidden=hidden,
        color_matrix=AVCOL_SPC.get(getattr(ctx, "colorspace", None)),
        color_range="full" if full else AVCOL_RANGE.get(getattr(ctx, "color_range", None)),
        bit_depth=depth,
        missing_frames=max(0, (stream.frames or 0) - demuxed),  # MKV, WebM: no count in the index, none missing
        key_dts={k: dts_of[pts_key[k][0]] for k in keyframes if pts_key[k][0] in dts_of},
        decode_order_times=bool(ctx.has_b_frames) and rising and _out_of_order(container, stream),
    )


def _out_of_order(container, stream) -> bool:
    """Whether the first 16 frames a decoder reorders come out of time order: their times are the decode order's."""
    container.seek(0)
    shown = [f.pts for _, f in zip(range(16), container.decode(stream)) if f.pts is not None]
    return any(b <= a for a, b in zip(shown, shown[1:]))


def _box_header(head: bytes, room: int) -> tuple[bytes, int, int] | None:
    """(type, header length, size) of the ISO-BMFF box whose first 16 bytes are `head`, `room` bytes before the end
    of what holds it; None where its size does not fit there (a damaged header)."""
    import struct

    size, kind = struct.unpack(">I4s", head[:8])
    skip = 8
    if size == 1:
        size, skip = struct.unpack(">Q", head[8:16])[0], 16
    elif size == 0:
        size = room
    return (kind, skip, size) if skip <= size <= room else None


def _mp4_boxes(data: bytes, start: int, end: int):
    """(type, content start, end) of each ISO-BMFF box in data[start:end]."""
    at = start
    while at + 8 <= end and (box := _box_header(data[at : at + 16], end - at)):
        kind, head, size = box
        yield kind, at + head, at + size
        at += size


def _mp4_rotations(path) -> dict[int, int]:
    """{track ID: degrees counterclockwise} from each MP4/MOV track header's display matrix, as FFmpeg reads it, rounded
    to a quarter turn; {} without a readable moov. `path` may be an open, seekable binary file."""
    import math
    import struct

    out = {}
    with contextlib.nullcontext(path) if hasattr(path, "read") else open(path, "rb") as f:
        total = f.seek(0, os.SEEK_END)
        at = 0
        while at + 8 <= total:
            f.seek(at)
            box = _box_header(f.read(16), total - at)
            if box is None:  # a box claiming more than the file: the header is damaged
                break
            kind, skip, size = box
            if kind == b"moov":
                f.seek(at + skip)
                moov = f.read(size - skip)
                for kind, a, b in _mp4_boxes(moov, 0, len(moov)):
                    for kind2, a2, b2 in _mp4_boxes(moov, a, b) if kind == b"trak" else ():
                        v1 = kind2 == b"tkhd" and moov[a2] == 1  # version 1: 64-bit times
                        m = a2 + (4 + 32 if v1 else 4 + 20) + 16  # times, id, duration; layer, volume
                        if kind2 != b"tkhd" or m + 8 > b2:  # another box, or a track header too short for its matrix
                            continue
                        track = struct.unpack(">I", moov[a2 + (20 if v1 else 12) : a2 + (24 if v1 else 16)])[0]
                        a_, b_ = struct.unpack(">2i", moov[m : m + 8])
                        out[track] = round(-math.degrees(math.atan2(b_, a_)) / 90) % 4 * 90
                break
            at += size
    return out


CACHE_SIZE = 1024  # probes kept per process (least recently used first out): a long-running worker stays bounded
_sizes: OrderedDict = OrderedDict()  # `size_change`'s answers by file identity, 100,000 kept: each file checked once
_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()


def video_info(source, backend: str | None = None, stream: int | None = None) -> VideoInfo:
    """`probe(source, stream)`, cached by the source's identity (`sources.Source.key`); bytes and file-like objects are
    probed each time. A `DecodeError` names `backend`, the library the probe was made for. Introduced in notebook 10."""
    src = None
    try:
        src = sources.resolve(source)
        if src.kind == "path" and not os.path.exists(src.path):
            raise DecodeError(src.path, "file does not exist", backend="probe")
        key = src.key
    except DecodeError as e:
        raise _for(e, backend, src) from e
    except OSError as e:  # the file went away between the checks
        raise DecodeError(getattr(src, "name", str(source)), f"cannot stat the file ({e})", backend or "probe") from e
    if key is not None:
        with _lock:
            if (key, stream) in _cache:
                _cache.move_to_end((key, stream))
                return _cache[(key, stream)]
    try:
        found = probe(src.path if src.kind == "path" else src, stream)
    except DecodeError as e:
        raise _for(e, backend, src) from e
    if key is not None:
        with _lock:
            _cache[(key, stream)] = found
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return found


def size_change(path) -> str | None:
    """'480x270, then 320x180 at 1.00 s' where the picture size of `path`'s video changes mid-stream (an adaptive
    stream's recording), else None; its keyframes decoded on the CPU, once per file (`sources.file_identity`: hard
    links share the answer). The NVDEC paths refuse such a file: they go on at the first size (notebook 23)."""
    try:
        key = sources.file_identity(path)
    except (OSError, TypeError):  # not a file on disk: not checked
        return None
    with _lock:
        if key in _sizes:
            return _sizes[key]
    found = _keyframe_sizes(str(path))
    with _lock:
        _sizes[key] = found
        while len(_sizes) > 100_000:
            _sizes.popitem(last=False)
    return found


def _keyframe_sizes(path: str) -> str | None:
    import av

    try:
        with av.open(path) as container:
            stream = container.streams.best("video") or container.streams.video[0]
            stream.codec_context.skip_frame = "NONKEY"  # a new size starts on a keyframe
            first = None
            for frame in container.decode(stream):
                first = first or (frame.width, frame.height)
                if (frame.width, frame.height) != first:
                    return f"{first[0]}x{first[1]}, then {frame.width}x{frame.height} at {frame.time:.2f} s"
    except Exception:  # the read's own error stands
        return None
    return None


def _for(e: DecodeError, backend: str | None, src) -> DecodeError:
    """`e` as the error of `backend` (the probe's own where no backend asked)."""
    if backend is None or e.backend == backend:
        return e
    return DecodeError(getattr(src, "name", None) or e.path, e.cause, backend)


def forget() -> None:
    """Empty the probe cache and `size_change`'s (tests; a process that knows its files changed)."""
    with _lock:
        _cache.clear()
        _sizes.clear()
