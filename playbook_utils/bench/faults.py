"""Bad input on purpose: broken files and what each backend does with them (notebook 23). A good outcome is our
own `DecodeError` / `BackendUnavailable` naming file and cause; a crash, a hang, a raw exception or wrong frames
is a bad one."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from playbook_utils import child, env
from playbook_utils.bench import media
from playbook_utils.bench.matrix import outcome, table
from playbook_utils.decoders import read_frames, video_info
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable, DecodeError


def _remux_faststart(src: Path, dst: Path) -> Path:
    """Copy `src` into an MP4 whose index (moov) comes before the data, as streaming sites write."""
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w", options={"movflags": "faststart"}) as out:
        s_in = inp.streams.video[0]
        s_out = out.add_stream_from_template(s_in)
        for packet in inp.demux(s_in):
            if packet.dts is None:
                continue
            packet.stream = s_out
            out.mux(packet)
    return dst


def make_bad_files(directory) -> dict[str, tuple[Path, list[int]]]:
    """Write the fault cases; return {name: (path, indices to ask for)}."""
    d, num_frames = Path(directory), 48
    d.mkdir(parents=True, exist_ok=True)
    good = media.make_clip(d / "good.mp4", "h264", 256, 144, num_frames=num_frames, gop=12)
    fast = _remux_faststart(good, d / "good_faststart.mp4")
    rng = random.Random(0)
    want = [num_frames - 1, 0, num_frames // 2]
    cases: dict[str, tuple[Path, list[int]]] = {
        "good (control)": (good, want),
        "good, faststart (control)": (fast, want),
        "missing file": (d / "missing.mp4", want),
    }
    (d / "empty.mp4").write_bytes(b"")
    cases["zero bytes"] = (d / "empty.mp4", want)
    (d / "random.mp4").write_bytes(bytes(rng.randrange(256) for _ in range(64 * 1024)))
    cases["random bytes named .mp4"] = (d / "random.mp4", want)
    (d / "text.mp4").write_text("this is not a video\n" * 500)
    cases["text named .mp4"] = (d / "text.mp4", want)
    for label, src in (("moov at end", good), ("faststart", fast)):
        blob = src.read_bytes()
        for frac in (0.1, 0.5, 0.9):
            p = d / f"truncated_{label.replace(' ', '_')}_{int(frac * 100)}.mp4"
            p.write_bytes(blob[: int(len(blob) * frac)])
            cases[f"truncated at {int(frac * 100)}%, {label}"] = (p, want)
    corrupt = bytearray(good.read_bytes())
    mid = len(corrupt) // 2  # in a moov-at-end MP4 the middle is compressed frame data
    corrupt[mid : mid + 2048] = bytes(rng.randrange(256) for _ in range(2048))
    (d / "corrupt_mid.mp4").write_bytes(bytes(corrupt))
    cases["corrupt packets mid-stream"] = (d / "corrupt_mid.mp4", list(range(num_frames)))
    audio = d / "audio_only.mkv"
    if not audio.exists():
        import av
        import numpy as np

        with av.open(str(audio), "w") as out:
            s = out.add_stream("pcm_s16le", rate=8000)
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
            frame.sample_rate = 8000
            for p in [*s.encode(frame), *s.encode()]:
                out.mux(p)
    cases["no video stream"] = (audio, want)
    for how in media.DAMAGES:  # headers FFmpeg still opens, damaged where our own box reader looks
        cases[f"header: {how}"] = (media.damage_mp4(good, d / f"header_{how.replace(' ', '_')}.mp4", how), want)
    cases["index out of range"] = (good, [0, num_frames + 5])
    return cases


def classify(result: dict, wanted: list[int]) -> str:
    """'exact', 'WRONG ...', 'clear error: ...' (our `DecodeError`), 'refused: ...', 'RAW: ...' (another library's
    exception reached the top), 'CRASHED: ...' (the process died or hung) for one request's answer."""
    status = result["status"]
    if status in ("ok", "unavailable"):
        return outcome(result, wanted)
    if status == "error":
        if result.get("exception") not in child.OURS:
            return f"RAW: {result['error']}"
        return f"clear error: {result['cause']}"
    return f"CRASHED: {result['error']}"


def run(backends, device: str, directory, timeout: float = 120) -> dict[str, dict[str, str]]:
    """{case: {backend: outcome}}: each backend serves all cases in its own child process."""
    return table(make_bad_files(directory), backends, device, classify, timeout)


