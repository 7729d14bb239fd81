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

import time


def resize_uint8(frames, size):
    """uint8 (N, 3, H, W) -> uint8 (N, 3, *size) by bilinear, antialiased interpolation, on the frames' device
    (the decode-then-resize reference of notebook 24; `loaders.VideoClipDataset` resizes the same way)."""
    import torch
    import torch.nn.functional as F

    x = F.interpolate(frames.float(), size=tuple(size), mode="bilinear", antialias=True)
    return x.round_().clamp_(0, 255).to(torch.uint8)


def psnr(a, b) -> float:
    """Peak signal-to-noise ratio (dB) of two uint8 tensors of one shape; inf when they are equal."""
    import math

    import torch

    mse = torch.mean((a.float().cpu() - b.float().cpu()) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def can_resize_in_decoder(backend: str, device: str = "cpu") -> bool:
    """Whether `backend`'s adapter decodes straight to a size (`read_resized`) on `device`; see the module's
    table. An adapter may resize on some devices only (`RESIZES_ON`)."""
    from playbook_utils.decoders import adapter
    from playbook_utils.device import Device

    ad = adapter(backend)
    return ad.read_resized is not None and (ad.RESIZES_ON is None or Device.parse(device).kind in ad.RESIZES_ON)


def read_resized(source, indices, size, backend: str = "torchcodec", device: str = "cpu"):
    """Frames `indices` of `source` (a path or any input of `sources.resolve`) as uint8 (N, 3, *size) on
    `device`, resized inside the decoder: `decoders.read` with `size`, the same checks as `read_frames`. Raises
    BackendUnavailable for a backend that cannot (decord, PyNvVideoCodec: decode, then `resize_uint8`).
    Introduced in notebook 24."""
    from playbook_utils import decoders

    return decoders.read(source, indices, backend, device, size=tuple(size)).frames


def _peak(device: str, fn):
    """(result, seconds, peak bytes allocated on the GPU during fn, or None on the CPU)."""
    import torch

    from playbook_utils.device import Device

    cuda = Device.parse(device).is_cuda
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    t0 = time.perf_counter()
    out = fn()
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(device) - base if cuda else None
    return out, seconds, peak


def compare(path, indices, size, backend: str = "torchcodec", device: str = "cpu", repeats: int = 3) -> list[dict]:
    """Decoder-side resize against decode-then-resize for one backend on one clip (notebook 24).

    Returns two rows {'backend', 'device', 'method' ('in decoder' / 'decode, then resize'), 'frames_per_s'
    (best of `repeats`), 'batch_bytes' (on the GPU: the peak memory the read allocated; on the CPU: the
    bytes of the tensors the path makes, from their shapes: full-size uint8 frames, their float copy and
    the result for decode-then-resize; the result alone in the decoder), 'psnr_db' (against the CPU
    reference: PyAV at full size, then `resize_uint8`)}. The decoder-side row is left out where the
    backend cannot resize in its decoder.
    """
    from playbook_utils.decoders import read_frames

    size = tuple(size)
    ref = resize_uint8(read_frames(path, indices, "pyav", "cpu"), size)
    n = len(indices)
    rows = []
    ways = {"decode, then resize": lambda: resize_uint8(read_frames(path, indices, backend, device), size)}
    if can_resize_in_decoder(backend, device):
        ways["in decoder"] = lambda: read_resized(path, indices, size, backend, device)
    for method, fn in ways.items():
        best, out, peak = None, None, None
        for _ in range(max(1, repeats)):
            out, seconds, p = _peak(device, fn)
            best = seconds if best is None else min(best, seconds)
            peak = p if peak is None else max(peak, p or 0)
        if peak is None:  # CPU: the tensors this path makes, from their shapes
            from playbook_utils.decoders import video_info

            info = video_info(path)
            full = n * 3 * info.height * info.width
            small = n * 3 * size[0] * size[1]
            peak = full + 4 * full + small if method == "decode, then resize" else small
        rows.append(
            {
                "backend": backend,
                "device": device,
                "method": method,
                "frames_per_s": n / best,
                "batch_bytes": int(peak),
                "psnr_db": psnr(out, ref),
                "shape": list(out.shape),
            }
        )
    return rows
