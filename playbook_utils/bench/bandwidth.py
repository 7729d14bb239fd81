"""Two ceilings a video loader lives under, measured: storage read bandwidth (cold and warm) and host<->GPU
copies, pinned and pageable (notebook 00)."""

from __future__ import annotations

import mmap
import os
import tempfile
import time
from pathlib import Path

_BLOCK = 8 * 2**20


def _read_all(path: Path, direct: bool, limit: int | None = None) -> tuple[int, float]:
    """Read `path` in 8 MiB blocks, stopping at the end or once `limit` bytes are read; return (bytes, seconds)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    buf = mmap.mmap(-1, _BLOCK)  # page-aligned, as O_DIRECT requires
    total = 0
    try:
        start = time.perf_counter()
        while True:
            n = os.readv(fd, [buf])
            total += n
            if n < _BLOCK or (limit is not None and total >= limit):
                break
        return total, time.perf_counter() - start
    finally:
        os.close(fd)
        buf.close()


def _read_files(files: list[Path], direct: bool, limit: int) -> tuple[int, float, int]:
    """Read `files` in turn until `limit` bytes are read; return (bytes, seconds, files read)."""
    total, secs, count = 0, 0.0, 0
    for path in files:
        if total >= limit:
            break
        n, t = _read_all(path, direct, limit - total)
        total, secs, count = total + n, secs + t, count + 1
    return total, secs, count


def _measure(files: list[Path], limit: int) -> dict:
    """Cold then warm read rates of the first `limit` bytes of `files` (opened read-only, never written)."""
    try:
        nbytes, secs, count = _read_files(files, direct=True, limit=limit)
        method = "O_DIRECT (page cache bypassed)"
    except OSError:
        for path in files:  # drops cached pages only: the file itself is not touched
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        nbytes, secs, count = _read_files(files, direct=False, limit=limit)
        method = "buffered after POSIX_FADV_DONTNEED (O_DIRECT refused; may include cache hits)"
    _read_files(files, direct=False, limit=limit)  # fill the page cache
    wbytes, wsecs, _ = _read_files(files, direct=False, limit=limit)
    return {
        "cold_mb_s": round(nbytes / secs / 1e6, 1),
        "warm_mb_s": round(wbytes / wsecs / 1e6, 1),
        "cold_method": method,
        "read_mib": round(nbytes / 2**20, 1),
        "files": count,
    }


def storage_read_bandwidth(directory, size_mib: int = 256, files=None) -> dict:
    """Sequential read bandwidth (MB/s) of the disk holding `directory`, cold then warm: reads about `size_mib` of
    `files` read-only, or else of a scratch file written there and removed. Returns {'cold_mb_s', 'warm_mb_s', ...},
    or {'error': ...}. Notebooks 00 and 30."""
    out = {"directory": str(directory), "size_mib": size_mib}
    limit = max(1, size_mib) * 2**20
    if files is not None:
        files = [Path(f) for f in files]
        if not files:
            return {**out, "error": f"no video files to read in {directory}"}
        try:
            got = _measure(files, limit)
            return {**out, **got, "source": f"{got['files']} of your video files, read as they are"}
        except OSError as e:
            return {**out, "error": f"cannot read your files in {directory}: {e}"}
    try:
        scratch_dir = tempfile.TemporaryDirectory(prefix=".bw-probe-", dir=directory)
    except OSError as e:
        return {**out, "error": f"cannot write a scratch file in {directory}: {e}"}
    with scratch_dir as folder:
        path = Path(folder) / "scratch"
        try:
            chunk = os.urandom(_BLOCK)
            with open(path, "wb") as f:
                for at in range(0, limit, _BLOCK):
                    f.write(chunk[: limit - at])
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            return {**out, "error": f"cannot write a scratch file in {directory}: {e}"}
        return {**out, **_measure([path], limit), "source": "a scratch file (removed afterwards)"}


def copy_bandwidth(size_mib: int = 256, repeats: int = 10, device: str = "cuda") -> dict:
    """Host->device and device->host copy bandwidth in GB/s, pinned and pageable, timed with CUDA events. Returns
    {'h2d_pinned_gb_s', 'h2d_pageable_gb_s', 'd2h_pinned_gb_s', 'd2h_pageable_gb_s', 'size_mib'}, or {'error': ...}
    when torch sees no GPU. Notebook 00."""
    try:
        import torch
    except ImportError:
        return {"error": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"error": "torch sees no CUDA GPU"}
    n = size_mib * 2**20
    dev = torch.empty(n, dtype=torch.uint8, device=device)
    out = {"size_mib": size_mib}
    for pinned in (True, False):
        host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        host.fill_(1)
        for name, (dst, src) in (("h2d", (dev, host)), ("d2h", (host, dev))):
            dst.copy_(src, non_blocking=True)  # warm-up
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeats):
                dst.copy_(src, non_blocking=True)
            end.record()
            torch.cuda.synchronize()
            secs = start.elapsed_time(end) / 1e3
            out[f"{name}_{'pinned' if pinned else 'pageable'}_gb_s"] = round(n * repeats / secs / 1e9, 1)
    return out
