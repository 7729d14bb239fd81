"""Colour: what a file's tags say (Y'CbCr-to-R'G'B' matrix and range) and the conversion by them, in torch on any
device (notebook 20). An untagged file is read, on every path, as BT.601, limited range (FFmpeg's rule, `effective`)."""

from __future__ import annotations

__all__ = ["effective", "nv12_to_rgb", "reconvert", "rgb_to_yuv", "yuv_to_rgb"]

# Kr, Kb of each matrix (ITU-R BT.601, BT.709, BT.2020 non-constant luminance)
MATRICES = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593)}
# 8-bit code values of each range: (luma span, luma black, chroma span); chroma is centred on 128
RANGES = {"limited": (219.0, 16.0, 224.0), "full": (255.0, 0.0, 255.0)}


def effective(info) -> tuple[str, str]:
    """(matrix, range) a file (`probe.VideoInfo`) is read with: its tags (`color_matrix`, `color_range`), or
    FFmpeg's rule where it has none (BT.601, limited range)."""
    return info.color_matrix or "bt601", info.color_range or "limited"


def yuv_to_rgb(y, u, v, matrix: str = "bt601", colour_range: str = "limited", bits: int = 8):
    """R'G'B' uint8 (N, 3, H, W) from 4:2:0 (4:2:2, 4:4:4) Y'CbCr planes `y` (N, H, W), `u`, `v` (N, h, w) of `bits`
    bits, converted by `matrix` and `colour_range` on the planes' device. Introduced in notebook 20."""
    import torch
    import torch.nn.functional as F

    if matrix not in MATRICES:
        raise ValueError(f"unknown matrix {matrix!r}; choose from {', '.join(MATRICES)}")
    if colour_range not in RANGES:
        raise ValueError(f"colour_range must be 'limited' or 'full', got {colour_range!r}")
    kr, kb = MATRICES[matrix]
    kg = 1 - kr - kb
    scale = float(1 << (bits - 8))
    # R'G'B' x 255 = Y'' + C (Cb', Cr'): Y'' the luma scaled to 0-255, Cb' and Cr' the chroma code values less
    # their middle, C the matrix's chroma columns (R = Y + 2(1-Kr)Cr, B = Y + 2(1-Kb)Cb, G = (Y - Kr R - Kb B)/Kg)
    y_span, y_black, c_span = RANGES[colour_range]
    y_gain, y_off, c_gain = 255 / y_span, -y_black * 255 / y_span, 255 / c_span
    cr_r, cb_b = 2 * (1 - kr), 2 * (1 - kb)
    # at the chroma's size, by elementwise products: a matrix product (einsum) would run on cuBLAS, whose workspace
    # each decoding thread gets for itself and keeps
    g = c_gain / scale
    cb = u.to(torch.float32).sub_(128 * scale).mul_(g)  # (N, h, w)
    cr = v.to(torch.float32).sub_(128 * scale).mul_(g)
    rgb = torch.stack((cr * cr_r, cb * (-kb * cb_b / kg) + cr * (-kr * cr_r / kg), cb * cb_b), 1)
    if rgb.shape[-2:] != y.shape[-2:]:  # bilinear is linear: upsampling the chroma's terms = upsampling the chroma
        rgb = F.interpolate(rgb, size=tuple(y.shape[-2:]), mode="bilinear", align_corners=False)
    luma = y.to(torch.float32).mul_(y_gain / scale).add_(y_off)
    return rgb.add_(luma[:, None]).round_().clamp_(0, 255).to(torch.uint8)


def nv12_to_rgb(nv12, height: int, width: int, matrix: str = "bt601", colour_range: str = "limited"):
    """R'G'B' uint8 (N, 3, height, width) from NV12 pictures (N, rows, pitch) as a GPU decoder hands them out (the
    top-left `height` x `width` of the surface), converted by `yuv_to_rgb`. 8-bit only. Notebook 13."""
    if nv12.dim() == 4 and nv12.shape[-1] == 1:
        nv12 = nv12[..., 0]
    if nv12.dim() != 3:
        raise ValueError(f"NV12 pictures must be (N, rows, pitch), got shape {tuple(nv12.shape)}")
    rows, pitch = nv12.shape[1:]
    luma_rows = rows * 2 // 3
    if luma_rows * 3 != rows * 2 or luma_rows < height or pitch < width:
        raise ValueError(f"an NV12 surface of {rows} x {pitch} cannot hold a {height} x {width} picture")
    ch, cw = (height + 1) // 2, (width + 1) // 2
    y = nv12[:, :height, :width]
    uv = nv12[:, luma_rows : luma_rows + ch, : 2 * cw].reshape(nv12.shape[0], ch, cw, 2)
    return yuv_to_rgb(y, uv[..., 0], uv[..., 1], matrix, colour_range, 8)


def rgb_to_yuv(rgb, matrix: str = "bt601", colour_range: str = "limited"):
    """The inverse of `yuv_to_rgb` before its rounding: float32 Y', Cb, Cr code values (three (N, H, W) tensors, 8
    bits) of R'G'B' (N, 3, H, W) pictures converted by `matrix` and `colour_range`. What a decoder that hands out
    RGB by one fixed matrix started from, wherever its RGB was not clipped."""
    import torch

    kr, kb = MATRICES[matrix]
    r, g, b = rgb.to(torch.float32).div(255).unbind(1)
    y = kr * r + (1 - kr - kb) * g + kb * b
    cb, cr = (b - y) / (2 * (1 - kb)), (r - y) / (2 * (1 - kr))
    y_span, y_black, c_span = RANGES[colour_range]
    return y * y_span + y_black, cb * c_span + 128, cr * c_span + 128


def reconvert(rgb, decoded_as: tuple[str, str], wanted: tuple[str, str]):
    """R'G'B' uint8 (N, 3, H, W) a decoder converted by (matrix, range) `decoded_as`, converted again as `wanted`;
    exact but for rounding where the first conversion did not clip. `rgb` itself when the two are the same."""
    if tuple(decoded_as) == tuple(wanted):
        return rgb
    return yuv_to_rgb(*rgb_to_yuv(rgb, *decoded_as), *wanted)
