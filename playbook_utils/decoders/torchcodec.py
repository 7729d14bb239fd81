"""TorchCodec adapter: PyTorch's own decoder, FFmpeg on the CPU or NVDEC on CUDA (notebook 12). Each thread keeps its
last decoder (exact seek mode); on CUDA, TorchCodec's silent fallback to the CPU is refused, so "cuda" always means
NVDEC. Do not load PyNvVideoCodec into the same process: their FFmpeg libraries clash."""

from __future__ import annotations

import os
import threading

from playbook_utils.decoders import base
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable

__all__ = ["ADAPTER", "cached_decoder", "decoder", "frame_mappings", "TorchCodec"]

_local = threading.local()
_inherited: list = []


def _forget_after_fork() -> None:
    """In a forked child (a DataLoader worker), start with no cached decoder. The parent's is kept referenced but
    never used or freed: its FFmpeg threads did not survive the fork, and touching it hangs."""
    global _local
    _inherited.append(_local)
    _local = threading.local()


os.register_at_fork(after_in_child=_forget_after_fork)


def frame_mappings(info, forward: bool = False) -> str:
    """The frame table TorchCodec's `custom_frame_mappings` takes (ffprobe's JSON shape), from a `media.VideoInfo`,
    so VideoDecoder needs no scan. `forward`: only frame 0 flagged a keyframe, so each read is one forward pass (for
    files whose seeks go wrong)."""
    import json

    pts, keys = info.pts, {0} if forward else set(info.keyframes)
    gaps = [b - a for a, b in zip(pts, pts[1:])] or [1]
    durations = gaps + [gaps[-1]]
    frames = [{"pts": p, "duration": d, "key_frame": int(i in keys)} for i, (p, d) in enumerate(zip(pts, durations))]
    return json.dumps({"frames": frames})


def decoder(path, device: str, stream: int | None = None, size=None, info=None, forward: bool = False):
    """A `torchcodec.decoders.VideoDecoder` in exact seek mode on `device`, of `stream` (None: FFmpeg's best), with
    `base.CPU_THREADS` threads on the CPU. `size` (H, W): resized in the decoder; `info`: the probe's frame table
    instead of a scan (`frame_mappings`, with `forward`). `path` may be an open binary file."""
    from torchcodec.decoders import VideoDecoder

    kwargs = {"device": device, "stream_index": stream}
    if info is None:
        kwargs["seek_mode"] = "exact"
    else:
        kwargs["custom_frame_mappings"] = frame_mappings(info, forward)
    if size is not None:
        from torchcodec.transforms import Resize

        kwargs["transforms"] = [Resize(tuple(size))]
    if device == "cpu":
        kwargs["num_ffmpeg_threads"] = base.CPU_THREADS
    return VideoDecoder(path, **kwargs)


def cached_decoder(path: str, device: str, stream: int | None = None, forward_info=None):
    """This thread's decoder for `path` on `device` (a torch device string): reused while the same file
    (`base.file_identity`) is read again, else a new one. `forward_info`: the file's `VideoInfo`, for a decoder that
    reads forward only."""
    forward = forward_info is not None
    key = (path, device, stream, base.CPU_THREADS, base.file_identity(path), forward)
    held = getattr(_local, "held", None)
    if held is not None and held[0] == key:
        return held[1]
    _local.held = None  # drop the old decoder before opening the next one
    dec = decoder(path, device, stream, info=forward_info, forward=forward)
    _local.held = (key, dec)
    return dec


