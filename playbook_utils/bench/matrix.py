"""The correctness matrix: which library returns exactly the requested frames for which file (notebooks 10-14).
Tricky files are made locally, every backend is asked for the same out-of-order, repeated frames in its own process,
and the stamps are read back: `exact`, `WRONG`, `refused`, `error`, `crashed` or `timeout`."""

from __future__ import annotations

import dataclasses
from itertools import accumulate
from pathlib import Path

from playbook_utils.bench import media
from playbook_utils.decoders.isolated import run_requests


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    codec: str
    suffix: str = ".mp4"
    pix_fmt: str = "yuv420p"
    gop: int = 12
    bframes: int = 2
    closed_gop: bool = True
    vfr: bool = False
    streams: int = 1  # 2: a smaller, shorter video stream first, this clip second (FFmpeg's best)
    stream: int | None = None  # the stream asked for (None: FFmpeg's best)
    hide: int = 0  # leading frames an MP4 edit list hides
    rotation: int = 0  # display rotation, degrees counterclockwise

    @property
    def needs_cli(self) -> bool:
        """Whether the ffmpeg command-line tool makes this file (PyAV cannot write it)."""
        return self.streams > 1 or bool(self.hide) or bool(self.rotation)

    def encoding(self) -> dict:
        """`media.make_clip`'s settings for this case's video."""
        return {"gop": self.gop, "bframes": self.bframes, "pix_fmt": self.pix_fmt, "closed_gop": self.closed_gop}


CASES = [
    Case("h264 mp4", "h264"),
    Case("h264 mp4, no B-frames", "h264", bframes=0),
    Case("h264 mp4, open GOP", "h264", closed_gop=False, bframes=3),
    Case("h264 mkv", "h264", ".mkv"),
    Case("h264 avi", "h264", ".avi"),
    Case("h264 avi, no B-frames", "h264", ".avi", bframes=0),
    Case("h264 mpegts", "h264", ".ts"),
    Case("h264 mp4, VFR", "h264", vfr=True),
    Case("hevc mp4", "hevc"),
    Case("hevc mp4, open GOP", "hevc", closed_gop=False, bframes=3),
    Case("hevc mkv, 10-bit", "hevc", ".mkv", pix_fmt="yuv420p10le"),
    Case("hevc mkv, 10-bit, open GOP", "hevc", ".mkv", pix_fmt="yuv420p10le", closed_gop=False, bframes=3),
    Case("vp9 webm", "vp9", ".webm"),
    Case("av1 mp4", "av1"),
    Case("av1 mkv, 10-bit", "av1", ".mkv", pix_fmt="yuv420p10le"),
    Case("h264 mp4, two video streams", "h264", streams=2),
    Case("h264 mp4, two streams, stream 0", "h264", streams=2, stream=0),
    Case("h264 mp4, edit list", "h264", bframes=0, hide=6),
    Case("h264 mp4, rotated 90", "h264", rotation=90),
    Case("h264 mp4, rotated 180", "h264", rotation=180),
    Case("h264 mp4, rotated 270", "h264", rotation=270),
    # VP9 twins: the only codec DALI's CPU decoder takes
    Case("vp9 mp4, two video streams", "vp9", streams=2),
    Case("vp9 mp4, edit list", "vp9", hide=6),
    Case("vp9 mp4, rotated 90", "vp9", rotation=90),
]


def build_cases(directory, width: int = 320, height: int = 180, num_frames: int = 48, names=None) -> dict[str, Path]:
    """Encode every case (or those `names`) this PyAV and, where needed, the ffmpeg tool can make; return
    {case name: path}. Cached by file name, so files made elsewhere can be copied in."""
    directory = Path(directory)
    clips = {}
    for case in CASES:
        if names is not None and case.name not in names:
            continue
        file_name = case.name.replace(" ", "_").replace(",", "") + case.suffix
        path = directory / f"{width}x{height}_{num_frames}" / file_name
        if case.needs_cli and path.exists():
            clips[case.name] = path
            continue
        if media.encoder_for(case.codec) is None or (case.needs_cli and media.ffmpeg_cli() is None):
            continue
        if case.needs_cli:
            _build_with_cli(case, path, width, height, num_frames)
        if not path.exists():
            times = None
            if case.vfr:  # irregular gaps: 1/30 s mostly, 1/15 s every fifth frame
                gaps = (1 / 15 if i % 5 == 4 else 1 / 30 for i in range(num_frames - 1))
                times = [round(t, 4) for t in accumulate(gaps, initial=0.0)]
            media.make_clip(
                path, case.codec, width, height, num_frames=num_frames, frame_times=times, **case.encoding()
            )
        clips[case.name] = path
    return clips


