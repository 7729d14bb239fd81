"""What one sampled clip costs to read from object storage, in each access pattern (notebook 24)."""

from __future__ import annotations

import time

from playbook_utils import decoders, probe, sources
from playbook_utils.access import ByteIndex
from playbook_utils.decoders import why_unavailable
from playbook_utils.errors import BackendUnavailable


def measure_access(
    url: str,
    indices,
    backend: str = "pyav",
    index: ByteIndex | None = None,
    block_size: int | None = None,
    reference=None,
) -> list[dict]:
    """Read frames `indices` of the object at `url` in each access pattern (whole GET, range reads, range reads
    with stored info, keyframe index; the last two need `index`). Returns one row per pattern: requests, bytes,
    first-frame and clip seconds, 'identical' to `reference` when given. Notebook 24."""
    import torch

    why = why_unavailable(backend, "cpu")  # also pays the one-off import check before any clock starts
    if why:
        raise BackendUnavailable(url, why, backend)
    block = block_size or sources.DEFAULT_BLOCK
    patterns = {
        "whole object": lambda idx: (sources.UrlSource(url, "whole"), None),
        "range reads": lambda idx: (sources.UrlSource(url, "range", block), None),
    }
    if index is not None:
        patterns["range reads, stored info"] = lambda idx: (sources.UrlSource(url, "range", block), index.info)
        patterns["keyframe index"] = lambda idx: (
            sources.UrlSource(url, "range", block, plan=index.plan(idx)),
            index.info,
        )
    rows = []
    for name, make in patterns.items():
        times = {}
        for label, idx in (("first_frame_s", list(indices[:1])), ("clip_s", list(indices))):
            probe.forget()  # every pattern pays for its own probe, as a fresh reader would
            src, known = make(idx)
            t0 = time.perf_counter()
            got = decoders.read_source(src, idx, backend, info=known)
            times[label] = time.perf_counter() - t0
        row = {"access": name, "requests": got.requests, "bytes_fetched": got.bytes_fetched, "object_bytes": src.size}
        row.update(times, how=got.how)
        if reference is not None:
            row["identical"] = bool(torch.equal(got.frames.contiguous(), reference.contiguous()))
        rows.append(row)
    return rows


def choose_access(rows, backend: str, frames: int) -> tuple[str, dict, str | None]:
    """Pick an access pattern from `measure_access` rows: `backend`'s rows (else PyAV's), fewest bytes, then
    the soonest first frame within 5% of that. Returns (whose rows, {pattern: bytes per frame}, chosen or None).
    Notebook 24."""
    who = backend if any(r["backend"] == backend for r in rows) else "pyav"
    mine = [r for r in rows if r["backend"] == who]
    per_frame = {r["access"]: r["bytes_fetched"] / frames for r in mine}
    if not per_frame:
        return who, per_frame, None
    least = min(per_frame.values())
    near = [r for r in mine if r["bytes_fetched"] / frames <= 1.05 * least]
    return who, per_frame, min(near, key=lambda r: r["first_frame_s"])["access"]
