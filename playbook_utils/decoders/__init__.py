"""One call over six decoder libraries: `read_frames(path, indices, backend=..., device=...)`.

Every backend returns a `torch.uint8` tensor shaped (N, 3, H, W), frames in the order asked
(repeats allowed), on the requested device. Before a library is called, the file is probed once
(`media.probe`, packets only) so that every backend gets the same checks:

* a missing, empty or unreadable file, or an index the file does not have -> `DecodeError`;
* a library, device or codec path that is not here -> `BackendUnavailable`;
* a file whose traits a library is known to get wrong (found by the correctness matrix,
  `playbook_utils.decoders.matrix`) -> `BackendUnavailable` naming the trait, never a wrong frame.

Libraries are imported only inside their adapter module, when first used. Introduced in 10-14
(SPDL, the sixth, in 24).
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path

from playbook_utils.errors import BackendUnavailable, DecodeError, first_line

BACKENDS = ("pyav", "decord", "torchcodec", "pynvvideocodec", "dali", "spdl")
CPU_THREADS = 0   # threads per decoder for PyAV and TorchCodec's CPU path; 0: the library's choice (every core)
_IMPORT_NAME = {"pyav": "av", "decord": "decord", "torchcodec": "torchcodec",
                "pynvvideocodec": "PyNvVideoCodec", "dali": "nvidia.dali", "spdl": "spdl.io"}


def _device_kind(device: str) -> str:
    if device == "cpu":
        return "cpu"
    if device == "cuda" or device.startswith("cuda:"):
        return "cuda"
    raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def set_cpu_threads(n: int) -> None:
    """How many threads each decoder of this process may use (PyAV, TorchCodec on the CPU; 0: the library's
    choice, as many as cores; decord keeps its own: a spawned decord worker with a set thread count once
    aborted at shutdown here). Loader workers that already run side by side set it so that
    workers x threads stays within the cores (`loaders.make_loader`; notebook 10 shows the cost)."""
    global CPU_THREADS
    CPU_THREADS = max(0, int(n))


def device_index(device: str) -> int:
    """The GPU ordinal of 'cuda' / 'cuda:N' (0 for plain 'cuda')."""
    return int(device.split(":")[1]) if ":" in device else 0


def adapter(backend: str):
    """The adapter module of `backend` (imports the module, not yet the library)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    return importlib.import_module(f"playbook_utils.decoders.{backend}")


PROBED_ENV = "PLAYBOOK_IMPORTS_PROBED"   # import names a parent process probed successfully (`child_env`)
_probed_ok: set[str] = set()


def _vouched() -> set[str]:
    """The import names a parent process passed on as probed (`child_env`)."""
    import os

    return set(filter(None, os.environ.get(PROBED_ENV, "").split(",")))


@lru_cache(maxsize=None)
def _importable(backend: str) -> tuple[bool, str | None]:
    from playbook_utils.env import probe_import

    name = _IMPORT_NAME[backend]
    if name in _vouched():   # a measuring child: its parent's probe stands
        return True, None
    info = probe_import(name)
    if info["importable"]:
        _probed_ok.add(name)
    return info["importable"], info["error"]


def child_env() -> dict:
    """os.environ plus the libraries this process has already seen import cleanly in a probe, for the child
    processes that measure one backend (bench jobs, notebook 21's loaders): they skip a second probe, which
    costs a Python start and the library's import (seconds per child on a GPU machine)."""
    import os

    return {**os.environ, PROBED_ENV: ",".join(sorted(_vouched() | _probed_ok))}


@lru_cache(maxsize=None)
def _cuda_ok() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def why_unavailable(backend: str, device: str = "cpu") -> str | None:
    """None when `backend` can decode on `device` here; otherwise the reason, in words."""
    kind = _device_kind(device)
    mod = adapter(backend)
    if kind not in mod.DEVICES:
        return f"{backend} has no {kind} path (it decodes on: {', '.join(mod.DEVICES)})"
    if kind == "cuda" and not _cuda_ok():
        return "torch sees no CUDA GPU"
    ok, err = _importable(backend)
    if not ok:
        return f"{_IMPORT_NAME[backend]} does not import: {err}"
    if hasattr(mod, "device_unavailable"):
        return mod.device_unavailable(kind)
    return None


def available(device: str = "cpu") -> list[str]:
    """The backends that can decode on `device` on this machine (import checked in a child process)."""
    return [b for b in BACKENDS if why_unavailable(b, device) is None]


@lru_cache(maxsize=256)
def _probe_cached(path: str, size: int, mtime_ns: int):
    from playbook_utils import media

    return media.probe(path)


