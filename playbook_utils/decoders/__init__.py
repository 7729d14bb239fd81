"""One call over six decoder libraries: `read_frames(path, indices, backend=..., device=...)` returns uint8 (N, 3, H,
W) on the device. Every backend goes through one checked sequence (`read`): a bad file or index raises `DecodeError`;
a missing library or device, or a file trait it gets wrong, `BackendUnavailable`. Notebooks 10-14, 24."""

from __future__ import annotations

import dataclasses
import time

from playbook_utils import probe, sources
from playbook_utils.decoders import base, dali, decord, pyav, pynvvideocodec, spdl, torchcodec
from playbook_utils.decoders.base import PROBED_ENV, child_env, file_identity, set_cpu_threads, trait_words, traits
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable, DecodeError, first_line

# The registry: backend name -> its adapter, in the order the notebooks introduce them.
ADAPTERS: dict[str, base.Adapter] = {
    a.NAME: a
    for a in (pyav.ADAPTER, decord.ADAPTER, torchcodec.ADAPTER, pynvvideocodec.ADAPTER, dali.ADAPTER, spdl.ADAPTER)
}
BACKENDS = tuple(ADAPTERS)

__all__ = [
    "ADAPTERS",
    "BACKENDS",
    "PROBED_ENV",
    "adapter",
    "as_stored",
    "available",
    "by_role",
    "check_indices",
    "check_libraries",
    "child_env",
    "file_identity",
    "frame_size",
    "read",
    "read_frames",
    "read_source",
    "reads_forward",
    "SourceRead",
    "set_cpu_threads",
    "trait_words",
    "traits",
    "video_info",
    "why_unavailable",
]


def adapter(backend: str) -> base.Adapter:
    """The adapter of `backend` (no library is imported by asking for it)."""
    try:
        return ADAPTERS[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}") from None


def by_role(role: str) -> tuple[str, ...]:
    """The backends whose adapters declare `role` (`base.ROLES` names them), lowest rank first: where the
    measurements pick libraries, so that a new backend takes its parts by its adapter alone."""
    if role not in base.ROLES:
        raise ValueError(f"unknown role {role!r}; choose from {', '.join(base.ROLES)}")
    return tuple(sorted((b for b, a in ADAPTERS.items() if role in a.ROLES), key=lambda b: ADAPTERS[b].ROLES[role]))


def why_unavailable(backend: str, device="cpu", path=None) -> str | None:
    """None when `backend` can decode on `device` here (and, given `path`, that file); else the reason in words: the
    checks `read_frames` makes before decoding. An unprobeable file gives None. Notebook 11 (the file's part in 20)."""
    ad = adapter(backend)
    why = ad.why_unavailable(device)
    if why is not None or path is None:
        return why
    try:
        info = video_info(path)
    except DecodeError:
        return None
    return ad.why_unavailable(device, info)


def reads_forward(backend: str, device="cpu", path=None) -> bool:
    """Whether `backend` reads `path` on `device` only by one forward pass from frame 0 (its seeks go wrong on such
    files: `Adapter.forward_only`); exact, but sparse reads cost more. Notebook 20 marks such rows."""
    try:
        return adapter(backend).forward_only(video_info(path), Device.parse(device).kind) is not None
    except DecodeError:
        return False


def check_libraries(backends=BACKENDS) -> None:
    """Check that each backend's library imports, all side by side (`base.check_imports`): before a loop that
    asks `why_unavailable` of every backend, so that their child processes overlap."""
    base.check_imports(adapter(b).IMPORT for b in backends)


def available(device="cpu") -> list[str]:
    """The backends that can decode on `device` on this machine (each import checked in a child process, all side
    by side: `check_libraries`)."""
    check_libraries()
    return [b for b in BACKENDS if why_unavailable(b, device) is None]


video_info = probe.video_info  # the one cached door to a file's metadata, for every kind of source (notebook 10)


