"""From decoded frames to what a vision-language model eats (notebooks 10-14, 21): decoders return uint8
(N, 3, H, W); a model wants float (N, 3, S, S), resized and normalized, on the GPU. Doing that on the GPU after the
copy moves 4x fewer bytes than normalizing first."""

from __future__ import annotations

__all__ = ["CLIP_MEAN", "CLIP_STD", "to_model_batch"]

# CLIP's statistics, used by most VLM vision towers (SigLIP uses 0.5 / 0.5).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def to_model_batch(frames, size: int | tuple[int, int] = 224, mean=CLIP_MEAN, std=CLIP_STD, device=None, dtype=None):
    """uint8 (N, 3, H, W) frames -> normalized float (N, 3, size, size) of `dtype` (default float32) on `device`:
    the uint8 frames move first (a quarter of the bytes), then are resized with antialiasing and normalized there."""
    import torch
    import torch.nn.functional as F

    if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[1] != 3:
        raise ValueError(f"expected uint8 (N, 3, H, W) frames, got {frames.dtype} {tuple(frames.shape)}")
    device = frames.device if device is None else torch.device(device)
    dtype = dtype or torch.float32
    x = frames.to(device, non_blocking=True).to(torch.float32).div_(255)
    size = (size, size) if isinstance(size, int) else tuple(size)
    x = F.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=False)
    m = torch.tensor(mean, device=device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=device).view(1, 3, 1, 1)
    return ((x - m) / s).to(dtype)
