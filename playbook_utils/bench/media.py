"""Test media made locally with PyAV: stamped clips and the shared default set (notebook 01; every decoder test and
benchmark). Each frame carries its index as a 16-bit code plus its complement across the top of the picture;
`read_stamp` reads it back after encoding, colour conversion and resizing, or raises `StampError`."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import multiprocessing
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from pathlib import Path

import numpy as np

from playbook_utils.probe import VideoInfo, probe  # noqa: F401 (it lives there; the notebooks ask media)
from playbook_utils.stamps import _WHITE, MAX_STAMP, _stamp_cells, _stamp_luma, read_stamps
from playbook_utils.stamps import StampError, read_stamp

__all__ = [
    "bitrate_class",
    "clip_table",
    "ClipSpec",
    "colour_clips",
    "damage_mp4",
    "DAMAGES",
    "default_media",
    "default_media_dir",
    "default_media_specs",
    "detailed_frame",
    "encoder_for",
    "EncoderFailed",
    "ffmpeg_cli",
    "hide_leading_frames",
    "is_light",
    "long_media",
    "long_media_specs",
    "make_clip",
    "MEDIA_VERSION",
    "mux_video_streams",
    "pad_mp4",
    "pick_clip",
    "read_stamp",
    "read_stamps",
    "realistic_media",
    "rotate_display",
    "shown_stamps",
    "skipped_media",
    "StampError",
    "synth_frame",
    "typical_bit_rate",
    "unusual_clips",
]

MEDIA_VERSION = 4  # bump when make_clip's output changes, so cached media sets are rebuilt

# Encoders PyAV may carry for each codec, best first.
ENCODERS = {
    "h264": ["libx264", "h264"],
    "hevc": ["libx265", "hevc"],
    "vp9": ["libvpx-vp9", "vp9"],
    "av1": ["libsvtav1", "libaom-av1", "librav1e"],
    "mpeg4": ["mpeg4"],
}
_CONTAINER_BY_CODEC = {"vp9": ".webm"}

# A 3x5 bitmap font for the human-readable frame number (the machine-readable code is the stamp).
_FONT = {
    "0": "111101101101111",
    "1": "010110010010111",
    "2": "111001111100111",
    "3": "111001111001111",
    "4": "101101111001001",
    "5": "111100111001111",
    "6": "111100111101111",
    "7": "111001001001001",
    "8": "111101111101111",
    "9": "111101111001111",
}


def _draw_number(y: np.ndarray, number: int, top: int, left: int, scale: int) -> None:
    for k, digit in enumerate(str(number)):
        glyph = np.array([int(c) for c in _FONT[digit]], dtype=bool).reshape(5, 3)
        block = np.kron(glyph, np.ones((scale, scale), dtype=bool))
        x = left + k * 4 * scale
        region = y[top : top + block.shape[0], x : x + block.shape[1]]
        region[block[: region.shape[0], : region.shape[1]]] = _WHITE


def _square(y: np.ndarray, index: int, num_frames: int) -> None:
    """Draw on the luma plane `y` the bright square that crosses the picture once per clip."""
    height, width = y.shape
    side = max(4, height // 5)
    sx = int((width - side) * ((index % max(num_frames, 1)) / max(num_frames - 1, 1)))
    sy = height // 2 - side // 2
    y[sy : sy + side, sx : sx + side] = 200


def _label(y: np.ndarray, index: int) -> int:
    """Draw the frame number in digits and the stamp on the luma plane `y`; return the stamp's cell height."""
    height, width = y.shape
    ch, _ = _stamp_cells(height, width)
    scale = max(1, height // 30)
    _draw_number(y, index, top=min(height - 5 * scale, 2 * ch + scale), left=scale, scale=scale)
    _stamp_luma(y, index)
    return ch


def synth_frame(index: int, width: int, height: int, num_frames: int = 300):
    """The (Y, U, V) uint8 4:2:0 planes of frame `index` of a synthetic clip: moving bands and square, the frame
    number in digits and the stamp `read_stamp` reads back. Introduced in notebook 01."""
    x = np.arange(width, dtype=np.float32)
    phase = 2 * np.pi * (x / width + index / 90.0)
    row = (60 + 100 * (0.5 + 0.5 * np.sin(phase))).astype(np.uint8)
    yy = np.arange(height, dtype=np.float32)[:, None]
    y = np.clip(row[None, :] + (yy * 40 / height), 0, 255).astype(np.uint8)
    _square(y, index, num_frames)
    ch = _label(y, index)
    u = np.full((height // 2, width // 2), 128, dtype=np.uint8)
    v = u.copy()
    u[ch:, :] = 128 + int(40 * np.sin(index / 25.0))
    v[ch:, :] = 128 + int(40 * np.cos(index / 25.0))
    return y, u, v


@functools.lru_cache(maxsize=4)
def _texture(width: int, height: int) -> np.ndarray:
    """A read-only detail texture 64 pixels larger than the picture each way, one per size: noise at three scales,
    so that, like filmed detail, it costs bits at every scale."""
    rng = np.random.default_rng(width * 7907 + height)
    h, w = height + 64, width + 64
    t = np.zeros((h, w), dtype=np.float32)
    for scale, weight in ((1, 0.45), (4, 0.35), (16, 0.2)):
        coarse = rng.standard_normal((-(-h // scale), -(-w // scale))).astype(np.float32)
        t += weight * np.kron(coarse, np.ones((scale, scale), dtype=np.float32))[:h, :w]
    texture = np.clip(128 + 45 * t, 24, 232).astype(np.uint8)
    texture.setflags(write=False)
    return texture


def detailed_frame(index: int, width: int, height: int, num_frames: int = 300):
    """The (Y, U, V) planes of frame `index` of a stamped clip as heavy to encode and decode as filmed video.
    `make_clip(..., picture=detailed_frame, bit_rate=...)` makes the default set's realistic clips. Notebook 01."""
    tex = _texture(width, height)
    half = height // 2
    y = np.empty((height, width), dtype=np.int16)

    def sway(step: int) -> int:  # 0..63 and back: motion that never jumps (a jump reads as a scene cut)
        t = (step * index) % 126
        return t if t < 64 else 126 - t

    dx = sway(3)
    y[:half] = tex[:half, dx : dx + width]
    dx, dy = 63 - sway(2), sway(1)
    y[half:] = tex[dy + half : dy + height, dx : dx + width]
    y += (18 * np.sin(2 * np.pi * (np.arange(width) / width + index / 60.0))).astype(np.int16)[None, :]
    _square(y, index, num_frames)
    y = np.clip(y, 16, 235).astype(np.uint8)
    _label(y, index)
    h2, w2 = height // 2, width // 2
    c = tex[(index % 64) // 2 : (index % 64) // 2 + height : 2, 32 : 32 + width : 2].astype(np.int16) - 128
    u = np.clip(128 + c // 3 + int(20 * np.sin(index / 25.0)), 16, 240).astype(np.uint8)[:h2, :w2]
    v = np.clip(128 - c // 4 + int(20 * np.cos(index / 25.0)), 16, 240).astype(np.uint8)[:h2, :w2]
    return y, u, v


# --------------------------------------------------------------------------- encoding


def encoder_for(codec: str) -> str | None:
    """Return the name of a PyAV encoder for `codec` ('h264', 'hevc', 'vp9', 'av1', 'mpeg4'), or None."""
    import av

    for name in ENCODERS.get(codec, [codec]):
        try:
            av.codec.Codec(name, "w")
            return name
        except Exception:
            continue
    return None


def _encoder_options(
    encoder: str, gop: int, bframes: int, closed_gop: bool, preset: str, defaults: bool = False, bit_rate=None
) -> dict:
    key = {"libx264": "x264-params", "libx265": "x265-params"}.get(encoder)
    if key is None:
        if encoder == "libvpx-vp9":
            return {"deadline": "realtime", "cpu-used": "8", "keyint_min": str(gop), "row-mt": "1"}
        if encoder == "libsvtav1":
            return {"preset": "8", "svtav1-params": f"keyint={gop}"}
        return {"cpu-used": "8", "usage": "realtime"} if encoder == "libaom-av1" else {}
    params = f"keyint={gop}"  # `defaults`: the encoder's own choices (x265's: open GOP)
    if not defaults:
        # b-adapt=0: use the B-frames asked for; the adaptive decision drops them on synthetic content.
        params += f":min-keyint={gop}:scenecut=0:bframes={bframes}:b-adapt=0"
        if encoder == "libx265" or not closed_gop:
            params += f":open-gop={0 if closed_gop else 1}"
    if encoder == "libx265":
        params += ":log-level=error"
    if bit_rate:
        # An average rate alone overshoots on short detailed clips (x264 has no time to correct its first GOPs): a
        # buffer of one second, filled at the rate asked, holds every second to it, as streaming encodes are made.
        kbit = max(1, round(bit_rate / 1000))
        params += f":vbv-maxrate={kbit}:vbv-bufsize={kbit}"
    return {"preset": preset, key: params}


def make_clip(
    path,
    codec: str = "h264",
    width: int = 320,
    height: int = 180,
    fps: int = 30,
    num_frames: int = 90,
    gop: int = 30,
    bframes: int = 2,
    pix_fmt: str = "yuv420p",
    closed_gop: bool | None = True,
    preset: str = "fast",
    frame_times: list[float] | None = None,
    picture=None,
    bit_rate: int | None = None,
) -> Path:
    """Encode a stamped synthetic clip at `path` (container by suffix) and return the path. `gop`: keyframe interval;
    `frame_times`: variable frame rate; `picture(i, w, h, n) -> (Y, U, V)`: the frames (default `synth_frame`);
    `bit_rate`: bit/s; `closed_gop=None`: the encoder's own GOP. RuntimeError without an encoder. Notebook 01."""
    import av

    if width % 2 or height % 2:
        raise ValueError(f"width and height must be even for 4:2:0 video, got {width}x{height}")
    if picture is None and num_frames > MAX_STAMP + 1:
        raise ValueError(f"at most {MAX_STAMP + 1} frames can carry a stamp, asked for {num_frames}")
    encoder = encoder_for(codec)
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its whole config to stderr otherwise
    if encoder is None:
        raise RuntimeError(f"this PyAV ({av.__version__}) has no encoder for {codec}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")  # two runs making one clip at once (--lanes)
    if frame_times is not None and len(frame_times) != num_frames:
        raise ValueError("frame_times needs one time per frame")
    settings = dict(encoder=encoder, width=width, height=height, fps=fps, num_frames=num_frames, gop=gop)
    settings.update(bframes=bframes, pix_fmt=pix_fmt, closed_gop=closed_gop, preset=preset, bit_rate=bit_rate)
    settings.update(frame_times=frame_times, picture=picture)
    for _ in range(3):
        try:
            if encoder in WATCHED_ENCODERS:
                _encode_watched(tmp, settings)
            else:
                _encode(tmp, **settings)
            break
        except (av.error.FFmpegError, EncoderFailed) as e:
            # SVT-AV1 under load can hand the MP4 muxer a packet it rejects (EINVAL); it is not deterministic,
            # so the clip is encoded again before giving up.
            failure = f"{path}: {encoder} could not write this clip ({e}; packets {getattr(e, 'packets', '?')})"
            tmp.unlink(missing_ok=True)
    else:
        raise RuntimeError(f"{failure}, three times")
    os.replace(tmp, path)
    return path


# Encoders run in a child process under a watchdog: SVT-AV1 can hang for good in its flush (`svt_av1_enc_get_packet`;
# linuxserver/docker-ffmpeg#116), and a hang inside C cannot be interrupted from Python.
WATCHED_ENCODERS = frozenset({"libsvtav1"})
STALL_S = 60.0  # no frame sent and no packet received for this long: the encoder hung (a 1080p frame takes < 2 s)


class EncoderFailed(RuntimeError):
    """An encode in a watched child process failed (its error) or made no progress for `STALL_S` (killed)."""


def _encode_main() -> None:
    """The watched child: settings as JSON on stdin, a '.' on stdout per step (a frame sent, a packet received),
    then one JSON line: {"error": None} or {"error": "<type>: <message>"}."""
    settings = json.loads(sys.stdin.read())
    tmp = settings.pop("tmp")
    settings["picture"] = pickle.loads(bytes.fromhex(settings["picture"]))  # a function, by its module and name

    def step():
        sys.stdout.write(".")
        sys.stdout.flush()

    try:
        _encode(tmp, **settings, progress=step)
        error = None
    except BaseException as e:  # reported to the parent, which retries or names the clip
        error = f"{type(e).__name__}: {e}; packets {getattr(e, 'packets', '?')}"
    sys.stdout.write("\n" + json.dumps({"error": error}) + "\n")
    sys.stdout.flush()


def _encode_watched(tmp, settings: dict, stall_s: float | None = None) -> None:
    """`_encode` in a fresh Python process, killed after `stall_s` seconds (default `STALL_S`) without progress:
    raises `EncoderFailed` then, or with the child's error. A `picture` that cannot be pickled is encoded here,
    unwatched."""
    stall_s = STALL_S if stall_s is None else stall_s
    try:
        picture = pickle.dumps(settings.get("picture"))
    except (pickle.PicklingError, AttributeError, TypeError):
        _encode(tmp, **settings)
        return
    request = json.dumps({**settings, "tmp": str(tmp), "picture": picture.hex()})
    code = "from playbook_utils.bench.media import _encode_main; _encode_main()"
    # the child imports what this process can: the picture's module may sit on a path added at run time (pytest's)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    out, steps = b"", 0
    try:
        child.stdin.write(request.encode())
        child.stdin.close()
        since = time.monotonic()
        while True:
            ready, _, _ = select.select([child.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
                steps += chunk.count(b".")
                since = time.monotonic()
            elif time.monotonic() - since > stall_s:
                raise EncoderFailed(f"the encoder made no progress for {stall_s:.0f} s after {steps} steps: hung")
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        stderr = child.stderr.read().decode(errors="replace").strip().splitlines()
        child.stdout.close()
        child.stderr.close()
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith("{")]
    if not lines:
        last = stderr[-1] if stderr else "no output"
        raise EncoderFailed(f"the encoder's process died (exit {child.returncode}) without an answer: {last}")
    error = json.loads(lines[-1])["error"]
    if error is not None:
        raise EncoderFailed(error)


def _encode(
    tmp,
    encoder,
    width,
    height,
    fps,
    num_frames,
    gop,
    bframes,
    pix_fmt,
    closed_gop,
    preset,
    bit_rate,
    frame_times,
    picture,
    progress=None,
):
    import av

    time_base = Fraction(1, fps) if frame_times is None else Fraction(1, 90000)
    step = progress or (lambda: None)  # called per frame sent and per packet received
    last = []

    def mux(out, packet):
        last[:] = [*last[-1:], (packet.pts, packet.dts)]
        step()
        try:
            out.mux(packet)
        except av.error.FFmpegError as e:
            e.packets = f"(pts, dts) of the last two: {last}"
            raise

    with av.open(str(tmp), "w") as out:
        stream = out.add_stream(
            encoder,
            rate=fps,
            options=_encoder_options(encoder, gop, bframes, bool(closed_gop), preset, closed_gop is None, bit_rate),
        )
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.time_base = stream.codec_context.time_base = time_base
        stream.codec_context.gop_size = gop
        if bit_rate:
            stream.codec_context.bit_rate = bit_rate
        # PyAV's default (slice threads) would cut every frame into one slice per core, so the
        # files would depend on the machine that made them; real video has one slice per frame.
        stream.codec_context.thread_type = "FRAME"
        if encoder not in ("libx264", "libx265"):
            stream.codec_context.max_b_frames = bframes if encoder == "mpeg4" else 0
        for i in range(num_frames):
            y, u, v = (picture or synth_frame)(i, width, height, num_frames)
            planes = np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(height * 3 // 2, width)
            frame = av.VideoFrame.from_ndarray(planes, format="yuv420p")
            frame.pts = i if frame_times is None else int(round(frame_times[i] * 90000))
            frame.time_base = time_base
            step()
            for packet in stream.encode(frame):
                mux(out, packet)
        for packet in stream.encode():
            mux(out, packet)


def pad_mp4(path, size: int) -> Path:
    """Grow the MP4 (or MOV) at `path` to exactly `size` bytes with a trailing `free` box that readers skip (a file
    as large as another, for cache keys; notebook 23). Returns the path; ValueError when it cannot fit."""
    path = Path(path)
    extra = size - path.stat().st_size
    if extra == 0:
        return path
    if extra < 8 or extra >= 2**32:
        raise ValueError(f"{path}: a free box needs 8 bytes to 4 GiB; the file would grow by {extra}")
    with open(path, "ab") as f:
        f.write(extra.to_bytes(4, "big") + b"free" + bytes(extra - 8))
    return path


def ffmpeg_cli() -> str | None:
    """The path of the `ffmpeg` command-line tool, or None: it makes the test media PyAV cannot write
    (several video streams, an edit list, a display matrix) and decodes as a player would."""
    return shutil.which("ffmpeg")


def _run_ffmpeg(*args) -> None:
    cli = ffmpeg_cli()
    if cli is None:
        raise RuntimeError("the ffmpeg command-line tool is not installed")
    command = [cli, "-hide_banner", "-loglevel", "error", "-y", *map(str, args)]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"ffmpeg {' '.join(map(str, args))} failed: {run.stderr.strip()[-300:]}")


# Colour cases: (name, width, height, matrix and range the picture is encoded with, its tags, codec, pix_fmt).
# Sizes that are not multiples of 16 (1080, 180) are stored with a coded size of the next multiple, cropped on
# display; the `*_1088`/`*_192` case shares that coded size uncropped, for decoders reused across files.
COLOUR_CASES = (
    ("sd_bt601_limited", (720, 480), (320, 240), "bt601", "tv", ("smpte170m", "tv"), "libx264", "yuv420p"),
    ("hd_bt709_limited", (1920, 1080), (320, 180), "bt709", "tv", ("bt709", "tv"), "libx264", "yuv420p"),
    ("hd_bt709_full", (1920, 1080), (320, 180), "bt709", "pc", ("bt709", "pc"), "libx264", "yuv420p"),
    ("hd_untagged", (1920, 1080), (320, 180), "bt601", "tv", None, "libx264", "yuv420p"),
    ("hd_bt709_limited_uncropped", (1920, 1088), (320, 192), "bt709", "tv", ("bt709", "tv"), "libx264", "yuv420p"),
    ("uhd_bt2020_10bit", (3840, 2160), (320, 180), "bt2020", "tv", ("bt2020nc", "tv"), "libx265", "yuv420p10le"),
    # HEVC codes in 8-pixel units here: 1916x1076 is a cropped 1920x1080, the size of the next clip
    ("hd_hevc_cropped", (1916, 1076), (316, 180), "bt709", "tv", ("bt709", "tv"), "libx265", "yuv420p"),
    ("hd_hevc_uncropped", (1920, 1080), (320, 184), "bt709", "tv", ("bt709", "tv"), "libx265", "yuv420p"),
)


def colour_clips(directory=None, smoke: bool = True, frames: int = 8) -> dict[str, Path]:
    """{name: path} of short colour-gradient clips, one per `COLOUR_CASES` entry (matrix and range, tagged or not),
    made once with the ffmpeg tool in `directory` (default: the media set's `colour/`); {} where they are neither
    there nor makeable. Notebook 20."""
    directory = Path(directory) if directory is not None else default_media_dir(smoke) / "colour"
    out = {}
    for name, full_size, smoke_size, matrix, rng, tags, codec, pix_fmt in COLOUR_CASES:
        w, h = smoke_size if smoke else full_size
        path = directory / f"{name}_{w}x{h}.mp4"
        if not path.exists() and ffmpeg_cli() is None:
            return {}
        if not path.exists():
            directory.mkdir(parents=True, exist_ok=True)
            colours = "c0=0xe01010:c1=0x10c010:c2=0x1010e0:c3=0xe0e010"
            source = f"gradients=size={w}x{h}:rate=30:speed=0.05:n=4:{colours}:seed=1"
            tag_args = []
            if tags:
                space, tag_range = tags
                prim = {"smpte170m": "smpte170m", "bt709": "bt709", "bt2020nc": "bt2020"}[space]
                tag_args = ["-colorspace", space, "-color_range", tag_range, "-color_primaries", prim]
            extra = ["-x265-params", "log-level=error:no-open-gop=1"] if codec == "libx265" else []  # closed GOP
            tmp = path.with_suffix(".part.mp4")
            _run_ffmpeg("-f", "lavfi", "-i", source, "-frames:v", frames, "-vf",
                        f"scale=out_color_matrix={matrix}:out_range={rng}", "-c:v", codec, "-pix_fmt", pix_fmt,
                        *tag_args, *extra, "-g", 4, tmp)  # fmt: skip
            os.replace(tmp, path)
        out[name] = path
    return out


def shown_stamps(path, max_frames: int | None = None) -> list[int | None]:
    """The stamps of the frames the ffmpeg tool shows for `path` (default stream, edit list honoured): what a player
    shows. None for a frame without a valid stamp."""
    info = probe(path)
    limit = ["-frames:v", str(max_frames)] if max_frames else []
    decode = [ffmpeg_cli() or "ffmpeg", "-hide_banner", "-loglevel", "error", "-noautorotate", "-i", str(path), *limit]
    run = subprocess.run([*decode, "-f", "rawvideo", "-pix_fmt", "gray", "-"], capture_output=True)
    if run.returncode != 0:
        raise RuntimeError(f"ffmpeg could not decode {path}: {run.stderr.decode(errors='replace')[-300:]}")
    return read_stamps(np.frombuffer(run.stdout, np.uint8).reshape(-1, info.height, info.width))


def _boxes(data: bytes, start: int, end: int):
    """(type, start, size) of each ISO-BMFF box in data[start:end] (no 64-bit sizes: our own encoder's files)."""
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        yield kind, at, size
        at += size


def _box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(body), kind) + body


DAMAGES = ("unknown sample entry", "short track header", "huge moov")


def damage_mp4(src, path, how: str) -> Path:
    """A copy of the moov-at-end MP4 `src` (`make_clip`'s) with its header damaged as scraped files are, still opened
    by FFmpeg; `how` in `DAMAGES`: codec tag overwritten, last track header cut short, or a moov size of 2^62.
    Notebook 23."""
    if how not in DAMAGES:
        raise ValueError(f"how must be one of {DAMAGES}, got {how!r}")
    data = Path(src).read_bytes()
    m, msize = next((at, size) for kind, at, size in _boxes(data, 0, len(data)) if kind == b"moov")
    if m + msize != len(data):
        raise ValueError(f"{src}: the moov box must come last (make_clip's layout)")
    if how == "huge moov":
        out = data[:m] + struct.pack(">I4sQ", 1, b"moov", 2**62) + data[m + 8 :]
    elif how == "unknown sample entry":
        stsd = data.index(b"stsd", m)
        entry = stsd + 4 + 8 + 4  # version and flags, entry count; the entry's size, then its tag
        out = data[:entry] + b"zzzz" + data[entry + 4 :]
    else:
        kids = list(_boxes(data, m + 8, m + msize))
        trak = [(a, s) for k, a, s in kids if k == b"trak"][-1]
        tkids = list(_boxes(data, trak[0] + 8, sum(trak)))
        tkhd = next(data[a : a + s] for k, a, s in tkids if k == b"tkhd")
        kept = b"".join(data[a : a + s] for k, a, s in tkids if k != b"tkhd")
        trak2 = _box(b"trak", kept + _box(b"tkhd", tkhd[8:12]))
        others = b"".join(data[a : a + s] for k, a, s in kids if (a, s) != trak)
        out = data[:m] + _box(b"moov", others + trak2)
    Path(path).write_bytes(out)
    return Path(path)


def unusual_clips(directory) -> dict[str, Path]:
    """{'rot': a clip turned 90 degrees by its display matrix, 'two': two video streams, the second FFmpeg's best} in
    `directory`, made once with the ffmpeg tool (files already there are used); {} where neither there nor makeable."""
    directory = Path(directory)
    out = {n: directory / f"{n}.mp4" for n in ("rot", "two")}
    if all(p.exists() for p in out.values()):
        return out
    if ffmpeg_cli() is None:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    base = make_clip(directory / "base.mp4", "h264", 320, 180, num_frames=24, gop=12, bframes=0)
    first = make_clip(directory / "first.mp4", "h264", 256, 144, num_frames=18, gop=6, bframes=0)
    mux_video_streams(out["two"], [first, base], best=1)
    rotate_display(base, out["rot"], 90)
    return out


def mux_video_streams(path, sources, best: int = 1) -> Path:
    """An MP4 holding the video stream of each of `sources`, in order, stream `best` flagged as the default
    one, which makes it FFmpeg's best video stream (notebook 23, the correctness matrix)."""
    args = [x for src in sources for x in ("-i", src)]
    args += [x for k in range(len(sources)) for x in ("-map", f"{k}:v")]
    args += ["-c", "copy"]
    args += [x for k in range(len(sources)) for x in (f"-disposition:v:{k}", "default" if k == best else "0")]
    _run_ffmpeg(*args, path)
    return Path(path)


def hide_leading_frames(src, path, frames: int, fps: int = 30) -> Path:
    """A copy of the MP4 `src` whose edit list hides its first `frames` frames (what `-ss` with `-c copy` writes).
    RuntimeError unless the ffmpeg tool shows frame `frames` first."""
    _run_ffmpeg("-ss", f"{frames / fps:.6f}", "-i", src, "-c", "copy", path)
    first = shown_stamps(path, max_frames=1)
    if first != [frames]:
        raise RuntimeError(f"{path}: expected ffmpeg to show frame {frames} first, it shows {first}")
    return Path(path)


def rotate_display(src, path, degrees: int) -> Path:
    """A copy of the MP4 `src` whose display matrix turns the picture `degrees` (90, 180, 270) counterclockwise,
    as `probe(...).rotation` reports it; the frames are stored as before."""
    _run_ffmpeg("-i", src, "-c", "copy", "-metadata:s:v", f"rotate={degrees}", path)
    got = probe(path).rotation
    if got != degrees:
        raise RuntimeError(f"{path}: asked for a {degrees} degree display rotation, the file says {got}")
    return Path(path)


# --------------------------------------------------------------------------- the shared set


@dataclasses.dataclass(frozen=True)
class ClipSpec:
    """One clip of the default media set."""

    codec: str
    width: int
    height: int
    num_frames: int
    gop: int
    bframes: int = 2
    fps: int = 30
    bitrate: int | None = None  # bit/s: `detailed_frame` encoded to this rate; None: the light `synth_frame`
    open_gop: bool = False  # the encoder's own GOP choices (x265's: open GOP), only the keyframe interval set

    @property
    def name(self) -> str:
        suffix = _CONTAINER_BY_CODEC.get(self.codec, ".mp4")
        length = "" if self.num_frames <= 300 else f"_{self.num_frames // self.fps}s"
        heavy = ("_open" if self.open_gop else "") + (f"_{self.bitrate / 1e6:g}mbps" if self.bitrate else "")
        return f"{self.codec}_{self.height}p_gop{self.gop}{heavy}{length}{suffix}"

    def record(self) -> dict:
        """What the manifest keeps of this clip: its fields (those at their default left out, so that older manifests
        stay valid) and `MEDIA_VERSION`."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if v or k not in ("bitrate", "open_gop")}
        return {**fields, "version": MEDIA_VERSION}

    def make(self, path) -> Path:
        """Encode this clip at `path` (`make_clip`)."""
        settings = (self.codec, self.width, self.height, self.fps, self.num_frames, self.gop, self.bframes)
        closed_gop = None if self.open_gop else True
        picture = detailed_frame if self.bitrate else None
        return make_clip(path, *settings, closed_gop=closed_gop, picture=picture, bit_rate=self.bitrate)


# Typical bitrates of real 1080p30 footage (web video, phone video, Kinetics-style datasets), Mbit/s: what the
# realistic clips of the default set are encoded to, and what `bitrate_class` compares a file with.
TYPICAL_1080P30_MBPS = {"h264": (4.0, 10.0), "hevc": (2.0, 5.0), "vp9": (1.5, 4.0), "av1": (1.0, 3.0)}


def typical_bit_rate(codec: str, width: int, height: int, fps: float = 30) -> tuple[float, float] | None:
    """The typical range of bit/s for real `codec` footage at this size and rate: `TYPICAL_1080P30_MBPS`
    scaled by pixels per second (bits per pixel held constant). None for a codec without a typical range."""
    if codec not in TYPICAL_1080P30_MBPS:
        return None
    scale = width * height * (fps or 30) / (1920 * 1080 * 30)
    lo, hi = TYPICAL_1080P30_MBPS[codec]
    return lo * 1e6 * scale, hi * 1e6 * scale


def bitrate_class(info) -> str:
    """'below', 'within' or 'above' `typical_bit_rate` for the bitrate of `info` (a `VideoInfo`), or 'unknown' (no
    bitrate, or no typical range for its codec). Printed in notebook 01."""
    typical = typical_bit_rate(info.codec, info.width, info.height, info.fps)
    if typical is None or not info.bit_rate:
        return "unknown"
    return "below" if info.bit_rate < typical[0] else "above" if info.bit_rate > typical[1] else "within"


def default_media_specs(smoke: bool) -> list[ClipSpec]:
    """The clips `default_media` builds: small in smoke mode, 720p/1080p/4K in full mode."""
    if smoke:
        # 256x144: the smallest 16:9 size every NVDEC codec takes (HEVC needs 144 lines, VP9/AV1 128).
        specs = [ClipSpec(c, 256, 144, 96, g) for c in ("h264", "hevc") for g in (12, 48)]
        specs += [ClipSpec(c, 256, 144, 96, 12) for c in ("vp9", "av1")]
        # realistic: 8 Mbit/s H.264 and 3.5 Mbit/s open-GOP HEVC at 1080p30, scaled to this size (same bits per pixel)
        specs += [ClipSpec("h264", 256, 144, 96, 12, bitrate=140_000)]
        specs += [ClipSpec("hevc", 256, 144, 96, 12, bitrate=62_000, open_gop=True)]
        return specs
    sizes = ((1280, 720), (1920, 1080), (3840, 2160))
    specs = [ClipSpec(c, w, h, 300, g) for (w, h) in sizes for c in ("h264", "hevc") for g in (30, 250)]
    specs += [ClipSpec(c, 1920, 1080, 300, 30) for c in ("vp9", "av1")]
    # realistic: as heavy as filmed 1080p30 (`TYPICAL_1080P30_MBPS`), HEVC also with x265's default open GOP, and 4K
    specs += [ClipSpec("h264", 1920, 1080, 300, g, bitrate=8_000_000) for g in (30, 250)]
    specs += [ClipSpec("hevc", 1920, 1080, 300, 30, bitrate=3_500_000)]
    specs += [ClipSpec("hevc", 1920, 1080, 300, 250, bitrate=3_500_000, open_gop=True)]
    specs += [ClipSpec("h264", 3840, 2160, 300, 30, bitrate=32_000_000)]
    return specs


@functools.lru_cache(maxsize=1)
def _light_names() -> frozenset:
    specs = default_media_specs(True) + default_media_specs(False) + long_media_specs(True) + long_media_specs(False)
    return frozenset(s.name for s in specs if s.bitrate is None)


def is_light(name: str) -> bool:
    """Whether `name` is one of the default set's light clips: `synth_frame`'s smooth picture at the encoder's
    default quality, far easier to decode than filmed video at its size (`ClipSpec.bitrate` None)."""
    return Path(name).name in _light_names()


def long_media_specs(smoke: bool) -> list[ClipSpec]:
    """Long clips for sparse-sampling measurements: 60 s of 1080p H.264 at GOP 30 and 250 (smoke: 12 s, small)."""
    if smoke:
        return [ClipSpec("h264", 256, 144, 360, g) for g in (12, 48)]
    return [ClipSpec("h264", 1920, 1080, 1800, g) for g in (30, 250)]


def default_media_dir(smoke: bool) -> Path:
    """Where the default media lives: $PLAYBOOK_MEDIA_DIR, else ~/.cache/video-loading-playbook."""
    root = os.environ.get("PLAYBOOK_MEDIA_DIR") or Path.home() / ".cache" / "video-loading-playbook" / "media"
    return Path(root) / ("smoke" if smoke else "full")


def long_media(directory=None, smoke: bool = True, log=None) -> dict[str, Path]:
    """Build (once) and return the long clips of `long_media_specs` as {name: path} (notebook 20)."""
    return default_media(directory, smoke, log, specs=long_media_specs(smoke))


def realistic_media(directory=None, smoke: bool = True, log=None, max_height: int = 1080) -> dict[str, Path]:
    """Build (once) and return only the default set's realistic clips (as heavy as filmed video, `ClipSpec.bitrate`
    set) up to `max_height` rows, as {name: path}: what notebook 21 measures, without waiting for the rest."""
    specs = [s for s in default_media_specs(smoke) if s.bitrate is not None and s.height <= max_height]
    return default_media(directory, smoke, log, specs=specs)


def default_media(directory=None, smoke: bool = True, log=None, specs=None) -> dict[str, Path]:
    """Build (once) and return the shared media set as {clip name: path}; clips present with the same spec are
    reused. Codecs this PyAV cannot encode are listed under the manifest's '_skipped'. `log`: called per clip built;
    `specs`: replaces the default set. Notebook 01."""
    specs = default_media_specs(smoke) if specs is None else specs
    directory = Path(directory) if directory is not None else default_media_dir(smoke)
    directory.mkdir(parents=True, exist_ok=True)
    # One builder at a time per folder: two processes (pytest's workers, parallel notebooks) would otherwise build
    # the same clips at once and each rewrite the manifest without the other's entries. The lock goes with the
    # process, so a killed builder cannot leave it held.
    with open(directory / ".build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_media(directory, specs, log)


def _build_media(directory: Path, specs, log) -> dict[str, Path]:
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    clips, skipped, todo = {}, {}, []
    for spec in specs:
        path = directory / spec.name
        if path.exists() and manifest.get(spec.name) == spec.record():
            clips[spec.name] = path
        elif encoder_for(spec.codec) is None:
            skipped[spec.name] = f"no {spec.codec} encoder in this PyAV"
        else:
            todo.append(spec)
    # Encoders use several threads each; a few clips at a time keep a large machine busy.
    workers = max(1, min(len(todo), len(os.sched_getaffinity(0)) // 4))
    # spawned, never forked: a process with threads (a notebook's kernel, a test worker, PyTorch) can fork a child
    # that deadlocks on a lock one of them held
    spawn = multiprocessing.get_context("spawn")
    # one worker is not worth a process pool: the clips are then made here, in turn
    with ProcessPoolExecutor(workers, mp_context=spawn) if workers > 1 else contextlib.nullcontext() as pool:
        made = (pool.map if pool else map)(ClipSpec.make, todo, [directory / spec.name for spec in todo])
        for spec, path in zip(todo, made):
            clips[spec.name] = path
            manifest[spec.name] = spec.record()
            if log:
                log(f"built {clips[spec.name]}")
    clips = {s.name: clips[s.name] for s in specs if s.name in clips}
    names = {s.name for s in specs}
    earlier = {k: v for k, v in manifest.get("_skipped", {}).items() if k not in names}
    manifest["_skipped"] = {**earlier, **skipped}
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".json") as f:
        json.dump(manifest, f, indent=1)
    os.replace(f.name, manifest_path)
    return clips


PICK_MIN_FRAMES = 32  # the most frames a workload asks of one video (uniform32)


def pick_clip(
    infos: dict, codec: str, long_gop: bool = False, height: int = 1080, realistic: bool | None = None
) -> str | None:
    """The name of the `codec` clip closest to `height` rows with the shortest (`long_gop`: longest) mean GOP, or
    None. `realistic`: False only the light clips (`is_light`), True only the others, None any. Notebooks 01, 10-14,
    20, 21."""
    named = [n for n, i in infos.items() if i.codec == codec]
    if realistic is not None:
        named = [n for n in named if is_light(n) != realistic]
    # a clip of a few frames (one frame: a GOP of 1) would time opening the file, not decoding: only where none is longer
    named = [n for n in named if infos[n].num_frames >= PICK_MIN_FRAMES] or named
    if not named:
        return None
    best = min({infos[n].height for n in named}, key=lambda h: abs(h - height))
    mean_gop = {n: sum(infos[n].gop_lengths) / len(infos[n].gop_lengths) for n in named if infos[n].height == best}
    return (max if long_gop else min)(mean_gop, key=mean_gop.get)


def clip_table(infos: dict) -> str:
    """One line per clip of {name: VideoInfo}: codec, size, frames, GOP (open or not), Mbit/s and whether it is a
    light clip. Notebooks 20, 21."""
    return "\n".join(
        f"{n:34s} {i.codec:5s} {i.width}x{i.height} {i.num_frames} frames, GOP {i.gop_lengths[0]}"
        f"{' open' if i.open_gop else ''}, {(i.bit_rate or 0) / 1e6:.2f} Mbit/s ({'light' if is_light(n) else 'realistic'})"
        for n, i in infos.items()
    )


def skipped_media(directory=None, smoke: bool = True) -> dict[str, str]:
    """Clips of the default set that could not be built here, with the reason."""
    directory = Path(directory) if directory is not None else default_media_dir(smoke)
    try:
        return json.loads((directory / "manifest.json").read_text()).get("_skipped", {})
    except (OSError, ValueError):
        return {}
