"""Decoder-side resize against decode-then-resize, measured: speed, memory per batch and agreement with a
reference resize (notebook 24). The resizing itself is `playbook_utils.resize`; this module only measures it."""

from __future__ import annotations

import time

from playbook_utils.bench import verdicts
from playbook_utils.decoders import read_frames, video_info
from playbook_utils.device import Device
from playbook_utils.resize import can_resize_in_decoder, psnr, read_resized, resize_uint8


def _peak(device: str, fn):
    """(result, seconds, peak bytes allocated on the GPU during fn, or None on the CPU)."""
    import torch

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
    """Decoder-side resize against decode-then-resize for one backend on one clip (notebook 24). Returns a row per
    method: {'method', 'frames_per_s' (best of `repeats`), 'spread_pct', 'batch_bytes' (GPU peak, or CPU tensor sizes),
    'psnr_db' (against PyAV then `resize_uint8`), ...}; no decoder row where the backend cannot resize in it."""
    size = tuple(size)
    ref = resize_uint8(read_frames(path, indices, "pyav", "cpu"), size)
    n = len(indices)
    rows = []
    ways = {"decode, then resize": lambda: resize_uint8(read_frames(path, indices, backend, device), size)}
    if can_resize_in_decoder(backend, device):
        ways["in decoder"] = lambda: read_resized(path, indices, size, backend, device)
    for method, fn in ways.items():
        times, out, peak = [], None, None
        for _ in range(max(1, repeats)):
            out, seconds, p = _peak(device, fn)
            times.append(seconds)
            peak = p if peak is None else max(peak, p or 0)
        if peak is None:  # CPU: the tensors this path makes, from their shapes
            info = video_info(path)
            full = n * 3 * info.height * info.width
            small = n * 3 * size[0] * size[1]
            peak = full + 4 * full + small if method == "decode, then resize" else small
        rows.append(
            {
                "backend": backend,
                "device": device,
                "method": method,
                "frames_per_s": n / min(times),
                "spread_pct": verdicts.spread_pct([n / t for t in times]),
                "batch_bytes": int(peak),
                "psnr_db": psnr(out, ref),
                "shape": list(out.shape),
            }
        )
    return rows


def resize_advice(rows: list[dict], decoders: list[str], device: str = "cpu") -> str:
    """Where to resize for the decoder chosen on `device` (`decoders`: the choice first, then those tied with it):
    in its decoder where that is faster beyond the spread, else after decoding, naming any tied decoder that gains
    by resizing in its decoder. Notebook 24."""
    methods: dict = {}
    for r in rows:
        if r["device"] == device:
            methods.setdefault(r["backend"], {})[r["method"]] = r
    pairs = {b: (m["in decoder"], m["decode, then resize"]) for b, m in methods.items() if len(m) == 2}
    ranks = {
        b: verdicts.rank([(label, r["frames_per_s"], r.get("spread_pct")) for label, r in zip(("in", "after"), pair)])
        for b, pair in pairs.items()
    }
    gain = {b for b, v in ranks.items() if v.best == "in" and not v.tied}  # faster beyond the spread

    def ratio(b):
        inside, after = pairs[b]
        return inside["frames_per_s"] / after["frames_per_s"]

    first, others = decoders[0], [b for b in decoders[1:] if b in gain]
    if first in gain:
        return f"resize in {first}'s decoder: {ratio(first):.2f}x the frames/s of decoding, then resizing, beyond the spread"
    v = ranks.get(first)
    said = f"with {first}, resize after decoding: its resize in the decoder " + (
        f"ran {ratio(first):.2f}x, " + ("no gain beyond the spread" if v.tied else "slower beyond the spread")
        if v is not None
        else "is not offered by its adapter"
        if not can_resize_in_decoder(first, device)
        else "was not measured here"
    )
    if others:
        gains = ", ".join(f"{b} {ratio(b):.2f}x" for b in others)
        said += (
            f"; {' and '.join(others)}, tied with it for decoding, gain{'s' if len(others) == 1 else ''} by resizing "
            f"in the decoder ({gains}): where you resize, take {others[0] if len(others) == 1 else 'one of them'} "
            "instead"
        )
    return said