def video_info(path):
    """`media.probe(path)`, cached while the file is unchanged (any input of `sources.resolve` too)."""
    from playbook_utils import sources

    if not sources.is_local(path):   # bytes, file-like objects, tar members, URLs (notebook 24)
        return sources.info(path)
    p = Path(path)
    if not p.exists():
        raise DecodeError(p, "file does not exist")
    st = p.stat()
    return _probe_cached(str(p), st.st_size, st.st_mtime_ns)


def check_indices(path, indices, num_frames: int, backend: str | None = None) -> list[int]:
    """`indices` as a list of ints, or `DecodeError` naming the first index the file does not have."""
    out = []
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, (int,)) and not hasattr(i, "__index__"):
            raise DecodeError(path, f"frame indices must be integers, got {i!r}", backend)
        i = int(i)
        if not 0 <= i < num_frames:
            raise DecodeError(path, f"frame index {i} is out of range: the video has {num_frames} frames "
                                    f"(0..{num_frames - 1})", backend)
        out.append(i)
    return out


def read_frames(path, indices, backend: str = "pyav", device: str = "cpu"):
    """Decode the frames `indices` of `path`; return uint8 (N, 3, H, W) on `device`.

    The tensor may be a view of channels-last memory (not `.is_contiguous()`), which saves a copy;
    call `.contiguous()` where a consumer needs it.

    Raises `DecodeError` (bad file, bad index) or `BackendUnavailable` (library, hardware or codec
    path missing, or a file trait this library is known to decode wrongly). Introduced in 10.
    `path` may also be bytes, a file-like object, a tar member or a URL: see `sources` (notebook 24).
    """
    from playbook_utils import sources

    if not sources.is_local(path):   # inputs beyond a local path: read there, with the same checks
        return sources.read_frames(path, indices, backend, device)
    kind = _device_kind(device)
    path = Path(path)
    mod = adapter(backend)
    why = why_unavailable(backend, device)
    if why:
        raise BackendUnavailable(path, why, backend)
    if path.exists() and path.stat().st_size == 0:
        raise DecodeError(path, "file is empty (0 bytes)", backend)
    try:
        info = video_info(path)
    except DecodeError as e:
        raise DecodeError(path, e.cause, backend) from e
    if info.b_frames and info.container == "avi":
        raise DecodeError(path, "AVI with B-frames stores no presentation timestamps, so no library can "
                                "locate a frame exactly; remux it to MP4 or MKV", backend)
    idx = check_indices(path, indices, info.num_frames, backend)
    why = _refuses(mod, info, kind)
    if why:
        raise BackendUnavailable(path, why, backend)
    if not idx:
        import torch

        return torch.empty((0, 3, info.height, info.width), dtype=torch.uint8, device=device)
    try:
        frames = mod.read(str(path), idx, device, info)
    except (DecodeError, BackendUnavailable):
        raise
    except Exception as e:  # a library's own exception becomes ours, with the cause kept
        msg = first_line(e, type(e).__name__)
        raise DecodeError(path, f"{type(e).__name__}: {msg[:300]}", backend) from e
    expected = (len(idx), 3, info.height, info.width)
    if tuple(frames.shape) != expected:
        raise DecodeError(path, f"library returned shape {tuple(frames.shape)}, expected {expected}", backend)
    return frames


def refusal(path, backend: str, device: str = "cpu") -> str | None:
    """Why `backend` on `device` would refuse `path` before decoding anything, or None (notebook 20).

    The same checks `read_frames` makes first: the library and device, then the file's traits
    this library is known to get wrong, then NVDEC's minimum sizes. A file that cannot be probed
    gives None here: `read_frames` reports it properly.
    """
    why = why_unavailable(backend, device)
    if why:
        return why
    try:
        info = video_info(path)
    except DecodeError:
        return None
    return _refuses(adapter(backend), info, _device_kind(device))


def _refuses(mod, info, kind: str) -> str | None:
    """The adapter's refusal of this file's traits, then (every GPU path decodes on NVDEC) NVDEC's size limits."""
    found = mod.refuses(info, kind) if hasattr(mod, "refuses") else None
    if kind == "cuda" and found is None:
        from playbook_utils.nvdec import too_small

        found = too_small(info.codec, info.width, info.height)
    return found


def reorder(unique_frames: dict, indices: list[int]):
    """Stack {index: (3, H, W) tensor} into the order of `indices`, repeats included."""
    import torch

    return torch.stack([unique_frames[i] for i in indices])