def make_look_alikes(directory) -> tuple[Path, Path]:
    """Two stamped VP9-in-MP4 clips of exactly the same size (a `free` box pads the smaller, `media.pad_mp4`):
    24 frames of 256x144 and 36 frames of 320x180. Every backend reads them (VP9 is all DALI's CPU path takes;
    NVDEC takes these sizes). Returns (the 24-frame clip, the 36-frame clip)."""
    d = Path(directory)
    a = media.make_clip(d / "a.mp4", "vp9", 256, 144, num_frames=24, gop=8)
    b = media.make_clip(d / "b.mp4", "vp9", 320, 180, num_frames=36, gop=12)
    size = max(a.stat().st_size, b.stat().st_size) + 64
    return media.pad_mp4(a, size), media.pad_mp4(b, size)


def replaced_file_reads(a, b, target, backend: str, device: str = "cpu") -> list:
    """Read `target` (a copy of `a`), replace it by `b` (moved in), then by `a` (written in place), keeping the
    modification time, reading after each swap in this process. Returns per read True (the new file's frames) or
    the error; a refusal ends the list. Notebook 23."""
    a, b, target = Path(a), Path(b), Path(target)
    shutil.copy(a, target)
    out = []
    for step, (src, want) in enumerate(((None, [20, 3]), (b, [35, 0, 20]), (a, [23, 1]))):
        if src is not None:
            before = target.stat()
            if step == 1:
                staged = target.with_name(f".{target.name}.staged")
                shutil.copy(src, staged)
                os.replace(staged, target)
            else:
                with open(target, "r+b") as f:
                    f.write(src.read_bytes())
            os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        width = media.probe(src or a).width
        try:
            frames = read_frames(target, want, backend=backend, device=device)
            out.append([media.read_stamp(f) for f in frames] == want and frames.shape[-1] == width)
        except BackendUnavailable as e:
            return [f"refused: {e.cause[:100]}"]
        except DecodeError as e:  # what a stale probe gives: the old file's frame count
            out.append(f"DecodeError: {e.cause[:100]}")
    return out


def _gpu_mb(device: str) -> float:
    """GPU memory this process holds: NVML's per-process figure (sees every library's allocations),
    else torch's allocator (sees only torch's)."""
    import torch

    index = Device.parse(device).ordinal
    nvml = env.nvml_handle(index)
    try:
        for p in nvml[0].nvmlDeviceGetComputeRunningProcesses(nvml[1]) if nvml else []:
            if p.pid == os.getpid() and p.usedGpuMemory:
                return p.usedGpuMemory / 2**20
    except Exception:
        pass
    return torch.cuda.memory_allocated(index) / 2**20


WARMUP_SHARE = 0.2  # a soak's warm-up ends after this share of its time cap, if its calls have not ended it before


