"""What one sampled clip costs to read from object storage, in each access pattern (notebook 24).

`measure_access` reads the same frames of one object as one whole GET, as ranged reads while the decoder seeks,
the same with the `VideoInfo` known, and with a keyframe index's plan fetched first (`access.ByteIndex`): the
requests, the bytes, and the time to the first frame and to the whole clip.
"""

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
    """Read frames `indices` of the object at `url` in each access pattern, each from a fresh start; one row each:
    {'access', 'requests', 'bytes_fetched', 'object_bytes', 'first_frame_s' (a fresh read of the first frame
    alone), 'clip_s' (all the frames), 'identical' (frames equal to `reference`, when given)}.

    'whole object': one GET, then probe and decode from memory. 'range reads': the probe and the decoder
    read through `sources.RangeFile` blocks. 'range reads, stored info': the same with the VideoInfo known
    (no probe). 'keyframe index': `index.plan` fetched first, then decoded, anything else on demand.
    The last two need `index` (`byte_index`). Introduced in notebook 24.
    """
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
        row = {
            "access": name,
            "requests": got.requests,
            "bytes_fetched": got.bytes_fetched,
            "object_bytes": src.size,
            **times,
            "how": got.how,
        }
        if reference is not None:
            row["identical"] = bool(torch.equal(got.frames.contiguous(), reference.contiguous()))
        rows.append(row)
    return rows


def choose_access(rows, backend: str, frames: int) -> tuple[str, dict, str | None]:
    """(whose rows decide, {access pattern: bytes fetched per frame}, the pattern chosen) over `measure_access`
    rows (each with its 'backend'): `backend`'s rows, or PyAV's where `backend` was not measured; the fewest
    bytes, then, among patterns within 5% of that, the first frame soonest. None chosen without rows (notebook 24)."""
    who = backend if any(r["backend"] == backend for r in rows) else "pyav"
    mine = [r for r in rows if r["backend"] == who]
    per_frame = {r["access"]: r["bytes_fetched"] / frames for r in mine}
    if not per_frame:
        return who, per_frame, None
    least = min(per_frame.values())
    near = [r for r in mine if r["bytes_fetched"] / frames <= 1.05 * least]
    return who, per_frame, min(near, key=lambda r: r["first_frame_s"])["access"]
