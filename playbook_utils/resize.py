"""Resizing decoded frames, and decoding straight to the size a model wants (notebook 24).

`resize_uint8` is the reference: decode at full size, then resize with torch (bilinear, antialiased).
"""

from __future__ import annotations


def resize_uint8(frames, size):
    """uint8 (N, 3, H, W) -> uint8 (N, 3, *size) by bilinear, antialiased interpolation, on the frames' device
    (the decode-then-resize reference of notebook 24; `loaders.VideoClipDataset` resizes the same way)."""
    import torch
    import torch.nn.functional as F

    x = F.interpolate(frames.float(), size=tuple(size), mode="bilinear", antialias=True)
    return x.round_().clamp_(0, 255).to(torch.uint8)