def _build_with_cli(case: Case, path: Path, width: int, height: int, num_frames: int) -> None:
    """Make a case the ffmpeg tool writes from clips PyAV encodes (beside it, named after it)."""
    base = path.with_name(f"base_{path.name}")
    media.make_clip(base, case.codec, width, height, num_frames=num_frames, **case.encoding())
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    if case.streams > 1:
        first = path.with_name(f"first_{path.name}")  # another size and length: a wrong stream cannot pass
        size = (width * 4 // 5 // 2 * 2, height * 4 // 5 // 2 * 2)
        media.make_clip(first, case.codec, *size, num_frames=num_frames * 3 // 4, **case.encoding())
        media.mux_video_streams(tmp, [first, base], best=1)
    elif case.hide:
        media.hide_leading_frames(base, tmp, case.hide)
    else:
        media.rotate_display(base, tmp, case.rotation)
    tmp.replace(path)


def cases_to_ask(clips: dict[str, Path]) -> dict[str, tuple]:
    """{name: (path, indices, stamps a player shows there, stream)} for the built cases `clips`: what `table`
    asks every backend (`request_for` the case's frame count, of the case's stream)."""
    out = {}
    for case in CASES:
        if case.name in clips:
            want = request_for(media.probe(clips[case.name], case.stream).num_frames)
            out[case.name] = (clips[case.name], want, [i + case.hide for i in want], case.stream)  # what a player shows
    return out


def request_for(num_frames: int) -> list[int]:
    """Out of order, repeated, both ends, across GOPs: the frame list every backend is asked for."""
    n = num_frames
    return [n - 1, 0, n // 2, 5, n // 2, n // 3, 2 * n // 3 + 1, 1, n - 2]


def around_keyframes(info) -> list[int]:
    """Out of order, repeated, and on both sides of every keyframe after the first (where the leading pictures of
    open GOP are): the request of the open-GOP reads (tests/unit/test_open_gop.py, benchmarks/h200/open_gop_matrix.py).
    `info`: the clip's `decoders.video_info`."""
    n = info.num_frames
    near = sorted({k + d for k in info.keyframes[1:] for d in (-2, -1, 0, 1, 2) if 0 <= k + d < n})
    return [n - 1, *reversed(near), 0, near[0], near[0]]


def outcome(result: dict, wanted: list[int]) -> str:
    """One word and a reason for one backend on one file."""
    if result["status"] == "ok":
        got = result["stamps"]
        if got == wanted:
            return "exact"
        bad = sum(g != w for g, w in zip(got, wanted))
        return f"WRONG: {bad} of {len(wanted)} frames wrong (asked {wanted}, got {got})"
    return f"{'refused' if result['status'] == 'unavailable' else result['status']}: {result.get('cause') or result['error']}"


def table(
    cases: dict, backends, device: str, classify=None, timeout: float = 300, env: dict | None = None, raw: bool = False
) -> dict[str, dict[str, str]]:
    """{case: {backend: outcome}} for cases {name: (path, indices[, stamps shown[, stream]])}, each backend in its
    own process with `env` added; `raw`: the library's own call instead of `read_frames` (decord only)."""
    classify = classify or outcome
    full = {name: (c[0], c[1], c[2] if len(c) > 2 else c[1], c[3] if len(c) > 3 else None) for name, c in cases.items()}
    result: dict[str, dict[str, str]] = {name: {} for name in cases}
    for backend in backends:
        ask = {"backend": backend, "device": device, "stamps": True, "raw": raw}
        reqs = [{**ask, "path": str(p), "indices": idx, "stream": s} for p, idx, _, s in full.values()]
        for (name, (_, _, shown, _)), r in zip(full.items(), run_requests(reqs, timeout=timeout, env=env)):
            result[name][backend] = classify(r, shown)
    return result


def run(backends, device: str, directory) -> dict[str, dict[str, str]]:
    """{case: {backend: outcome}} for `backends` on `device`, each backend in its own process (`table`)."""
    return table(cases_to_ask(build_cases(directory)), backends, device)


# what each trait in a row's name means, printed under the table for the traits it holds
TRAITS = {
    "open GOP": "open GOP: frames just after a keyframe may reference frames before it, so a seek must start earlier",
    "VFR": "VFR: variable frame rate, frames unevenly spaced in time; an index cannot be computed from the rate",
    "10-bit": "10-bit: 10 bits per sample (HDR and camera footage), which some GPU paths do not output",
    "avi": "avi: a container without presentation timestamps, so B-frames leave a frame's place unknown",
    "mpegts": "mpegts: MPEG-TS (cameras, broadcast, HLS), which FFmpeg seeks by decode time: a seek to a keyframe's "
    "presentation time lands a GOP late",
    "two video streams": "two video streams: a smaller, shorter stream first, this clip second; the request names no "
    "stream, so the frames must come from FFmpeg's best one (this clip)",
    "two streams, stream 0": "two streams, stream 0: the same file, the request naming stream 0 (the smaller one)",
    "edit list": "edit list: the MP4's edit list hides its first 6 frames, so a player starts at the 7th; exact means "
    "the frames a player shows at the indices asked",
    "rotated": "rotated N: a display rotation the player applies; exact means the right frames, turned as the player "
    "shows them",
}


def legend(names) -> list[str]:
    """The `TRAITS` lines for the traits the rows `names` hold, in `TRAITS`' order."""
    return [line for trait, line in TRAITS.items() if any(trait in name for name in names)]


def format_table(table: dict[str, dict[str, str]], width: int = 16) -> str:
    """The matrix as fixed-width text: one row per file, one short column per backend."""
    backends = list(next(iter(table.values())).keys()) if table else []
    first = max([26, *map(len, table)]) + 1
    lines = [f"{'file':{first}s}" + "".join(f"{b:>{width}s}" for b in backends)]
    for name, row in table.items():
        lines.append(f"{name:{first}s}" + "".join(f"{row[b].split(':')[0]:>{width}s}" for b in backends))
    return "\n".join(lines)


def builds_side_by_side(builds: dict, directory, backend: str = "decord") -> dict:
    """Two builds of one library (`builds`: {label: env or None}) on the correctness matrix, each through its
    own call and `read_frames`. Returns {'table', 'fixed', 'wrong_in_both', 'alike'}. Notebook 11."""
    cases = cases_to_ask(build_cases(directory))  # probed once for the four runs
    own = {b: table(cases, [backend], "cpu", env=env, raw=True) for b, env in builds.items()}
    kept = {b: table(cases, [backend], "cpu", env=env) for b, env in builds.items()}
    first, second = builds
    side = {
        case: {f"{b} {how}": r[b][case][backend] for b in builds for how, r in (("own", own), ("read_frames", kept))}
        for case in own[first]
    }
    # per case, one word each: the first build's own call, the second's, the second's through read_frames
    columns = (f"{first} own", f"{second} own", f"{second} read_frames")
    word = {c: [row[col].split(":")[0] for col in columns] for c, row in side.items()}
    both: dict = {}
    for c, (one, two, kept_two) in word.items():
        if one == two == "WRONG":
            both.setdefault(kept_two, []).append(c)
    fixed = [c for c, (one, two, _) in word.items() if one != "exact" and two == "exact"]
    alike = [c for c, (one, two, kept_two) in word.items() if one == two == "exact" and kept_two == "refused"]
    return {"table": side, "fixed": fixed, "wrong_in_both": both, "alike": alike}


def raised_on_repeat(paths, repeats: int, env: dict | None = None, backend: str = "decord") -> int:
    """How many of `repeats` reads of each of `paths` (the matrix's request, the library's own call, in one child
    process with `env`) raised: an error that comes and goes (decord2's on HEVC, notebook 11)."""
    once = [
        {"path": str(p), "indices": request_for(media.probe(p).num_frames), "backend": backend, "device": "cpu",
         "raw": True}
        for p in paths
    ]  # fmt: skip
    asks = [ask for ask in once for _ in range(repeats)]
    return sum(a["status"] != "ok" for a in run_requests(asks, env=env))