def cut_note(missing: int) -> str:
    """What an error about a file cut short after its index adds (`VideoInfo.missing_frames`), '' for a whole one:
    the frames it still holds read, those near the cut may not (a B-frame waits for a later frame that is gone)."""
    if not missing:
        return ""
    return f"; its index lists {missing} more frames that the file does not hold: it is cut short (an interrupted copy or download?)"


def explained(cause: str, src, found, backend: str) -> str:
    """A failed read's `cause` with what it does not say: that the file is cut short (`cut_note`), or, first, that its
    picture size changes mid-stream (`base.size_change_why`), which some libraries fail on without saying so."""
    if "cut short" not in cause:
        cause += cut_note(found.missing_frames)
    why = src.kind == "path" and "size changes" not in cause and base.size_change_why(src.path, backend)
    return f"{why} (re-encode it at one size): {cause}" if why else cause


def check_indices(path, indices, num_frames: int, backend: str | None = None, missing: int = 0) -> list[int]:
    """`indices` as a list of ints. Raises `TypeError` or `ValueError` for a malformed argument, and `DecodeError`
    naming the file and the first index it does not have (and whether it is cut short)."""
    import operator

    where = f"{path} [{backend}]" if backend else str(path)
    ndim = getattr(indices, "ndim", None)
    if isinstance(indices, (str, bytes)) or ndim == 0 or not hasattr(indices, "__iter__"):
        raise TypeError(
            f"{where}: indices must be a sequence of frame indices, got {type(indices).__name__} "
            f"{indices!r}; for one frame pass a list of one, e.g. [{indices!r}]"
        )
    if ndim is not None and ndim != 1:
        raise ValueError(
            f"{where}: indices must be one-dimensional, got an array of shape "
            f"{tuple(indices.shape)}; flatten it, or read each row separately"
        )
    out = []
    for k, i in enumerate(indices):
        if isinstance(i, bool) or str(getattr(i, "dtype", "")) in ("bool", "torch.bool"):
            raise TypeError(f"{where}: frame indices must be integers, got the bool {i!r} at position {k}")
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(
                f"{where}: frame indices must be integers, got {type(i).__name__} {i!r} at position {k}"
            ) from None
        if not 0 <= i < num_frames:
            raise DecodeError(
                path,
                f"frame index {i} is out of range: the video has {num_frames} frames (0..{num_frames - 1})"
                + cut_note(missing),
                backend,
            )
        out.append(i)
    return out


def read_frames(path, indices, backend: str = "pyav", device: str = "cpu", stream: int | None = None):
    """Decode the frames `indices` of `path` (any `sources` input); return uint8 (N, 3, H, W) on `device`, upright,
    as a player shows them, from FFmpeg's best video stream or `stream`. May be non-contiguous. Raises `DecodeError`
    or `BackendUnavailable`. Notebook 10 (other sources in 24)."""
    return read(path, indices, backend, device, stream=stream).frames


@dataclasses.dataclass
class SourceRead:
    """What `read` returns: the frames, how the backend got the bytes, and what it cost (notebook 24)."""

    frames: object
    source: str
    backend: str
    how: str  # 'native' or 'spooled'
    requests: int
    bytes_fetched: int
    seconds: float
    first_byte_s: float | None