class TorchCodec(base.Adapter):
    NAME, IMPORT, DISTRIBUTION = "torchcodec", "torchcodec", "torchcodec"
    DEVICES = ("cpu", "cuda")
    CHOOSES_STREAM = True  # stream_index=
    ROTATES = True  # returns frames turned as the display matrix says
    OWN_STREAM = ("cuda",)  # NVDEC's frames are converted on torch's current stream
    HANDOVER = {"cpu": "torchcodec_clips", "cuda": "torchcodec_clips"}
    ROLES = {"simpler": 1, "cpu_reference": 1, "cpu_anchor": 1, "cpu_sweep": 0, "gpu_loader": 1, "raw_nvdec": 1,
             "rank_gpu": 0, "rank_cpu": 0}  # fmt: skip
    RESIZES_ON = ("cpu",)  # decoder transforms: 0.17 on CUDA raises "Transforms are only supported for CPU devices"
    KNOWN_WRONG = (
        base.known_wrong(
            "edit-list",
            "TorchCodec returned other frames than a player shows on an MP4 whose edit list hides its first frames "
            "(seen with TorchCodec 0.13 on the CPU, on an H.264 file without B-frames: asked frame 0, got frame 6)",
            seen="0.13.0",
        ),
        base.known_wrong(
            ("open-gop", "codec:hevc"),
            "TorchCodec's CUDA path returned a neighbouring frame in open-GOP HEVC in the correctness matrix (asked "
            "24, got 25); its CPU path was exact: use device='cpu' for this file",
            devices=("cuda",),
            reads="seek",
        ),
        base.known_wrong(
            "container:mpegts",
            "TorchCodec's seeks in MPEG-TS land a GOP late: asked frame 3, it returned frame 12 (TorchCodec 0.13 on "
            "the CPU, H.264 and MPEG-2 video); PyAV and SPDL read such files exactly",
            seen="0.13.0",
        ),
        base.known_wrong(
            "container:avi",
            "TorchCodec's CUDA path raised 'Requested next frame while there are no more frames left to decode' on "
            "an AVI (H.264 without B-frames) in the correctness matrix (TorchCodec 0.17); its CPU path "
            "was exact: use device='cpu' for this file",
            devices=("cuda",),
            seen="0.17.0",
        ),
    )
    # Where the open-GOP row above applies (CUDA), open-GOP files are read by one forward pass from frame 0
    # (`frame_mappings(forward=True)`): exact on every stamped open-GOP clip (tests/unit/test_open_gop.py on a GPU)
    FORWARD_ON: tuple = ("cuda",)

    def read_resized(self, source, indices: list[int], device: Device, info, size=None):
        """`read` by a new decoder of `source` (a path or an open binary file object), at `size` (H, W) where given
        (a `Resize` decoder transform); with the probe's frame table where `source` is a file object, so that a
        remote object is read only where the frames are, or is read forward only. Notebook 24."""
        forward = self._forward(info, device)
        table = info if hasattr(source, "read") or forward else None
        dec = decoder(source, str(device), info.stream, size=size, info=table, forward=forward)
        name = getattr(source, "name", "<file-like>") if hasattr(source, "read") else source
        return self.read(name, indices, device, info, dec=dec)

    read_file = read_resized  # `read` from an open binary file object, at its own size

    def _forward(self, info, device: Device) -> bool:
        return self.forward_only(info, device.kind) is not None

    def read(self, path: str, indices: list[int], device: Device, info, dec=None):
        if dec is None:
            dec = cached_decoder(path, str(device), info.stream, info if self._forward(info, device) else None)
        n = dec.metadata.num_frames
        if n != info.num_frames:
            raise RuntimeError(f"TorchCodec counts {n} frames, the packets say {info.num_frames}")
        if indices == list(range(indices[0], indices[-1] + 1)):
            frames = dec.get_frames_in_range(indices[0], indices[-1] + 1).data  # one pass, no per-frame seeks
        else:
            frames = dec.get_frames_at(indices).data
        if device.is_cuda:
            status = str(getattr(dec, "cpu_fallback", ""))
            if "Falling back" in status or frames.device.type != "cuda":
                raise BackendUnavailable(
                    path,
                    f"NVDEC cannot decode this {info.codec} stream; TorchCodec would "
                    f"silently decode it on the CPU ({status.strip()})",
                    "torchcodec",
                )
        return frames


ADAPTER = TorchCodec()
