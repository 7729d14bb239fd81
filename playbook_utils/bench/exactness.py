"""Did a backend return the frames it was asked for? (notebooks 20-22). Stamped clips are checked by their stamps;
other video against another CPU library's decode: frame i must be closest (luma PSNR) to reference frame i, not
its neighbours, and within AGREE_DB of it. `check_frames` never passes a frame it did not check."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from playbook_utils.decoders import by_role, read_frames, video_info, why_unavailable
from playbook_utils.bench.media import StampError, read_stamp

REFERENCE_BACKENDS = by_role("cpu_reference")  # CPU decoders, in the order they are tried
FLOOR_DB = 20.0  # below this PSNR against its own reference a frame is wrong whatever its neighbours say
NEIGHBOUR_DB = 0.5  # a frame this much closer to a neighbour than to its own reference is the neighbour
SAME_DB = 50.0  # reference neighbours this alike cannot be told apart (a still scene)
# At least this luma PSNR against the reference frame: the same picture, same matrix and range. Another chroma
# upsampling gives about 46-48 dB; a wrong range about 30 dB, a wrong matrix or the next frame about 24-25 dB.
AGREE_DB = 36.0


@dataclasses.dataclass
class FrameCheck:
    """The outcome of `check_frames`: how the frames were checked and what was found."""

    method: str  # 'stamp', 'reference:<backend>' or 'unchecked'
    exact: bool | None  # None only when no check could run ('unchecked'; `detail` says why)
    checked: int  # frames compared
    wrong: list[int]  # positions in the request whose frame is not the one asked for
    detail: str
    off_colour: list[int] = dataclasses.field(default_factory=list)  # the frame asked for, not the same pixels
    lowest_db: float | None = None  # lowest luma PSNR against the reference; None: identical, or no reference check

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _luma(frame):
    """(H, W) float32 luma of a uint8 (3, H, W) frame, numpy or torch on any device."""
    if hasattr(frame, "detach"):
        frame = frame.detach().cpu().numpy()
    a = np.asarray(frame, dtype=np.float32)
    if a.ndim == 3 and a.shape[0] == 3:
        return 0.299 * a[0] + 0.587 * a[1] + 0.114 * a[2]
    if a.ndim == 3 and a.shape[2] == 3:
        return 0.299 * a[..., 0] + 0.587 * a[..., 1] + 0.114 * a[..., 2]
    return a


def psnr(a, b) -> float:
    """PSNR in dB between two luma planes of the same shape (inf when identical)."""
    mse = float(np.mean((a - b) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def reference_backend(path, backend: str | None) -> str | None:
    """The CPU library that serves as the reference for `backend` on `path`: the first of
    REFERENCE_BACKENDS that is not `backend` and takes the file here; None when none does."""
    for b in REFERENCE_BACKENDS:
        if b != backend and why_unavailable(b, "cpu", path) is None:
            return b
    return None


def _positions(n: int, max_frames: int) -> list[int]:
    """At most `max_frames` positions of a request of n, spread evenly, first and last included."""
    if n <= max_frames:
        return list(range(n))
    return sorted({round(k * (n - 1) / (max_frames - 1)) for k in range(max_frames)})


def _by_stamp(indices, frames) -> FrameCheck:
    wrong, unreadable = [], 0
    for pos, (want, frame) in enumerate(zip(indices, frames)):
        try:
            if read_stamp(frame) != want:
                wrong.append(pos)
        except StampError:
            unreadable += 1
            wrong.append(pos)
    detail = f"{len(indices) - len(wrong)} of {len(indices)} stamps match"
    if unreadable:
        detail += f"; {unreadable} frame(s) carry no readable stamp"
    return FrameCheck("stamp", not wrong, len(indices), wrong, detail)


_REFERENCES: dict = {}  # (file, size, mtime, library, indices) -> {index: luma}, the last few decoded (`_reference_lumas`)
KEEP_REFERENCES = 4


def _reference_lumas(path, needed: list[int], ref: str) -> dict:
    """{index: luma} of `ref`'s CPU decode of `needed` frames of `path`. The last KEEP_REFERENCES decodes are kept,
    keyed by the file's identity (path, size, modification time) and the indices: notebook 20's child checks the
    same frames of a clip once per device, and decodes them once."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, ref, tuple(needed))
    if key not in _REFERENCES:
        _REFERENCES[key] = dict(zip(needed, (_luma(f) for f in read_frames(path, needed, ref, "cpu"))))
        while len(_REFERENCES) > KEEP_REFERENCES:
            _REFERENCES.pop(next(iter(_REFERENCES)))
    return _REFERENCES[key]


