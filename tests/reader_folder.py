"""A folder like a reader's own, made with the ffmpeg command-line tool, and what the ffmpeg tool decodes of it.

Nested folders; H.264 with B-frames (in MP4 and MPEG-TS) and with open GOPs, 10-bit 4:2:2 H.264, HEVC with x265's
default open GOP (MP4 and MKV), 10-bit HEVC, phone clips turned 90° and 270° by their display matrix, footage of
another shape, pixels wider than tall (anamorphic), a file tagged BT.709, AV1 in MP4, VP9 in WebM (one recorded live,
as a browser does: no duration), an MP4 whose edit list hides its first frames, an open-GOP MKV trimmed by stream
copy (its first frames untimed), a faststart copy cut off halfway (its index lists frames it no longer holds), a copy
cut off before its index, a copy with bytes zeroed in its middle, an MPEG-TS file that starts between keyframes, a
copy with its thumbnail embedded (a cover picture), two adaptive streams' recordings whose picture size changes
mid-stream, up and down (two renditions' segments joined), WMV in ASF, an AVI with B-frames (no presentation times: no
frame's place is known), remuxed to MP4 by `-c copy` (its B-frames timed in decode order) and as the modules say; and
files a glob over the folder finds that hold no video to read: notes, a voice memo, a podcast with its artwork, a
poster, an empty file, an MP4 whose codec FFmpeg has no decoder for. `reference` is every frame as the ffmpeg tool
shows it (upright, at its display aspect, edit list applied, coloured by the tags), resized and cut as the
handed-over modules do, saved beside the folder so that a machine without the tool (the GPU machine) checks against
the same pictures:

    python -m tests.reader_folder DIR    # builds DIR and its references (tests/unit/test_handover.py reads them)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from playbook_utils.bench.media import damage_mp4

SIZE = 112  # the tests' output size: the shorter side resized to it, the centre square cut out
FRAMES = 60


def _src(size: str) -> str:
    return f"testsrc2=size={size}:rate=30,format=yuv420p"


# name -> (ffmpeg arguments after -i SOURCE, the lavfi source)
ENCODED = {
    "h264_bframes.mp4": (["-c:v", "libx264", "-bf", "2", "-g", "15"], _src("320x180")),
    # H.264 with open GOPs, as Blu-ray and broadcast encoders write it
    "sub/h264_open.mp4": (["-c:v", "libx264", "-bf", "3", "-x264-params", "open-gop=1:keyint=20"], _src("320x180")),
    "sub/hevc_open.mp4": (["-c:v", "libx265", "-x265-params", "keyint=20:log-level=error", "-tag:v", "hvc1"], _src("320x180")),
    "sub/deeper/open_gop.mkv": (["-c:v", "libx265", "-x265-params", "keyint=20:log-level=error"], _src("342x192")),
    "hevc_10bit.mp4": (["-c:v", "libx265", "-pix_fmt", "yuv420p10le", "-x265-params", "keyint=20:log-level=error",
                        "-tag:v", "hvc1"], _src("320x180")),
    # 10-bit 4:2:2 H.264, as mirrorless cameras record it (NVDEC before Blackwell decodes neither)
    "sub/camera_10bit_422.mp4": (["-c:v", "libx264", "-pix_fmt", "yuv422p10le", "-g", "15"], _src("320x180")),
    "film_640x272.mp4": (["-c:v", "libx264", "-g", "30"], _src("640x272")),
    "tagged_bt709.mp4": (["-c:v", "libx264", "-g", "15", "-vf", "scale=out_color_matrix=bt709", "-colorspace", "bt709",
                          "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"], _src("320x180")),
    "sub/clip.webm": (["-c:v", "libvpx-vp9", "-b:v", "300k", "-g", "30"], _src("320x180")),
    "sub/av1.mp4": (["-c:v", "libsvtav1", "-g", "30"], _src("320x180")),  # AV1, as video sites serve it
    # WebM as a browser records it (MediaRecorder): written live, so it stores no duration and no index
    "sub/browser_recording.webm": (["-c:v", "libvpx-vp9", "-b:v", "300k", "-g", "30", "-live", "1", "-f", "webm"], _src("320x180")),
    "faststart.mp4": (["-c:v", "libx264", "-g", "15", "-movflags", "+faststart"], _src("320x180")),
    "sub/camera.ts": (["-c:v", "libx264", "-bf", "2", "-g", "15"], _src("320x180")),  # MPEG-TS, as cameras and HLS
    # pixels wider than tall, as HDV and DVD store them: 240x180 shown as 320x180
    "anamorphic.mp4": (["-c:v", "libx264", "-g", "15", "-vf", "setsar=4/3"], _src("240x180")),
    # Xvid with B-frames in AVI, which stores no presentation times: no frame's place is known
    "sub/old_camera.avi": (["-c:v", "mpeg4", "-bf", "2", "-g", "15", "-vtag", "xvid"], _src("320x180")),
    # Windows Media Video 8 in ASF, as older collections hold: decord's seeks land a GOP early; NVDEC has no WMV 8
    "sub/old.wmv": (["-c:v", "wmv2", "-b:v", "1M", "-g", "15"], _src("320x180")),
    # MPEG-2 in MPEG-PS, as DVDs and older camcorders: seeks miss, frames may store no time
    "sub/dvd.mpg": (["-c:v", "mpeg2video", "-bf", "2", "-g", "12"], _src("320x180")),
}  # fmt: skip
DERIVED = (
    "sub/phone_rot90.mp4",
    "phone_rot270.mp4",
    "edit_list.mp4",
    "trimmed.mkv",
    "cut_download.mp4",
    "cut_copy.mp4",
    "sub/damaged_mid.mp4",
    "thumbnail.mp4",
    "sub/joined_mid_gop.ts",
    "sub/avi_copied.mp4",
    "sub/avi_remuxed.mp4",
    "sub/stream_switch.mp4",
    "sub/switch_down.mp4",
)
NOT_VIDEO = ("notes.txt", "voice.m4a", "podcast.mp4", "poster.jpg", "empty.mp4", "no_decoder.mp4")
# no module may read them: a cut index, no index, frames without a known place, data that does not decode, a start
# between keyframes, no video
BROKEN = {"cut_download.mp4", "cut_copy.mp4", "sub/old_camera.avi", "sub/dvd.mpg", "sub/damaged_mid.mp4",
          "sub/joined_mid_gop.ts", "sub/avi_copied.mp4", *NOT_VIDEO}  # fmt: skip


# an adaptive stream's recordings, the size going up and going down: the references made with them
SWITCHES = {"sub/stream_switch.mp4": "320x180, then 480x270", "sub/switch_down.mp4": "480x270, then 320x180"}

# a cover picture, as a downloader embeds a video's thumbnail or a podcast's artwork (an attached picture stream)
COVER = ("-f", "lavfi", "-i", "color=c=red:size=96x54:duration=0.04", "-map", "0", "-map", "1")


def ffmpeg(*args) -> None:
    run = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *map(str, args)], capture_output=True)
    if run.returncode:
        raise RuntimeError(f"ffmpeg {' '.join(map(str, args))}: {run.stderr.decode()[-300:]}")


def build(folder) -> dict[str, Path]:
    """{name: path} of the folder's files (made once), with the references of the readable ones beside them."""
    folder = Path(folder)
    for name, (args, src) in ENCODED.items():
        out = folder / name
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            ffmpeg("-f", "lavfi", "-i", src, "-t", FRAMES / 30, *args, out.with_name(".tmp" + out.suffix))
            out.with_name(".tmp" + out.suffix).rename(out)
    made = {n: folder / n for n in ENCODED}
    steps = {
        "sub/phone_rot90.mp4": lambda p: ffmpeg("-i", made["h264_bframes.mp4"], "-c", "copy", "-metadata:s:v", "rotate=90", p),
        "phone_rot270.mp4": lambda p: ffmpeg("-i", made["film_640x272.mp4"], "-c", "copy", "-metadata:s:v", "rotate=270", p),
        "edit_list.mp4": lambda p: ffmpeg("-ss", "0.2", "-i", made["faststart.mp4"], "-c", "copy", p),
        "trimmed.mkv": lambda p: ffmpeg("-ss", "0.9", "-i", made["sub/hevc_open.mp4"], "-c", "copy", p),
        "cut_download.mp4": lambda p: p.write_bytes(made["faststart.mp4"].read_bytes()[: made["faststart.mp4"].stat().st_size // 2]),
        "cut_copy.mp4": lambda p: p.write_bytes(made["h264_bframes.mp4"].read_bytes()[: made["h264_bframes.mp4"].stat().st_size // 2]),
        "sub/damaged_mid.mp4": lambda p: p.write_bytes(damaged_mid(made["h264_bframes.mp4"].read_bytes())),
        "sub/joined_mid_gop.ts": lambda p: cut_mid_gop(made["sub/camera.ts"], p),
        # the AVI remuxed to MP4 as most do (its B-frames keep their decode order as times), and as the modules say
        "sub/avi_copied.mp4": lambda p: ffmpeg("-i", made["sub/old_camera.avi"], "-c", "copy", p),
        "sub/avi_remuxed.mp4": lambda p: ffmpeg("-fflags", "+genpts", "-i", made["sub/old_camera.avi"], "-c", "copy", "-bsf:v", "mpeg4_unpack_bframes", p),
        "sub/stream_switch.mp4": rendition_switch,
        "sub/switch_down.mp4": lambda p: rendition_switch(p, ("480x270", "320x180")),
        "thumbnail.mp4": lambda p: ffmpeg("-i", made["h264_bframes.mp4"], *COVER, "-c:v:0", "copy", "-c:v:1", "mjpeg", "-frames:v:1", "1", "-disposition:v:1", "attached_pic", p),
    }  # fmt: skip
    steps |= {
        "notes.txt": lambda p: p.write_text("shot list\n"),
        "voice.m4a": lambda p: ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", p),
        "podcast.mp4": lambda p: ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", *COVER, "-c:v", "mjpeg", "-frames:v", "1", "-disposition:v:0", "attached_pic", p),
        "poster.jpg": still_picture,
        "empty.mp4": lambda p: p.write_bytes(b""),
        "no_decoder.mp4": lambda p: damage_mp4(made["h264_bframes.mp4"], p, "unknown sample entry"),
    }  # fmt: skip
    for name in (*DERIVED, *NOT_VIDEO):
        if not (folder / name).exists() or name in SWITCHES and not _ref_file(folder / name).exists():
            steps[name](folder / name)  # that file's reference is made with it
        made[name] = folder / name
    for name, p in made.items():
        if name not in BROKEN and not _ref_file(p).exists():
            save_reference(p)
    return made


def damaged_mid(data: bytes) -> bytes:
    """`data` with 4,000 bytes zeroed in its middle: its packets stay whole (the scan passes it), one fails to decode."""
    data = bytearray(data)
    data[len(data) // 2 : len(data) // 2 + 4000] = bytes(4000)
    return bytes(data)


def cut_mid_gop(ts: Path, out: Path) -> None:
    """`out`: the MPEG-TS file `ts` from the packet after its second keyframe on, as a recording joined mid-stream or
    a download of a live stream's middle: its first frames (in decode order) come before any keyframe."""
    found = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pos,flags", "-of", "csv=p=0", ts],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    keys = [j for j, line in enumerate(found) if "K" in line.split(",")[1]]
    out.write_bytes(ts.read_bytes()[int(found[keys[1] + 1].split(",")[0]) :])


def rendition_switch(out: Path, sizes=("320x180", "480x270")) -> None:
    """An adaptive stream's recording: a segment at each of `sizes` (each a second of H.264 starting on a keyframe),
    joined by FFmpeg's concat demuxer into MP4. Its reference is each segment's, decoded alone: the ffmpeg tool,
    rebuilding its filters at the change, draws the second segment a pixel to the side."""
    parts = [out.with_name(f".part{i}.ts") for i in (0, 1)]
    for part, size in zip(parts, sizes):
        ffmpeg("-f", "lavfi", "-i", _src(size), "-t", FRAMES / 60, "-c:v", "libx264", "-bf", "2", "-g", "15", part)
    listing = out.with_name(".parts.txt")
    listing.write_text("".join(f"file '{part.name}'\n" for part in parts))
    ffmpeg("-f", "concat", "-safe", "0", "-i", listing, "-c", "copy", out)
    save_reference(out, np.concatenate([_decode(part) for part in parts]))
    for f in (*parts, listing):
        f.unlink()


def save_reference(path: Path, frames: np.ndarray | None = None) -> None:
    """Save `frames` (default: every frame the ffmpeg tool shows of `path`, `_decode`) as `path`'s reference, in the
    `.reference` folder beside it."""
    _ref_file(path).parent.mkdir(exist_ok=True)
    np.savez_compressed(_ref_file(path), frames=_decode(path) if frames is None else frames)


def _ref_file(path: Path) -> Path:
    return path.parent / ".reference" / f"{path.name}.{SIZE}.npz"


def _decode(path: Path) -> np.ndarray:
    """Every frame the ffmpeg tool shows of `path`, (N, 3, SIZE, SIZE) uint8: the shorter side resized to SIZE
    (bilinear), the centre cut out at the offsets the modules use."""
    shown = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height,sample_aspect_ratio:stream_side_data=rotation",
         "-of", "default=nw=1", path], capture_output=True, text=True,
    ).stdout  # fmt: skip
    fields = dict(line.split("=", 1) for line in shown.split() if "=" in line)
    num, _, den = fields.get("sample_aspect_ratio", "1:1").partition(":")
    sar = int(num) / int(den) if num.isdigit() and den.isdigit() and int(num) and int(den) else 1
    w, h = int(fields["width"]) * sar, int(fields["height"])
    if int(float(fields.get("rotation", 0))) % 180:
        w, h = h, w
    s = SIZE / min(h, w)
    hh, ww = max(SIZE, round(h * s)), max(SIZE, round(w * s))
    cut = f"scale={ww}:{hh}:flags=bilinear,crop={SIZE}:{SIZE}:{(ww - SIZE) // 2}:{(hh - SIZE) // 2}"
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", path, "-vf", cut, "-fps_mode", "passthrough", "-f", "rawvideo",
         "-pix_fmt", "rgb24", "-"], capture_output=True, check=True,
    ).stdout  # fmt: skip
    return np.frombuffer(raw, np.uint8).reshape(-1, SIZE, SIZE, 3).transpose(0, 3, 1, 2).copy()


def still_picture(path: Path) -> str:
    """A JPEG, as a reader's folder holds beside its videos (a poster, a thumbnail), written by PyAV."""
    import av

    with av.open(str(path), "w", format="image2") as out:
        s = out.add_stream("mjpeg")
        s.width, s.height, s.pix_fmt = 64, 48, "yuvj420p"
        picture = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
        for packet in [*s.encode(picture), *s.encode()]:
            out.mux(packet)
    return str(path)


def reference(path) -> np.ndarray:
    """The frames the ffmpeg tool shows of `path` (a readable file of `build`'s folder), as `_decode` makes them."""
    return np.load(_ref_file(Path(path)))["frames"]


if __name__ == "__main__":
    target = Path(sys.argv[1])
    if not shutil.which("ffmpeg"):
        sys.exit("needs the ffmpeg command-line tool")
    for name, p in build(target).items():
        print(f"{name:28s} {p.stat().st_size:>9,d} bytes")
