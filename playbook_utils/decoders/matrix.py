"""The correctness matrix: which library returns exactly the requested frames for which file (10-14).

Tricky files are made locally (codecs, 8/10-bit, containers, GOP structures, B-frames, open
GOP, variable frame rate), every backend is asked for the same out-of-order, repeated frame
list in its own process, and each returned frame's stamp is read back. An outcome is one of
`exact`, `WRONG` (frames returned but not the ones asked for), `refused` (our BackendUnavailable,
with the reason), `error` (DecodeError) or `crashed` (the process died).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from playbook_utils import media


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

    def file_name(self) -> str:
        return self.name.replace(" ", "_").replace(",", "") + self.suffix


CASES = [
    Case("h264 mp4", "h264"),
    Case("h264 mp4, no B-frames", "h264", bframes=0),
    Case("h264 mp4, open GOP", "h264", closed_gop=False, bframes=3),
    Case("h264 mkv", "h264", ".mkv"),
    Case("h264 avi", "h264", ".avi"),
    Case("h264 avi, no B-frames", "h264", ".avi", bframes=0),
    Case("h264 mp4, VFR", "h264", vfr=True),
    Case("hevc mp4", "hevc"),
    Case("hevc mp4, open GOP", "hevc", closed_gop=False, bframes=3),
    Case("hevc mkv, 10-bit", "hevc", ".mkv", pix_fmt="yuv420p10le"),
    Case("vp9 webm", "vp9", ".webm"),
    Case("av1 mp4", "av1"),
    Case("av1 mkv, 10-bit", "av1", ".mkv", pix_fmt="yuv420p10le"),
]


def traits(info) -> set[str]:
    """File traits a library may get wrong: 'vfr', '10-bit', 'rotated', 'b-frames', 'open-gop', 'codec:X', 'container:X'."""
    out = {f"codec:{info.codec}", f"container:{info.container.split(',')[0]}"}
    if info.b_frames:
        out.add("b-frames")
    if info.open_gop:
        out.add("open-gop")
    if info.variable_frame_rate:
        out.add("vfr")
    if "10" in info.pix_fmt or "12" in info.pix_fmt:
        out.add("10-bit")
    if info.rotation:
        out.add("rotated")
    return out


def build_cases(directory, width: int = 320, height: int = 180, num_frames: int = 48) -> dict[str, Path]:
    """Encode every case that this PyAV can make; return {case name: path} (cached by file name)."""
    directory = Path(directory)
    clips = {}
    for case in CASES:
        if media.encoder_for(case.codec) is None:
            continue
        path = directory / f"{width}x{height}_{num_frames}" / case.file_name()
        if not path.exists():
            times = None
            if case.vfr:  # irregular gaps: 1/30 s mostly, 1/15 s every fifth frame
                t, times = 0.0, []
                for i in range(num_frames):
                    times.append(round(t, 4))
                    t += 1 / 15 if i % 5 == 4 else 1 / 30
            media.make_clip(path, case.codec, width, height, num_frames=num_frames, gop=case.gop,
                            bframes=case.bframes, pix_fmt=case.pix_fmt, closed_gop=case.closed_gop,
                            frame_times=times)
        clips[case.name] = path
    return clips


def request_for(num_frames: int) -> list[int]:
    """Out of order, repeated, both ends, across GOPs: the frame list every backend is asked for."""
    n = num_frames
    return [n - 1, 0, n // 2, 5, n // 2, n // 3, 2 * n // 3 + 1, 1, n - 2]


def outcome(result: dict, wanted: list[int]) -> str:
    """One word and a reason for one backend on one file."""
    if result["status"] == "ok":
        got = result["stamps"]
        if got == wanted:
            return "exact"
        bad = sum(g != w for g, w in zip(got, wanted))
        return f"WRONG: {bad} of {len(wanted)} frames wrong (asked {wanted}, got {got})"
    return f"{'refused' if result['status'] == 'unavailable' else result['status']}: {result['error']}"


def table(cases: dict, backends, device: str, classify=None, timeout: float = 300) -> dict[str, dict[str, str]]:
    """{case: {backend: outcome}} for cases given as {name: (path, indices)}; each backend in its own process."""
    from playbook_utils.decoders.isolated import run_requests

    classify = classify or outcome
    result: dict[str, dict[str, str]] = {name: {} for name in cases}
    for backend in backends:
        reqs = [{"path": str(p), "indices": idx, "backend": backend, "device": device, "stamps": True}
                for p, idx in cases.values()]
        for (name, (_, idx)), r in zip(cases.items(), run_requests(reqs, timeout=timeout)):
            result[name][backend] = classify(r, idx)
    return result


def run(backends, device: str, directory, **size) -> dict[str, dict[str, str]]:
    """{case: {backend: outcome}} for `backends` on `device`, each backend in its own process."""
    clips = build_cases(directory, **size)
    return table({name: (path, request_for(media.probe(path).num_frames)) for name, path in clips.items()},
                 backends, device)


def format_table(table: dict[str, dict[str, str]], width: int = 16) -> str:
    """The matrix as fixed-width text: one row per file, one short column per backend."""
    backends = list(next(iter(table.values())).keys()) if table else []
    lines = [f"{'file':26s}" + "".join(f"{b:>{width}s}" for b in backends)]
    for name, row in table.items():
        lines.append(f"{name:26s}" + "".join(f"{row[b].split(':')[0]:>{width}s}" for b in backends))
    return "\n".join(lines)
