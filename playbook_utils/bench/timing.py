"""Small, honest timing for notebooks: warm up, repeat until a minimum time, report median and spread.

Notebooks 10-14 use it for their per-library tables; the benchmarks (notebook 20) build on it.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from playbook_utils.decoders import video_info
from playbook_utils.device import Device


def measure(
    fn,
    *,
    items: int = 1,
    warmup: int = 1,
    min_time: float = 1.0,
    min_repeats: int = 3,
    max_repeats: int = 1000,
    sync=None,
) -> dict:
    """Time `fn()` and return {'per_s', 'median_s', 'min_s', 'max_s', 'spread_pct', 'repeats'}.

    `items` is how many things one call produces (frames, say): `per_s` is items per second from
    the median call. `sync` (e.g. torch.cuda.synchronize) runs after each call, inside the timing,
    so that GPU work is counted. Calls repeat until `min_time` seconds and `min_repeats` calls.
    """
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_repeats and (len(times) < min_repeats or time.perf_counter() - start < min_time):
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
    """`count` names of `path` in `folder` (symbolic links), each probed now (by `library`'s probe where given),
    not inside a timed call: calls that rotate over them never find the decoder an adapter keeps for the file it
    read last (notebook 20's table, `harness._child`, and its anchor, `anchor._child`)."""
    names = []
    for k in range(count):
        link = Path(folder) / f"clip{k}{Path(path).suffix}"
        link.symlink_to(Path(path).resolve())
        video_info(link, library)  # probed now, not inside a timed call
        names.append(str(link))
    return names
