"""Small, honest timing: warm up, repeat until a minimum time, report median and spread (notebooks 10-14, 20)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from playbook_utils.bench import media, verdicts
from playbook_utils.decoders import read_frames, video_info
from playbook_utils.device import Device

MAX_REPEATS = 1000  # `measure` stops after this many timed calls, however short


def measure(fn, *, items: int = 1, warmup: int = 1, min_time: float = 1.0, min_repeats: int = 3, sync=None) -> dict:
    """Time `fn()` after `warmup` calls, repeating until `min_time` s and `min_repeats` calls; `items` per call,
    `sync` run inside the timing (GPU work). Returns {'per_s' (from the median), 'median_s', 'min_s', 'max_s',
    'spread_pct', 'repeats'}."""
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MAX_REPEATS and (len(times) < min_repeats or time.perf_counter() - start < min_time):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    return {
        "per_s": items / med if med > 0 else float("inf"),
        "median_s": med,
        "min_s": min(times),
        "max_s": max(times),
        "spread_pct": 100 * (max(times) - min(times)) / med if med > 0 else 0.0,
        "repeats": len(times),
    }


def cuda_sync(device: str):
    """A sync function for `measure` on `device`, or None on the CPU."""
    if not Device.parse(device).is_cuda:
        return None
    import torch

    return lambda: torch.cuda.synchronize(device)


def other_names(path, folder, count: int = 4, library: str | None = None) -> list[str]:
    """`count` symbolic-link names of `path` in `folder`, each probed now (by `library` where given), so calls that
    rotate over them never reuse an adapter's cached decoder. Notebook 20."""
    video_info(path, library)  # a missing or broken file is named as the caller gave it, not by a link
    names = []
    for k in range(count):
        link = Path(folder) / f"clip{k}{Path(path).suffix}"
        link.symlink_to(Path(path).resolve())
        video_info(link, library)  # probed now, not inside a timed call
        names.append(str(link))
    return names


def one_caller(clips: dict, backends, indices: dict, repeats: int = 3) -> list[dict]:
    """Each backend reading `indices[name]` of each clip `repeats` times, one call at a time. Returns a row per
    backend and clip: 'seconds', 'frames_per_s' (best call), 'exact', or 'refused' with the error. Notebook 24."""
    rows = []
    for b in backends:
        for name, path in clips.items():
            idx = list(indices[name])
            try:
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    frames = read_frames(path, idx, b)
                    times.append(time.perf_counter() - t0)
                exact = [media.read_stamp(x) for x in frames] == idx
                rows.append({"backend": b, "clip": name, "frames": len(idx), "seconds": times,
                             "frames_per_s": len(idx) / min(times), "exact": exact})  # fmt: skip
            except Exception as e:  # a refusal or a failure is this backend's row, with its cause
                rows.append({"backend": b, "clip": name, "refused": f"{type(e).__name__}: {e}"})
    return rows


def rate_on(rows: list[dict], backend: str, clips, k: int | None = None) -> float:
    """Frames per second of `backend` over `clips` in `one_caller`'s rows: its frames over its time, each clip's
    best call (or call `k`). Notebook 24 (`rank_on_common`)."""
    mine = [r for r in rows if r["backend"] == backend and r["clip"] in clips]
    return sum(r["frames"] for r in mine) / sum(min(r["seconds"]) if k is None else r["seconds"][k] for r in mine)


def rank_on_common(rows: list[dict], backends, repeats: int) -> tuple[verdicts.Verdict, set]:
    """(verdict, clips): `one_caller`'s backends ranked by their frames per second over the clips every one of them
    read exactly (the best call per clip; the spread over the repeats, each summed over those clips). Raises
    ValueError where no clip was read exactly by all of them. Notebook 24."""
    common = set.intersection(*({r["clip"] for r in rows if r["backend"] == b and r.get("exact")} for b in backends))
    if not common:
        raise ValueError("no clip that every backend read exactly: " + ", ".join(backends))

    spreads = {b: verdicts.spread_pct([rate_on(rows, b, common, k) for k in range(repeats)]) for b in backends}
    return verdicts.rank((b, rate_on(rows, b, common), spreads[b]) for b in backends), common