def _by_reference(path, indices, frames, ref: str, max_frames: int) -> FrameCheck:
    n = video_info(path).num_frames
    positions = _positions(len(indices), max_frames)
    needed = sorted({j for p in positions for j in (indices[p] - 1, indices[p], indices[p] + 1) if 0 <= j < n})
    refs = _reference_lumas(path, needed, ref)
    wrong, off_colour, alike, worst, sized = [], [], 0, float("inf"), []
    for p in positions:
        i = indices[p]
        got = _luma(frames[p])
        if got.shape != refs[i].shape:  # another picture size: not compared, and wrong
            wrong.append(p)
            sized.append((tuple(got.shape), tuple(refs[i].shape)))
            continue
        own = psnr(got, refs[i])
        worst = min(worst, own)
        near = [j for j in (i - 1, i + 1) if j in refs]
        if near and all(psnr(refs[i], refs[j]) >= SAME_DB for j in near):
            alike += 1
        closer = [j for j in near if psnr(got, refs[j]) > own + NEIGHBOUR_DB]
        if closer or own < FLOOR_DB:
            wrong.append(p)
        elif own < AGREE_DB:
            off_colour.append(p)
    lowest = f" (lowest PSNR {worst:.1f} dB)" if worst < float("inf") else "" if sized else " (identical pixels)"
    detail = (
        f"{len(positions) - len(wrong)} of {len(positions)} frames match {ref}'s decode of the same file best{lowest}"
    )
    if sized:
        detail += f"; {len(sized)} of another size: (H, W) {sized[0][0]}, the decode's {sized[0][1]}"
    if off_colour:
        detail += (
            f"; {len(off_colour)} of them are the frames asked for but not the same pixels (under {AGREE_DB:.0f} dB:"
            " another colour conversion, or another file's picture from a reused decoder)"
        )
    if len(positions) < len(indices):
        detail += f"; {len(positions)} of the {len(indices)} frames were compared, spread over the request"
    if alike:
        detail += f"; {alike} of them look like their neighbours (a still scene), so those cannot be told apart"
    lowest_db = None if worst == float("inf") else round(float(worst), 1)
    return FrameCheck(
        f"reference:{ref}", not (wrong or off_colour), len(positions), wrong, detail, off_colour, lowest_db
    )


def check_frames(path, indices, frames, backend: str | None = None, max_frames: int = 16) -> FrameCheck:
    """Check that `frames` (N, 3, H, W uint8, any device) are frames `indices` of `path`: by stamps, else against
    another CPU library's decode (`reference_backend`) on at most `max_frames` frames. Returns a `FrameCheck`;
    'unchecked' (exact None) where no reference library takes the file. Notebook 20."""
    indices = [int(i) for i in indices]
    if len(indices) != len(frames):
        said = f"asked for {len(indices)} frames, got {len(frames)}"
        return FrameCheck("count", False, 0, list(range(len(indices))), said)
    if not indices:
        return FrameCheck("stamp", True, 0, [], "nothing asked")
    try:
        read_stamp(frames[0])
        return _by_stamp(indices, frames)
    except StampError:
        pass
    ref = reference_backend(path, backend)
    if ref is None:
        why = f"no stamp in the frames, and no CPU library other than {backend} takes this file here"
        return FrameCheck("unchecked", None, 0, [], why)
    return _by_reference(path, indices, frames, ref, max_frames)
