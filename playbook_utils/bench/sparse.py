"""Five ways to get K sparse frames out of a video with PyAV, each counting what it decodes (notebooks 01, 20):
seek per frame, decode everything, one sorted forward pass, GOPs in parallel threads, and keyframe-snapped
(approximate). Each returns (RGB frames in target order, frames decoded[, snapped indices])."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from playbook_utils.bench import media
from playbook_utils.bench.verdicts import spread_pct

STRATEGIES = ("seek per frame", "decode everything", "sorted forward pass", "parallel GOPs", "keyframe snapped")
EXACT = ("seek per frame", "sorted forward pass", "parallel GOPs")  # the strategies that return the frames asked for


def frame_maps(path):
    """(pts of each frame index in presentation order, index of the keyframe at or before each frame)."""
    info = media.probe(path)  # one pass over the packets gives both
    return info.pts, info.keyframe_of


def _open(path, threads: str, thread_count: int = 0):
    import av

    c = av.open(str(path))
    s = c.streams.video[0]
    s.thread_type, s.thread_count = threads, thread_count  # thread_count 0: FFmpeg's choice
    return c, s


def _seek_to(c, s, p):
    """Seek to the keyframe at or before pts `p` and decode forward to the frame with that pts;
    returns (the frame as an RGB array, frames decoded)."""
    c.seek(p, stream=s, backward=True, any_frame=False)
    for decoded, f in enumerate(c.decode(s), start=1):
        if f.pts == p:
            return f.to_ndarray(format="rgb24"), decoded
    raise RuntimeError(f"the stream ended before pts {p}")


def seek_per_frame(path, targets, pts, threads: str = "SLICE"):
    """Seek to each target's keyframe and decode up to it; returns (frames, frames decoded)."""
    got, decoded = [], 0
    c, s = _open(path, threads)
    with c:
        for t in targets:
            frame, n = _seek_to(c, s, pts[t])
            got.append(frame)
            decoded += n
    return got, decoded


def decode_everything(path, targets, pts, threads: str = "SLICE"):
    """Decode every frame and keep the targets; returns (frames, frames decoded)."""
    want, keep, decoded = set(targets), {}, 0
    c, s = _open(path, threads)
    with c:
        for i, f in enumerate(c.decode(s)):
            decoded += 1
            if i in want:
                keep[i] = f.to_ndarray(format="rgb24")
    return [keep[t] for t in targets], decoded


def sorted_pass(path, targets, pts, key_of, threads: str = "SLICE", thread_count: int = 0):
    """One forward pass over only the GOPs that hold targets; returns (frames, frames decoded).
    `thread_count` caps the decoder's threads (notebook 10 times frame threads against seeking)."""
    index_of = {p: i for i, p in enumerate(pts)}
    keep, decoded, pos = {}, 0, None
    c, s = _open(path, threads, thread_count)
    with c:
        frames = None
        for t in sorted(set(targets)):
            if frames is None or key_of[t] > pos + 1:
                c.seek(pts[key_of[t]], stream=s, backward=True, any_frame=False)
                frames = c.decode(s)
            for f in frames:
                decoded += 1
                pos = index_of[f.pts]
                if pos == t:
                    keep[t] = f.to_ndarray(format="rgb24")
                    break
    return [keep[t] for t in targets], decoded


def parallel_gops(path, targets, pts, key_of):
    """Each GOP that holds targets decoded by its own thread and container (slice threads only), as many at once as
    there are usable cores; returns (frames, frames decoded)."""
    index_of = {p: i for i, p in enumerate(pts)}
    groups: dict[int, list[int]] = {}
    for t in sorted(set(targets)):
        groups.setdefault(key_of[t], []).append(t)

    def one(key, wanted):
        keep, decoded, want = {}, 0, set(wanted)
        c, s = _open(path, "SLICE")
        with c:
            c.seek(pts[key], stream=s, backward=True, any_frame=False)
            for f in c.decode(s):
                decoded += 1
                i = index_of[f.pts]
                if i in want:
                    keep[i] = f.to_ndarray(format="rgb24")
                if i >= wanted[-1]:
                    break
        return keep, decoded

    with ThreadPoolExecutor(max(1, min(len(groups), len(os.sched_getaffinity(0))))) as pool:
        parts = list(pool.map(lambda kv: one(*kv), groups.items()))
    keep = {i: frame for got, _ in parts for i, frame in got.items()}
    return [keep[t] for t in targets], sum(d for _, d in parts)


def keyframe_snapped(path, targets, pts, key_of, threads: str = "SLICE"):
    """The nearest keyframe for each target, one decoded frame each; returns (frames, decoded, snapped indices)."""
    keys = sorted(set(key_of))
    snapped = [min(keys, key=lambda k: (abs(k - t), k)) for t in targets]
    got, decoded = {}, 0
    c, s = _open(path, threads)
    with c:
        for k in sorted(set(snapped)):
            got[k], n = _seek_to(c, s, pts[k])
            decoded += n
    return [got[k] for k in snapped], decoded, snapped


def run(path, targets, threads: str = "SLICE", repeats: int = 3) -> dict:
    """Time every strategy on `path` (best of `repeats`) and check its frames by their stamps. Returns {strategy:
    {'seconds', 'spread_pct', 'frames_decoded', 'exact', 'mean_offset' (frames between target and returned)}}."""
    pts, key_of = frame_maps(path)
    calls = {
        "seek per frame": lambda: seek_per_frame(path, targets, pts, threads) + (list(targets),),
        "decode everything": lambda: decode_everything(path, targets, pts, threads) + (list(targets),),
        "sorted forward pass": lambda: sorted_pass(path, targets, pts, key_of, threads) + (list(targets),),
        "parallel GOPs": lambda: parallel_gops(path, targets, pts, key_of) + (list(targets),),
        "keyframe snapped": lambda: keyframe_snapped(path, targets, pts, key_of, threads),
    }
    out = {}
    for name, call in calls.items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            got, decoded, returned = call()
            times.append(time.perf_counter() - t)
        out[name] = {
            "seconds": min(times),
            "spread_pct": spread_pct(times),
            "frames_decoded": decoded,
            "exact": [media.read_stamp(g) for g in got] == returned,
            "mean_offset": sum(abs(a - b) for a, b in zip(returned, targets)) / len(targets),
        }
    return out


def table_speedups(rows: list[dict], gops: dict) -> list[dict]:
    """For each uniform16 row of notebook 20's table with a sequential row of the same backend, device and clip:
    the time to decode all of that row's frames against asking for 16 ('all_ms', 'k_ms', 'speedup'), the GOP from
    `gops` {clip: frames}, and 'spread_pct', the two rates' spreads added. Notebook 20."""
    seq = {(r["backend"], r["device"], r["clip"]): r for r in rows if r["workload"] == "sequential"}
    out = []
    for r in rows:
        s = seq.get((r["backend"], r["device"], r["clip"])) if r["workload"] == "uniform16" else None
        if s:
            t_all, t_k = s["frames_per_call"] / s["fps"], 16 / r["fps"]
            spread = (s.get("rate_spread_pct") or 0) + (r.get("rate_spread_pct") or 0)
            out.append({"backend": r["backend"], "device": r["device"], "clip": r["clip"], "gop": gops[r["clip"]],
                        "all_ms": 1e3 * t_all, "k_ms": 1e3 * t_k, "speedup": t_all / t_k, "spread_pct": spread})  # fmt: skip
    return out
