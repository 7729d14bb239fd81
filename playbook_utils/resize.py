"""Resizing decoded frames, and decoding straight to the size a model wants (notebook 24): `read_resized` resizes
inside the decoder where the library can (`can_resize_in_decoder`); `resize_uint8` is the decode-then-resize
reference (torch, bilinear, antialiased); `psnr` compares the two."""

from __future__ import annotations

from playbook_utils import decoders
from playbook_utils.decoders import adapter
from playbook_utils.device import Device

__all__ = ["can_resize_in_decoder", "psnr", "read_resized", "resize_uint8"]


RESIZE_CHUNK_BYTES = 64 * 2**20  # float32 working memory of one resize step: a few frames at a time, not the clip


def resize_uint8(frames, size):
    """uint8 (N, 3, H, W) -> uint8 (N, 3, *size) by bilinear, antialiased interpolation on the frames' device, a few
    frames at a time (`RESIZE_CHUNK_BYTES`). The reference of notebook 24 and the loaders' resize."""
    import torch
    import torch.nn.functional as F

    n, c, h, w = frames.shape
    out = torch.empty((n, c, *size), dtype=torch.uint8, device=frames.device)
    step = max(1, RESIZE_CHUNK_BYTES // max(1, c * h * w * 4))
    for i in range(0, n, step):
        x = F.interpolate(frames[i : i + step].float(), size=tuple(size), mode="bilinear", antialias=True)
        out[i : i + step] = x.round_().clamp_(0, 255)
    return out


def psnr(a, b) -> float:
    """Peak signal-to-noise ratio (dB) of two uint8 tensors of one shape; inf when they are equal."""
    import math

    import torch

    mse = torch.mean((a.float().cpu() - b.float().cpu()) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def can_resize_in_decoder(backend: str, device: str = "cpu") -> bool:
    """Whether `backend`'s adapter decodes straight to a size (`read_resized`) on `device` (`RESIZES_ON`)."""
    ad = adapter(backend)
    return ad.read_resized is not None and (ad.RESIZES_ON is None or Device.parse(device).kind in ad.RESIZES_ON)


def read_resized(source, indices, size, backend: str = "torchcodec", device: str = "cpu"):
    """Frames `indices` of `source` as uint8 (N, 3, *size) on `device`, resized inside the decoder, with `read_frames`'
    checks. Raises BackendUnavailable for a backend that cannot (decord, PyNvVideoCodec). Introduced in notebook 24."""
    return decoders.read(source, indices, backend, device, size=tuple(size)).frames
