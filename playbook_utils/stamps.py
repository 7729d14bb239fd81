"""Frame stamps: each frame of the playbook's test media carries its index as a 16-bit code plus its complement
across the top of the picture (`media.make_clip` writes it); `read_stamp` reads it back after encoding, colour
conversion and resizing, or raises `StampError`. Notebook 01."""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_STAMP", "STAMP_BITS", "StampError", "read_stamp", "read_stamps"]

STAMP_BITS = 16
MAX_STAMP = (1 << STAMP_BITS) - 1
_BLACK, _WHITE = 16, 235  # limited-range luma


class StampError(ValueError):
    """A frame carries no valid index stamp (wrong frame content, rotation, heavy damage)."""


def _stamp_cells(height: int, width: int):
    """Cell grid of the stamp: (cell_h, cell_w), two rows of STAMP_BITS cells from the top left."""
    return max(2, (height // 12) // 2 * 2), max(2, (width // STAMP_BITS) // 2 * 2)


def _stamp_luma(y: np.ndarray, index: int) -> None:
    """Draw the stamp of `index` into the luma plane `y` (H, W) in place."""
    if not 0 <= index <= MAX_STAMP:
        raise ValueError(f"frame index {index} does not fit in a {STAMP_BITS}-bit stamp")
    h, w = y.shape
    ch, cw = _stamp_cells(h, w)
    bits = [(index >> (STAMP_BITS - 1 - b)) & 1 for b in range(STAMP_BITS)]
    for row, row_bits in enumerate((bits, [1 - b for b in bits])):
        for b, bit in enumerate(row_bits):
            y[row * ch : (row + 1) * ch, b * cw : (b + 1) * cw] = _WHITE if bit else _BLACK


def _layout(frame) -> tuple[int, int, bool]:
    """(H, W, channels first) of a frame: HWC or CHW RGB, or (H, W) gray."""
    shape = tuple(frame.shape)
    if len(shape) not in (2, 3):
        raise StampError(f"expected an (H, W), (H, W, 3) or (3, H, W) frame, got shape {shape}")
    chw = len(shape) == 3 and shape[0] == 3 and shape[2] != 3
    return (shape[1], shape[2], True) if chw else (shape[0], shape[1], False)


def _to_luma(frame, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    """A float (H, W) luma plane from a frame in any layout `_layout` takes; numpy or torch. `rows` and `cols`: only
    the top-left rows x cols, cut before the copy from the GPU and the conversion."""
    shape, chw = tuple(frame.shape), _layout(frame)[2]
    frame = frame[((slice(None),) if chw else ()) + (slice(0, rows), slice(0, cols))]
    if hasattr(frame, "detach"):  # a torch tensor, possibly on the GPU
        frame = frame.detach().cpu().numpy()
    a = np.asarray(frame)
    if a.ndim == 2:
        return a.astype(np.float32)
    if chw:
        a = np.moveaxis(a, 0, -1)
    if a.shape[2] != 3:
        raise StampError(f"expected 3 colour channels, got shape {shape}")
    a = a.astype(np.float32)
    return 0.299 * a[..., 0] + 0.587 * a[..., 1] + 0.114 * a[..., 2]


def read_stamp(frame) -> int:
    """Return the frame index `make_clip` stamped into `frame`: RGB (H, W, 3) or (3, H, W) or luma (H, W), numpy or
    torch on any device, any resolution. Raises `StampError` when the code fails its complement check. Notebook 01."""
    ch, cw = _stamp_cells(*_layout(frame)[:2])
    y = _to_luma(frame, 2 * ch, STAMP_BITS * cw)  # the two rows of cells only
    # Sample the middle half of each cell: robust to ringing at cell edges and to resizing.
    means = np.empty((2, STAMP_BITS), dtype=np.float32)
    for row in range(2):
        y0, y1 = row * ch + ch // 4, row * ch + max(ch // 4 + 1, 3 * ch // 4)
        for b in range(STAMP_BITS):
            x0, x1 = b * cw + cw // 4, b * cw + max(cw // 4 + 1, 3 * cw // 4)
            means[row, b] = y[y0:y1, x0:x1].mean()
    lo, hi = float(means.min()), float(means.max())
    if hi - lo < 60:
        raise StampError(f"no frame stamp: the stamp cells have too little contrast ({lo:.0f}..{hi:.0f})")
    bits = means > (lo + hi) / 2
    if not np.all(bits[0] != bits[1]):
        bad = int(np.sum(bits[0] == bits[1]))
        raise StampError(f"no valid frame stamp: {bad} of {STAMP_BITS} bits fail the complement check")
    return int(sum(int(bit) << (STAMP_BITS - 1 - i) for i, bit in enumerate(bits[0])))


def read_stamps(frames) -> list[int | None]:
    """Return the stamped index of each frame of `frames` (a batch in any layout `read_stamp` takes, or a
    list of frames; any device), with None for a frame that carries no valid stamp. Introduced in notebook 01;
    every notebook checks its frames with it (`kit.Notebook.check`)."""
    got = []
    for frame in frames:
        try:
            got.append(read_stamp(frame))
        except StampError:
            got.append(None)
    return got
