"""NVIDIA DALI adapter: `fn.decoders.video` with explicit frame indices (notebook 14). "cuda" runs DALI's mixed
backend (NVDEC); "cpu" takes only VP8, VP9 and MJPEG. NVDEC output, converted by DALI as BT.601, is converted again
by the file's matrix; a read its process-wide decoder cache would crop wrong is refused (`_cache_clash`)."""

from __future__ import annotations

import threading

from playbook_utils import colour
from playbook_utils.decoders import base
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable

__all__ = ["ADAPTER", "coded_size", "Dali", "pipeline_key"]

_lock = threading.Lock()
_pipes: dict = {}  # pipelines by `pipeline_key`, the most recently used last
PIPELINES = 4  # kept per process: each holds a decoder (on the GPU, NVDEC surfaces)
_shown_whole: set = set()  # (gpu, codec, width, height, bit depth) of files read on NVDEC shown at their coded size
DECODED_AS = "bt601"  # the matrix DALI's NVDEC path converts every file with (its range is the file's)


def coded_size(info) -> tuple[int, int]:
    """(width, height) the codec codes a picture of `info`'s display size at: whole macroblocks of 16 for H.264
    and MPEG, 8 (the smallest coding block) for the others. A display size smaller than it is a crop."""
    a = 16 if info.codec in ("h264", "mpeg4", "mpeg2video", "mpeg1video") else 8
    return -(-info.width // a) * a, -(-info.height // a) * a


def _cache_clash(gpu: int, info) -> str | None:
    """Why DALI's process-wide NVDEC decoder cache would hand this file a decoder that crops it wrong (a file shown
    at this file's coded size was read on this GPU before), or None."""
    w, h = coded_size(info)
    if (w, h) == (info.width, info.height) or (gpu, info.codec, w, h, info.bit_depth) not in _shown_whole:
        return None
    return (
        f"DALI's NVDEC decoders are cached per process and reused by coded size: this {info.width}x{info.height} "
        f"{info.codec} picture is coded at {w}x{h}, and a file shown at {w}x{h} was read before in this process, so "
        "DALI would decode this one with that decoder and take its chroma from the wrong rows (22-24 dB on the "
        "H200). Read it in another process, or with another backend"
    )


def pipeline_key(kind: str, gpu: int, size, info) -> tuple:
    """What a pipeline may be reused for: the device, the output size, and what its video decoder keeps between runs
    (codec, display size, pixel format); a pipeline shared across these returns another file's picture."""
    return (kind, gpu, None if size is None else tuple(size), info.codec, info.width, info.height, info.pix_fmt)


class Dali(base.Adapter):
    """Always FFmpeg's best video stream; returns the picture as stored (read_frames turns it as displayed)."""

    NAME, IMPORT, DISTRIBUTION, LABEL = "dali", "nvidia.dali", "", "DALI"
    DEVICES = ("cpu", "cuda")
    CODECS = {"cpu": ("vp8", "vp9", "mjpeg")}
    HANDOVER = {"cpu": "dali_clips", "cuda": "dali_clips"}
    OWN_STREAM = ("cuda",)  # its output is copied out, and converted, on torch's current stream
    ROLES = {"simpler": 4, "rank_gpu": 2}
    KNOWN_WRONG = (
        base.known_wrong(
            "edit-list",
            "the frames an MP4 edit list hides are dropped by FFmpeg's decoder on DALI's CPU path (exact in the "
            "correctness matrix); its NVDEC path has not been checked on such files",
            devices=("cuda",),
        ),
    )

    def read(self, source, indices: list[int], device: Device, info):
        """`source`: a path, or an open binary file object whose bytes are decoded (`read_file`: the pipeline decodes
        from memory anyway; notebook 24)."""
        return _read(source, indices, device, info)

    read_file = read

    def read_resized(self, source, indices: list[int], device: Device, info, size):
        """`read` at `size` (H, W): `fn.resize` (antialiased) after the decoder in the same pipeline (notebook 24)."""
        return _read(source, indices, device, info, size)


def _pipeline(kind: str, gpu: int, size=None):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(
        batch_size=1,
        num_threads=2,
        device_id=gpu if kind == "cuda" else None,
        prefetch_queue_depth=1,
        exec_dynamic=True,
    )
    def video_frames():
        encoded = fn.external_source(name="encoded", dtype=types.UINT8, ndim=1)
        frames = fn.external_source(name="frames", dtype=types.INT32, ndim=1)
        video = fn.decoders.video(encoded, device="mixed" if kind == "cuda" else "cpu", frames=frames)
        if size is not None:  # resized in the same graph, on the GPU for "cuda" (notebook 24)
            video = fn.resize(video, resize_y=size[0], resize_x=size[1], antialias=True)
        return video

    pipe = video_frames()
    pipe.build()
    return pipe


def _read(source, indices: list[int], device: Device, info, size=None):
    """The frames `indices` of `source` (a path, or an open binary file object whose bytes are decoded)."""
    import numpy as np
    import torch

    if hasattr(source, "read"):
        path, encoded = getattr(source, "name", "<file-like>"), np.frombuffer(source.read(), dtype=np.uint8)
    else:
        path, encoded = source, None  # read under the lock, as the pipeline takes it: one file's bytes at a time
    kind = device.kind
    gpu = device.ordinal if device.is_cuda else -1
    if kind == "cuda" and encoded is None:
        base.refuse_size_change(path, "dali")
    # Each needed frame once, in order, then reordered here: DALI's decoder given a long unsorted list with
    # repeats takes time growing faster than the list.
    unique = sorted(set(indices))
    with _lock:
        clash = _cache_clash(gpu, info) if kind == "cuda" else None
        if clash:
            raise BackendUnavailable(path, clash, "dali")
        key = pipeline_key(kind, gpu, size, info)
        pipe = _pipes.pop(key, None) or _pipeline(kind, gpu, size)
        _pipes[key] = pipe  # most recently used last
        while len(_pipes) > PIPELINES:
            _pipes.pop(next(iter(_pipes)))
        pipe.feed_input("encoded", [np.fromfile(path, dtype=np.uint8) if encoded is None else encoded])
        pipe.feed_input("frames", [np.asarray(unique, dtype=np.int32)])
        try:
            (out,) = pipe.run()
        except Exception as e:
            _pipes.pop(key, None)  # DALI marks a pipeline invalid after an error
            if "not supported" in str(e) or "Failed to create video decoder" in str(e):
                lines = [x for x in str(e).splitlines() if "not supported" in x or "Failed to create" in x]
                raise BackendUnavailable(
                    path,
                    f"DALI cannot decode this {info.codec} stream on {kind}: {(lines or [str(e)])[0].strip()[:200]}",
                    "dali",
                ) from e
            raise
        sample = out[0]
        if kind == "cpu":
            frames = torch.from_numpy(np.array(sample))
        else:
            from nvidia.dali.plugin.pytorch import feed_ndarray

            frames = torch.empty(sample.shape(), dtype=torch.uint8, device=str(device))
            feed_ndarray(sample, frames, cuda_stream=torch.cuda.current_stream(str(device)))
            torch.cuda.current_stream(str(device)).synchronize()
            if coded_size(info) == (info.width, info.height):
                _shown_whole.add((gpu, info.codec, info.width, info.height, info.bit_depth))
    if len(frames) != len(unique):
        raise RuntimeError(f"asked DALI for {len(unique)} frames, got {len(frames)}")
    frames = frames.permute(0, 3, 1, 2).contiguous()  # (U, 3, H, W), then one gather into the order asked
    if kind == "cuda":  # converted as BT.601 whatever the file says: again, by the file's own matrix
        matrix, rng = colour.effective(info)
        frames = colour.reconvert(frames, (DECODED_AS, rng), (matrix, rng))
    return base.in_order(frames, unique, indices)


ADAPTER = Dali()
