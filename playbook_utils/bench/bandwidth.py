"""Two ceilings a video loader lives under: storage read bandwidth and host<->GPU copies (notebook 00).

Both are measured, never looked up. Storage is read cold where the filesystem allows
O_DIRECT (the page cache bypassed) and warm from the page cache; copies are timed with CUDA
events for pinned and pageable host memory.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import time
from pathlib import Path

_BLOCK = 8 * 2**20


def _read_all(path: Path, direct: bool) -> tuple[int, float]:
    """Read `path` in 8 MiB blocks; return (bytes, seconds)."""
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, _BLOCK)  # page-aligned, as O_DIRECT requires
    total = 0
    try:
        start = time.perf_counter()
        while True:
            n = os.readv(fd, [buf])
            total += n
            if n < _BLOCK:
                break
        return total, time.perf_counter() - start
    finally:
        os.close(fd)
        buf.close()


def storage_read_bandwidth(directory, size_mib: int = 256) -> dict:
    """Measure sequential read bandwidth of the disk holding `directory`, in MB/s.

    Writes a scratch file of incompressible bytes there, reads it cold (O_DIRECT, or after
    dropping it from the page cache where O_DIRECT is refused) and then warm, and deletes it.
    Returns {'cold_mb_s', 'warm_mb_s', 'size_mib', 'cold_method', 'directory'}; where the
    directory is not writable, {'error': ...}.
    """
    directory = Path(directory)
    out = {"directory": str(directory), "size_mib": size_mib}
    try:
        fd, name = tempfile.mkstemp(prefix=".bw-probe-", dir=directory)
    except OSError as e:
        return {**out, "error": f"cannot write a scratch file in {directory}: {e}"}
    path = Path(name)
    try:
        chunk = os.urandom(_BLOCK)
        with os.fdopen(fd, "wb") as f:
            for _ in range(max(1, size_mib * 2**20 // _BLOCK)):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        try:
            nbytes, secs = _read_all(path, direct=True)
            method = "O_DIRECT (page cache bypassed)"
        except OSError:
            fd2 = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd2, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd2)
            nbytes, secs = _read_all(path, direct=False)
            method = "buffered after POSIX_FADV_DONTNEED (O_DIRECT refused; may include cache hits)"
        _read_all(path, direct=False)  # fill the page cache
        wbytes, wsecs = _read_all(path, direct=False)
        return {
            **out,
            "cold_mb_s": round(nbytes / secs / 1e6, 1),
            "warm_mb_s": round(wbytes / wsecs / 1e6, 1),
            "cold_method": method,
        }
    finally:
        path.unlink(missing_ok=True)


def copy_bandwidth(size_mib: int = 256, repeats: int = 10, device: str = "cuda") -> dict:
    """Host->device and device->host copy bandwidth in GB/s, pinned and pageable, timed with CUDA events.

    Returns {'h2d_pinned_gb_s', 'h2d_pageable_gb_s', 'd2h_pinned_gb_s', 'd2h_pageable_gb_s', 'size_mib'},
    or {'error': ...} when torch sees no GPU.
    """
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
        for name, copy in (
            ("h2d", lambda: dev.copy_(host, non_blocking=True)),
            ("d2h", lambda: host.copy_(dev, non_blocking=True)),
        ):
            copy()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeats):
                copy()
            end.record()
            torch.cuda.synchronize()
            secs = start.elapsed_time(end) / 1e3
            out[f"{name}_{'pinned' if pinned else 'pageable'}_gb_s"] = round(n * repeats / secs / 1e9, 1)
    return out
