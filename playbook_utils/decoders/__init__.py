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


def file_identity(path) -> tuple:
    """(device, inode, size, mtime, ctime in ns) of the file at `path`: the key of every cache that holds
    something read from a file (the probe here, TorchCodec's and PyNvVideoCodec's open decoders).

    Size and mtime alone miss a file replaced by another of the same size with its mtime kept
    (`rsync -a`, `cp -p` of a re-encoded file): moved into place (`os.replace`) it has another inode,
    written in place its ctime moves (setting the mtime back sets the ctime), so the cache re-opens it.
    Raises OSError when the file cannot be stat'ed.
    """
    import os

    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@lru_cache(maxsize=256)
def _probe_cached(path: str, identity: tuple, stream: int | None = None):
    from playbook_utils import media

    return media.probe(path, stream)


def video_info(path, backend: str | None = None, stream: int | None = None):
    """`media.probe(path, stream)`, cached while the file is the same one (`file_identity`); any input of
    `sources.resolve` too (bytes, file-like objects, tar members, URLs: notebook 24). A `DecodeError` names
    `backend`, the library the probe was made for (the probe itself reads with PyAV)."""
    from playbook_utils import sources

    if not sources.is_local(path):
        if stream is None:
            return sources.info(path)
        from playbook_utils import media

        return media.probe(sources.resolve(path), stream)
    p = Path(path)
    try:
        if not p.exists():
            raise DecodeError(p, "file does not exist")
        return _probe_cached(str(p), file_identity(p), stream)
    except DecodeError as e:
        if backend is None or e.backend == backend:
            raise
        raise DecodeError(p, e.cause, backend) from e


def check_indices(path, indices, num_frames: int, backend: str | None = None) -> list[int]:
    """`indices` as a list of ints.

    A malformed argument is the caller's mistake, named with the file: `TypeError` for a bare integer, a
    string, or an index that is not an integer (a float, a bool, a nested list); `ValueError` for an array
    of more than one dimension. An index the file does not have is a `DecodeError` naming the first one.
    """
    import operator

    where = f"{path} [{backend}]" if backend else str(path)
    ndim = getattr(indices, "ndim", None)
    if isinstance(indices, (str, bytes)) or ndim == 0 or not hasattr(indices, "__iter__"):
        raise TypeError(f"{where}: indices must be a sequence of frame indices, got {type(indices).__name__} "
                        f"{indices!r}; for one frame pass a list of one, e.g. [{indices!r}]")
    if ndim is not None and ndim != 1:
        raise ValueError(f"{where}: indices must be one-dimensional, got an array of shape "
                         f"{tuple(indices.shape)}; flatten it, or read each row separately")
    out = []
    for k, i in enumerate(indices):
        if isinstance(i, bool) or str(getattr(i, "dtype", "")) in ("bool", "torch.bool"):
            raise TypeError(f"{where}: frame indices must be integers, got the bool {i!r} at position {k}")
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"{where}: frame indices must be integers, got {type(i).__name__} {i!r} "
                            f"at position {k}") from None
        if not 0 <= i < num_frames:
            raise DecodeError(path, f"frame index {i} is out of range: the video has {num_frames} frames "
                                    f"(0..{num_frames - 1})", backend)
        out.append(i)
    return out


def read_frames(path, indices, backend: str = "pyav", device: str = "cpu", stream: int | None = None):
    """Decode the frames `indices` of `path`; return uint8 (N, 3, H, W) on `device`.

    Frames are what a player shows, the same from every backend: FFmpeg's best video stream (or the
    container's stream `stream`, ffprobe's numbering); frame 0 is the first frame shown (frames an MP4
    edit list hides are not counted); pictures turned as the display matrix says (a phone's portrait
    video comes back portrait, H > W; `frame_size`). The tensor may be a view of channels-last or
    turned memory (not `.is_contiguous()`), which saves a copy; call `.contiguous()` where a consumer
    needs it.

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
    info = video_info(path, backend, stream)
    if info.b_frames and info.container == "avi":
        raise DecodeError(path, "AVI with B-frames stores no presentation timestamps, so no library can "
                                "locate a frame exactly; remux it to MP4 or MKV", backend)
    idx = check_indices(path, indices, info.num_frames, backend)
    why = _refuses(mod, info, kind)
    if why:
        raise BackendUnavailable(path, why, backend)
    if not idx:
        import torch

        return torch.empty((0, 3, *frame_size(info)), dtype=torch.uint8, device=device)
    try:
        frames = mod.read(str(path), idx, device, info)
    except (DecodeError, BackendUnavailable):
        raise
    except Exception as e:  # a library's own exception becomes ours, with the cause kept
        msg = first_line(e, type(e).__name__)
        raise DecodeError(path, f"{type(e).__name__}: {msg[:300]}", backend) from e
    if info.rotation and not getattr(mod, "ROTATES", False):   # the library returns the picture as stored
        import torch

        frames = torch.rot90(frames, info.rotation // 90, dims=(-2, -1))
    expected = (len(idx), 3, *frame_size(info))
    if tuple(frames.shape) != expected:
        raise DecodeError(path, f"library returned shape {tuple(frames.shape)}, expected {expected}", backend)
    return frames


def frame_size(info) -> tuple[int, int]:
    """(H, W) of the frames `read_frames` returns for a file `video_info` described: as displayed, so a
    quarter turn (`info.rotation` 90 or 270) swaps the stored width and height."""
    return (info.width, info.height) if info.rotation in (90, 270) else (info.height, info.width)


def as_stored(frames, info):
    """Frames from `read_frames` turned back to the picture as stored (the orientation `media.read_stamp`
    reads): the inverse of the display rotation. Used by the correctness matrix and the tests."""
    import torch

    return torch.rot90(frames, -(info.rotation // 90), dims=(-2, -1)) if info.rotation else frames


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
    if found is None and info.stream != info.best_stream and not getattr(mod, "CHOOSES_STREAM", False):
        found = (f"{mod.__name__.rsplit('.', 1)[-1]} always decodes FFmpeg's best video stream "
                 f"({info.best_stream}); it cannot read stream {info.stream}")
    if kind == "cuda" and found is None:
        from playbook_utils.nvdec import too_small

        found = too_small(info.codec, info.width, info.height)
    return found


def reorder(unique_frames: dict, indices: list[int]):
    """Stack {index: (3, H, W) tensor} into the order of `indices`, repeats included."""
    import torch

    return torch.stack([unique_frames[i] for i in indices])