def read(
    source,
    indices,
    backend: str = "pyav",
    device: str = "cpu",
    stream: int | None = None,
    size=None,
    info=None,
    storage_options: dict | None = None,
    block_size: int = sources.DEFAULT_BLOCK,
    fetch: str = "range",
) -> SourceRead:
    """The one read sequence behind `read_frames`, `read_source`, `resize.read_resized` and the loaders: probe,
    checks, the library's call, rotation and shape check; returns a `SourceRead`. `size` (H, W): resized in the
    decoder; `info`: a known probe. Raises DecodeError / BackendUnavailable naming the source. Notebooks 10 and 24."""
    t0 = time.perf_counter()
    src = sources.resolve(source, storage_options, block_size, fetch)
    device = Device.parse(device)
    ad = adapter(backend)
    why = ad.why_unavailable(device)
    if why:
        raise BackendUnavailable(src.name, why, backend)
    if size is not None and (
        ad.read_resized is None or (ad.RESIZES_ON is not None and device.kind not in ad.RESIZES_ON)
    ):
        raise BackendUnavailable(
            src.name, f"{backend} cannot resize in its decoder on {device}; decode, then resize", backend
        )
    found = video_info(src, backend, stream) if info is None else info
    if found.unplaceable:
        raise DecodeError(src.name, found.unplaceable, backend)
    idx = check_indices(src.name, indices, found.num_frames, backend, found.missing_frames)
    why = ad.why_unavailable(device, found)
    if why:
        raise BackendUnavailable(src.name, why, backend)
    shown = tuple(size) if size is not None else frame_size(found)
    turn = found.rotation // 90 if found.rotation and not ad.ROTATES else 0  # the library gives the stored picture
    stored = shown[::-1] if turn % 2 else shown  # the size to ask the library for, before it is turned
    reader = ad.read_file if size is None else ad.read_resized
    native = src.kind == "path" or reader is not None
    how = "native" if native else "spooled"
    if not idx:
        import torch

        frames = torch.empty((0, 3, *shown), dtype=torch.uint8, device=str(device))
        return SourceRead(frames, src.name, backend, how, 0, 0, time.perf_counter() - t0, None)
    args = (idx, device, found) if size is None else (idx, device, found, stored)
    try:
        if src.kind == "path":
            frames = (ad.read if size is None else ad.read_resized)(src.path, *args)
        elif native:
            with src.open() as f:
                frames = reader(f, *args)
        else:  # spooled: only where size is None (every read_resized takes a file object)
            with src.local_path() as tmp:
                frames = ad.read(tmp, *args)
    except BackendUnavailable as e:
        if e.path == src.name:
            raise
        # named as the reader named it: an adapter that refuses at read time knows only what it was handed (a
        # spooled copy's temporary path, or none for bytes)
        raise BackendUnavailable(src.name, e.cause, e.backend or backend) from e
    except DecodeError as e:
        cause = explained(e.cause or "", src, found, backend)
        if cause == (e.cause or ""):
            raise
        raise DecodeError(e.path, cause, e.backend) from e
    except Exception as e:  # a library's own exception becomes ours, with the cause kept
        cause = f"{type(e).__name__}: {first_line(e, type(e).__name__)[:300]}"
        raise DecodeError(src.name, explained(cause, src, found, backend), backend) from e
    if turn:
        import torch

        frames = torch.rot90(frames, turn, dims=(-2, -1))
    expected = (len(idx), 3, *shown)
    if tuple(frames.shape) != expected:
        raise DecodeError(src.name, f"library returned shape {tuple(frames.shape)}, expected {expected}", backend)
    st = src.stats
    return SourceRead(
        frames, src.name, backend, how, st.requests, st.bytes_fetched, time.perf_counter() - t0, st.first_byte_s
    )


def read_source(source, indices, backend: str = "pyav", device: str = "cpu", **options) -> SourceRead:
    """`read` of any source with what it cost (`SourceRead`): how the backend got the bytes, the requests and
    bytes fetched, the seconds. `options`: `read`'s (storage_options, block_size, fetch, info, stream). Notebook
    24 measures access patterns with it."""
    return read(source, indices, backend, device, **options)


def frame_size(info) -> tuple[int, int]:
    """(H, W) of the frames `read_frames` returns for a file `video_info` described: as displayed, so a
    quarter turn (`info.rotation` 90 or 270) swaps the stored width and height."""
    return (info.width, info.height) if info.rotation in (90, 270) else (info.height, info.width)


def as_stored(frames, info):
    """Frames from `read_frames` turned back to the picture as stored (the orientation `media.read_stamp`
    reads): the inverse of the display rotation. Used by the correctness matrix and the tests."""
    import torch

    return torch.rot90(frames, -(info.rotation // 90), dims=(-2, -1)) if info.rotation else frames
