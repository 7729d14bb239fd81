"""Resizing decoded frames, and decoding straight to the size a model wants (notebook 24).

A VLM takes frames of a few hundred pixels a side (`sampling.vlm_frame_size`); decoding 1080p to RGB and
then resizing makes, moves and reads a full-size frame that nobody uses. Where the library can, resize
in the decoder instead (`read_resized`):

==============  ======================================================================================
pyav            swscale converts YUV to RGB and scales (bilinear) in one pass: `frame.to_ndarray(width=, height=)`
torchcodec      `VideoDecoder(..., transforms=[torchcodec.transforms.Resize((h, w))])` (0.13+; CPU only: 0.17 on CUDA
                says "Transforms are only supported for CPU devices")
dali            `fn.resize` after `fn.decoders.video` in the same pipeline (GPU with device='cuda')
spdl            FFmpeg's scale filter on the CPU; NVDEC's own output scaling on the GPU (scale_width/height)
decord          no resize in the decoder here (its VideoReader's width/height re-open the file per reader)
pynvvideocodec  SimpleDecoder has no output size: decode, then resize on the GPU
==============  ======================================================================================

`resize_uint8` is the reference: decode at full size, then resize with torch (bilinear, antialiased).
`compare` measures both on one clip: frames/s, bytes held per batch, PSNR against that reference.
"""

from __future__ import annotations

from playbook_utils import decoders
from playbook_utils.decoders import adapter
from playbook_utils.device import Device

__all__ = ["can_resize_in_decoder", "psnr", "read_resized", "resize_uint8"]


RESIZE_CHUNK_BYTES = 64 * 2**20  # float32 working memory of one resize step: a few frames at a time, not the clip


def resize_uint8(frames, size):
    """uint8 (N, 3, H, W) -> uint8 (N, 3, *size) by bilinear, antialiased interpolation, on the frames' device
    (the decode-then-resize reference of notebook 24; the loaders' and shards' one resize). The float32 copy is
    made a few frames at a time (`RESIZE_CHUNK_BYTES`, at least one frame): 8 frames of 4096 x 4096 took 2.3 GB
    at once. Each frame is resized on its own either way, so the result is the same to the bit."""
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
    """Whether `backend`'s adapter decodes straight to a size (`read_resized`) on `device`; see the module's
    table. An adapter may resize on some devices only (`RESIZES_ON`)."""
    ad = adapter(backend)
    return ad.read_resized is not None and (ad.RESIZES_ON is None or Device.parse(device).kind in ad.RESIZES_ON)


def read_resized(source, indices, size, backend: str = "torchcodec", device: str = "cpu"):
    """Frames `indices` of `source` (a path or any input of `sources.resolve`) as uint8 (N, 3, *size) on
    `device`, resized inside the decoder: `decoders.read` with `size`, the same checks as `read_frames`. Raises
    BackendUnavailable for a backend that cannot (decord, PyNvVideoCodec: decode, then `resize_uint8`).
    Introduced in notebook 24."""
    return decoders.read(source, indices, backend, device, size=tuple(size)).frames
