"""SPDL adapter: Meta's thread-based data-loading library, FFmpeg on the CPU or NVDEC on CUDA (notebook 24). The CPU
path decodes only the GOPs holding the frames asked for; the CUDA path decodes one window per GOP to NV12, converted
by the file's matrix and range. SPDL takes a path or bytes: `read_file` hands it the bytes."""

from __future__ import annotations

from functools import lru_cache

from playbook_utils import child, colour
from playbook_utils.decoders import base
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable, describe

__all__ = ["ADAPTER", "Spdl"]

_EXT = {"cpu": "_libspdl", "cuda": "_libspdl_cuda"}


class Spdl(base.Adapter):
    NAME, IMPORT, DISTRIBUTION = "spdl", "spdl.io", "spdl-io"
    DEVICES = ("cpu", "cuda")
    HANDOVER = {"cpu": "spdl_clips"}
    ROLES = {"simpler": 2, "cpu_anchor": 3, "cpu_sweep": 3}
    # SPDL 0.8's NVDEC path fails MPEG-4 Part 2 and AV1 with "NOT IMPLEMENTED." (its decoder.cpp): only the codecs
    # below are taken
    CODECS = {"cuda": ("h264", "hevc", "vp8", "vp9", "mpeg1video", "mpeg2video")}
    KNOWN_WRONG = (
        *base.nv12_path_refusals(),
        base.known_wrong(
            "edit-list",
            "SPDL 0.8 returned other frames than a player shows on an MP4 whose edit list hides its first frames "
            "(the CPU path, H.264: asked 47, got 41): it counts the hidden frames",
            seen="0.8.0",
        ),
        # not a wrong frame but an output SPDL cannot make: a valid file, so BackendUnavailable (refused, with the
        # reason), which a skip policy does not count as damage
        base.known_wrong(
            "10-bit",
            "SPDL 0.8's NVDEC path outputs NV12 (8-bit) only: a 10-bit file is refused on CUDA (on the H200: "
            "'Only NV12 output is supported. Found: P016'); its CPU path reads it",
            devices=("cuda",),
            seen="0.8.0",
        ),
    )

    def _check_device(self, kind: str) -> str | None:
        """Whether spdl-io's FFmpeg (CPU) or CUDA extension loads, checked in a child process so that a failed
        load leaves this process clean."""
        # dir() loads the lazily imported extension
        found = child.call(
            child.python(
                "-c",
                f"import json; from spdl.io.lib import {_EXT[kind]} as m; dir(m); "
                "print(json.dumps({'status': 'ok'}))",
            ),
            timeout=180,
        )
        if found["status"] == "ok":
            return None
        what = "FFmpeg shared libraries (4 to 9; apt-get install ffmpeg)" if kind == "cpu" else "CUDA extension"
        return f"spdl-io's {what} did not load: {found['error'][:240]}"

    def read(self, source, indices: list[int], device: Device, info):
        """`source`: a path, or an open binary file object whose bytes SPDL demuxes in memory (`read_file`, notebook
        24)."""
        return _read(source, indices, device, info)

    read_file = read

    def read_resized(self, source, indices: list[int], device: Device, info, size):
        """`read` at `size` (H, W): FFmpeg's scale filter (bilinear) on the CPU, NVDEC's output scaling on CUDA.
        `source`: a path or an open binary file object (notebook 24)."""
        return _read(source, indices, device, info, tuple(size))


@lru_cache(maxsize=None)
def _load() -> None:
    """Load spdl-io's FFmpeg extension once, and give SIGTERM its default action back (the extension installs glog's
    handler, which prints a stack trace whenever the process is asked to stop)."""
    import signal
    import threading

    from spdl.io.lib import _libspdl

    dir(_libspdl)  # loads the lazily imported extension (and glog's handlers) now
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _frames_cpu(src, wanted: list[int], size=None):
    import spdl.io

    scale = dict(scale_width=size[1], scale_height=size[0], scale_algo="bilinear", scale_mode=None) if size else {}
    rgb = spdl.io.get_video_filter_desc(pix_fmt="rgb24", **scale)
    packets = spdl.io.demux_video(src)
    shown = sorted(packets.get_timestamps())  # before the decode, which takes the packets
    try:
        frames = spdl.io.sample_decode_video(packets, wanted, filter_desc=rgb)
    except IndexError as e:  # the indices were checked against the probe: SPDL got fewer frames than it asked for
        raise RuntimeError(
            f"SPDL decoded fewer frames than the file's index holds ({e}): some of its data did not decode"
        ) from e
    if len(frames) != len(wanted):  # SPDL leaves out a frame it could not decode
        raise RuntimeError(f"SPDL decoded {len(frames)} of the {len(wanted)} frames asked: the others failed to decode")
    for j, frame in zip(wanted, frames):  # after a packet that did not decode, SPDL 0.8 returns the next frame
        if abs(frame.pts - shown[j]) > 1e-4:
            raise RuntimeError(f"SPDL returned the frame at {frame.pts:.3f} s as frame {j} ({shown[j]:.3f} s): a packet "
                               "before it did not decode (damaged data?)")  # fmt: skip
    return spdl.io.to_torch(spdl.io.convert_frames(frames)).permute(0, 3, 1, 2)  # (N, H, W, 3) -> (N, 3, H, W)