def _slope(points) -> float | None:
    """Least-squares RSS growth in bytes per call over curve points: a steady leak shows as a steady slope,
    whatever the process's size (a percentage hides a leak in a large process and inflates one in a small one)."""
    if len(points) < 3:
        return None
    xs, ys = [p["call"] for p in points], [p["rss_mb"] * 2**20 for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else None


def soak(
    path,
    backend: str = "pyav",
    device: str = "cpu",
    calls: int = 10_000,
    warmup: int = 200,
    every: int = 50,
    max_seconds: float | None = None,
) -> dict:
    """Make `warmup` + `calls` random-access `read_frames` calls of 4 frames, sampling RSS (and GPU memory)
    every `every` calls; `max_seconds` caps it. Returns the curve, growth after the warm-up ('rss_growth_pct',
    None with 'not_measured' when too short) and 'rss_bytes_per_call'. Runs in this process."""
    import gc
    import time

    import psutil

    rng = random.Random(0)
    n = video_info(path).num_frames
    proc = psutil.Process()
    cuda = Device.parse(device).is_cuda
    t0 = time.monotonic()
    curve, warm_end, c = [], None, 0
    while True:
        read_frames(path, [rng.randrange(n) for _ in range(4)], backend=backend, device=device)
        elapsed = time.monotonic() - t0
        base = warm_end is None and (c >= warmup or (max_seconds is not None and elapsed > WARMUP_SHARE * max_seconds))
        if base:
            warm_end = c
        done = (warm_end is not None and c - warm_end >= calls) or (max_seconds is not None and elapsed > max_seconds)
        if c % every == 0 or base or done:
            gc.collect()
            rss_mb = proc.memory_info().rss / 2**20
            curve.append({"call": c, "rss_mb": rss_mb, "gpu_mb": _gpu_mb(device) if cuda else None})
        if done:
            break
        c += 1
    made = c - warm_end
    out = {
        "calls": made,
        "calls_asked": calls,
        "stopped_by_time": made < calls,
        "warmup": warm_end,
        "warmup_cut_by_time": warm_end < warmup,
        "seconds": time.monotonic() - t0,
        "curve": curve,
        "rss_growth_pct": None,
    }
    if made < max(1, warm_end):
        out["not_measured"] = (
            f"{c + 1} calls in {out['seconds']:.0f} s: the measured part after the "
            f"{warm_end}-call warm-up ({made} calls) is shorter than the warm-up"
        )
        if cuda:
            out["gpu_growth_pct"] = None
        return out
    end, base = curve[-1], warmup_point(curve, warm_end)
    out["rss_growth_pct"] = 100 * (end["rss_mb"] - base["rss_mb"]) / base["rss_mb"]
    out["rss_bytes_per_call"] = _slope([p for p in curve if p["call"] >= warm_end])
    if cuda:
        out["gpu_growth_pct"] = 100 * (end["gpu_mb"] - base["gpu_mb"]) / base["gpu_mb"] if base["gpu_mb"] else None
    return out


def warmup_point(curve: list[dict], warmup: int | None) -> dict | None:
    """The point of a soak's memory `curve` where its warm-up ended (call number `warmup`), which its growth is
    measured from; None where the curve has none (a soak that failed, or never got past its warm-up)."""
    return next((p for p in curve if p.get("call") == warmup), None)


def soak_all(jobs: dict, calls: int, warmup: int, max_seconds: float | None, timeout: float = 3600) -> dict:
    """`soak` for several (clip, backend, device) at once, each in its own child process, side by side (each
    watches only its own memory): {label: (clip, backend, device)} in, {label: result or {'error': ...}} out
    (notebook 23)."""
    argvs = {
        label: child.python(
            "-c",
            "from playbook_utils import child; from playbook_utils.bench import faults; "
            f"child.reply(faults.soak, {str(clip)!r}, {b!r}, {d!r}, calls={calls}, warmup={warmup}, "
            f"every={max(1, calls // 40)}, max_seconds={max_seconds})",
        )
        for label, (clip, b, d) in jobs.items()
    }
    reply_keys = ("status", "error", "cause", "exception")
    return {
        label: {k: v for k, v in r.items() if k not in reply_keys} if r["status"] == "ok" else {"error": r["error"]}
        for label, r in child.call_all(argvs, timeout).items()
    }


LEAK_MIN_CALLS = 5000  # below this many calls, the allocator's steps swamp a slope of a few hundred bytes per call


def format_soak(label: str, clip: str, r: dict, max_seconds: float | None) -> str:
    """One line for a `soak` result: calls made, RSS at the start, at the end of the warm-up (where the growth is
    measured from) and at the end, growth after the warm-up (and on the GPU), and the fitted growth per call; or
    why the growth was not measured, or the child's error."""
    if "error" in r:
        return f"{label:20s}: failed: {r['error']}"
    cut = f", stopped by the {max_seconds} s cap" if r.get("stopped_by_time") else ""
    warm = f" of {r['warmup']} calls, cut at a fifth of the cap" if r.get("warmup_cut_by_time") else ""
    curve, warmed = r["curve"], warmup_point(r["curve"], r.get("warmup"))
    head = (
        f"{label:20s} on {Path(clip).name}: {r['calls']:,} calls after the warm-up{warm}{cut}; "
        f"RSS {curve[0]['rss_mb']:.0f} MiB at the start"
        + (f", {warmed['rss_mb']:.0f} after the warm-up" if warmed is not None else "")
        + f", {curve[-1]['rss_mb']:.0f} at the end"
    )
    if r["rss_growth_pct"] is None:
        return f"{head}; growth NOT MEASURED: {r['not_measured']}"
    gpu = f", GPU memory {r['gpu_growth_pct']:+.1f}%" if r.get("gpu_growth_pct") is not None else ""
    slope = r.get("rss_bytes_per_call")
    trend = f"; {slope:+,.0f} bytes per call" if slope is not None else ""
    if slope is not None and r["calls"] < LEAK_MIN_CALLS:
        trend += f" (under {LEAK_MIN_CALLS:,} calls: too few to tell a steady leak from the allocator's steps)"
    return f"{head}, growth after warm-up {r['rss_growth_pct']:+.2f}%{gpu}{trend}"