def _frames_cuda(src, wanted: list[int], device: Device, info, size=None, name=None):
    """NVDEC: one window per run of wanted frames in one GOP, from its keyframe's time; frame j of a window's output
    is frame keyframe + j. A short window raises: `_open_gop_shortfall` on open-GOP files, else an error."""
    import spdl.io
    import torch

    times = sorted(spdl.io.demux_video(src).get_timestamps())
    if len(times) != info.num_frames:
        raise RuntimeError(f"SPDL counts {len(times)} packets, the probe {info.num_frames}")
    half = (times[1] - times[0]) / 2 if len(times) > 1 else 0.01
    key_of = info.keyframe_of
    cfg = spdl.io.cuda_config(device_index=device.ordinal)
    got, groups = {}, {}
    for t in wanted:
        groups.setdefault(key_of[t], []).append(t)
    for k, ts in groups.items():
        packets = spdl.io.demux_video(src, timestamp=(times[k], times[ts[-1]] + half))
        try:
            out = _nvdec_rgb(packets, cfg, info, size)
        except Exception as e:
            if info.open_gop and "No frames were decoded" in str(e):
                raise _open_gop_shortfall(name, k, ts[-1], describe(e)[:160]) from e
            raise
        if out.shape[0] < ts[-1] - k + 1:
            if info.open_gop:
                raise _open_gop_shortfall(name, k, ts[-1], f"{out.shape[0]} of its {ts[-1] - k + 1} frames came back")
            raise RuntimeError(f"NVDEC returned {out.shape[0]} frames for frames {k}..{ts[-1]}")
        for t in ts:
            got[t] = out[t - k]
    return torch.stack([got[t] for t in wanted])


def _open_gop_shortfall(name, first: int, last: int, what: str) -> BackendUnavailable:
    """The `BackendUnavailable` for an open-GOP file whose NVDEC window came back short: a valid file this path
    cannot read exactly (a skip policy does not count it as damage)."""
    return BackendUnavailable(
        name,
        f"SPDL's NVDEC path cannot read this open-GOP file exactly: the window of frames {first}..{last} "
        f"({what}); read it with TorchCodec or PyNvVideoCodec on CUDA, or SPDL on the CPU",
        "spdl",
    )


# SPDL's NV12 -> RGB kernel: its `coeff` for each matrix (its default, 1, is BT.709 whatever the file says)
_COEFF = {"bt709": 1, "bt601": 6, "bt2020": 9}


def _nvdec_rgb(packets, cfg, info, size=None):
    """(N, 3, H, W) uint8 on the GPU: the packets decoded by NVDEC to NV12 (at `size` where given), converted by the
    file's matrix and range (SPDL's kernel assumes limited range: a full-range file goes through
    `colour.nv12_to_rgb`)."""
    import spdl.io

    codec = packets.codec
    if codec.name in ("h264", "hevc"):  # NVDEC takes Annex B, as decode_packets_nvdec prepares it
        packets = spdl.io.apply_bsf(packets, f"{codec.name}_mp4toannexb")
    scale = {"scale_width": size[1], "scale_height": size[0]} if size is not None else {}
    nv12 = spdl.io.nvdec_decoder(cfg, codec, **scale).decode_packets(packets)
    matrix, rng = colour.effective(info)
    if rng == "limited":
        return spdl.io.to_torch(spdl.io.nv12_to_rgb(nv12, device_config=cfg, coeff=_COEFF[matrix]))
    h, w = size if size is not None else (info.height, info.width)
    return colour.nv12_to_rgb(spdl.io.to_torch(nv12), h, w, matrix, rng)


def _read(source, indices: list[int], device: Device, info, size=None):
    """The frames `indices` of `source`: a path, or an open binary file object whose bytes SPDL demuxes."""
    if hasattr(source, "read"):
        src, name = source.read(), getattr(source, "name", None)
    else:
        src = name = str(source)
    _load()
    wanted = sorted(set(indices))
    if device.is_cuda:
        frames = _frames_cuda(src, wanted, device, info, size, name)
    else:
        frames = _frames_cpu(src, wanted, size)
    return base.in_order(frames, wanted, indices)


ADAPTER = Spdl()
