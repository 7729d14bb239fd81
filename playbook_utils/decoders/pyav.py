"""PyAV adapter: FFmpeg from Python, on the CPU or on NVDEC through FFmpeg's `cuda` hwaccel (notebook 10). Frames are
found by presentation timestamp in one sorted forward pass that seeks only to skip GOPs; returns the picture as
stored (read_frames turns it as displayed)."""

from __future__ import annotations

import contextlib
import functools

from playbook_utils import colour
from playbook_utils.decoders import base
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable, first_line

__all__ = ["ADAPTER", "PyAV", "planes_to_rgb", "share_primary_context"]


class PyAV(base.Adapter):
    NAME, IMPORT, DISTRIBUTION = "pyav", "av", "av"
    DEVICES = ("cpu", "cuda")
    CHOOSES_STREAM = True  # any video stream of the file (read_frames' stream=)
    HANDOVER = {"cpu": "pyav_clips"}
    # on NVDEC, keep the frames in GPU memory (`HWAccel(is_hw_owned=True)`, PyAV >= 18) and convert them there,
    # instead of FFmpeg copying each one to the host (notebook 10 times both)
    RESIDENT = True
    ROLES = {"simpler": 0, "cpu_reference": 0, "cpu_anchor": 0, "cpu_sweep": 1, "rank_cpu": 1}

    def read(self, path: str, indices: list[int], device: Device, info):
        if not device.is_cuda:
            return _read(path, indices, device, info, [])
        decoded: list[int] = []
        try:
            if self.RESIDENT:
                # DLPack takes NV12 and P010 only; PyAV < 18 has no is_hw_owned; a context FFmpeg refused
                with contextlib.suppress(NotImplementedError, TypeError, OSError):
                    return _read(path, indices, device, info, decoded, resident=True)
                decoded.clear()
            return _read(path, indices, device, info, decoded)
        except Exception as e:
            # Without software fallback, FFmpeg reports a stream NVDEC cannot take in several ways
            # ("no stream is compatible", or "Invalid data" for an unsupported profile such as 4:4:4).
            if not decoded or "ardware" in str(e):
                first = first_line(e, type(e).__name__)[:200]
                raise BackendUnavailable(
                    path,
                    f"FFmpeg's cuda hwaccel (NVDEC) cannot decode this {info.codec} "
                    f"{info.pix_fmt} stream: {type(e).__name__}: {first}",
                    "pyav",
                ) from e
            raise

    def read_resized(self, source, indices: list[int], device: Device, info, size=None):
        """`read` of a path or an open binary file object (FFmpeg pulls its bytes through read() and seek()), at `size`
        (H, W) where given: swscale scales (bilinear) in the pass that converts YUV to RGB, so no full-size RGB frame
        is made. Errors come back as the library's own (notebook 24)."""
        return _read(source, indices, device, info, [], size=size)

    read_file = read_resized  # `read` from an open binary file object, at its own size


_SWS_MATRIX = {"bt601": "ITU601", "bt709": "ITU709", "bt2020": "BT2020"}  # `colour`'s names -> swscale's


def _open(path: str, device: Device, resident: bool = False):
    import av

    if not device.is_cuda:
        return av.open(path)
    from av.codec.hwaccel import HWAccel

    where = None if device.index is None else str(device.index)
    owned = {"is_hw_owned": True} if resident else {}
    if resident:
        share_primary_context(device.index)
    return av.open(path, hwaccel=HWAccel(device_type="cuda", device=where, allow_software_fallback=False, **owned))


@functools.cache  # once a process per GPU: `_open` asks before every file it opens on the GPU
def share_primary_context(index: int | None) -> None:
    """Give the GPU's primary CUDA context the flags FFmpeg asks of it (blocking sync). Frames kept on the GPU
    (`is_hw_owned=True`) live in that context, and FFmpeg refuses one that PyTorch made with its default flags
    (OSError: [Errno 95] Operation not supported). Raises OSError where the driver refuses. Notebook 10."""
    import ctypes

    cuda, dev = ctypes.CDLL("libcuda.so.1"), ctypes.c_int()
    status = cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), index or 0)
    status = status or cuda.cuDevicePrimaryCtxSetFlags_v2(dev, 4)  # CU_CTX_SCHED_BLOCKING_SYNC
    if status:
        raise OSError(f"the CUDA driver would not set GPU {index or 0}'s primary context flags (CUresult {status})")


def planes_to_rgb(frame, matrix: str, colour_range: str):
    """R'G'B' uint8 (3, H, W) of a decoded NV12 or P010 `frame`, its two planes taken by DLPack where they lie (GPU
    memory for NVDEC's frames under `HWAccel(is_hw_owned=True)`) and converted there (`colour.yuv_to_rgb`); returns
    once the conversion has read them, as FFmpeg may reuse the frame's memory after it is dropped. Notebook 10."""
    import torch

    if frame.planes[0].__dlpack_device__()[0] == 2:  # kDLCUDA: wait for NVDEC's copy, as PyAV asks
        torch.cuda.synchronize()
    # (H, W) and (H/2, W/2, 2); P010 keeps 10 bits of 16; PyAV takes no stream to order the hand-off on
    y, uv = (torch.from_dlpack(p.__dlpack__(stream=None)) for p in frame.planes)
    bits = 16 if y.dtype == torch.uint16 else 8
    rgb = colour.yuv_to_rgb(y[None], uv[None, ..., 0], uv[None, ..., 1], matrix, colour_range, bits)[0]
    if rgb.is_cuda:
        torch.cuda.current_stream(rgb.device).synchronize()
    return rgb


def _read(path: str, indices: list[int], device: Device, info, decoded: list, size=None, resident: bool = False):
    import numpy as np
    import torch

    keyframe_of = info.keyframe_of
    wanted = sorted(set(indices))
    slots: dict[int, list[int]] = {}  # frame index -> its positions in the output (a frame asked twice fills two)
    for k, i in enumerate(indices):
        slots.setdefault(i, []).append(k)
    out = None
    # the playbook's one rule, said to swscale: frames NVDEC hands back have lost the tags FFmpeg's CPU decoder keeps
    matrix, rng = colour.effective(info)
    colours = {"src_colorspace": _SWS_MATRIX[matrix], "src_color_range": "JPEG" if rng == "full" else "MPEG"}
    resident = resident and device.is_cuda and size is None
    with _open(path, device, resident) as container:
        stream = container.streams[info.stream]
        stream.thread_type = "AUTO"  # frame + slice threads; the default decodes on one core
        stream.thread_count = base.CPU_THREADS  # 0: one per core; loader workers set fewer
        pts = info.pts  # read from the packets by the probe, in presentation order
        if len(pts) != info.num_frames:
            raise RuntimeError(f"found {len(pts)} frames, the probe found {info.num_frames}")
        index_of = {p: i for i, p in enumerate(pts)}
        frames, pos = None, -1

        def next_at(t: int):
            """The next frame decoded at or past frame t, and its index; (None, the frame count) where none is."""
            for frame in frames:
                if index_of.get(frame.pts, -1) >= t:
                    return frame, index_of[frame.pts]
            return None, len(pts)

        for t in wanted:
            if frames is None or keyframe_of[t] > pos + 1:  # seek only to skip frames
                key = keyframe_of[t]
                # to the keyframe's presentation time; where that lands past it (MPEG-TS), to its decode time
                for target in dict.fromkeys((pts[key], info.key_dts.get(key, pts[key]))):
                    container.seek(target, stream=stream, backward=True, any_frame=False)
                    frames = container.decode(stream)
                    frame, pos = next_at(t)
                    if pos == t:
                        break
            else:
                frame, pos = next_at(t)
            if frame is None:
                raise RuntimeError(f"the stream ended before frame {t}")
            if pos > t:
                raise RuntimeError(f"frame {t} was not produced after seeking (reached {pos})")
            decoded.append(t)
            if resident:  # converted on the GPU, where NVDEC left the frame
                rgb = planes_to_rgb(frame, matrix, rng).permute(1, 2, 0)
            else:
                scale = {} if size is None else {"width": size[1], "height": size[0], "interpolation": "BILINEAR"}
                rgb = frame.to_ndarray(format="rgb24", **colours, **scale)
            if out is None:  # the output is made once and each frame converted into its place
                out = (
                    torch.empty((len(indices), *rgb.shape), dtype=torch.uint8, device=rgb.device)
                    if resident
                    else np.empty((len(indices), *rgb.shape), dtype=np.uint8)  # numpy copies faster
                )
            if rgb.shape != out.shape[1:]:  # a video call's or an adaptive stream's recording, as its size switched
                was, now = out.shape[1:3], rgb.shape[:2]
                raise RuntimeError(
                    f"its picture size changes within the file ({was[1]}x{was[0]}, then {now[1]}x{now[0]} at frame "
                    f"{t}): re-encode it at one size"
                )
            for k in slots[t]:
                out[k] = rgb
        if device.is_cuda and not stream.codec_context.is_hwaccel:
            raise RuntimeError("decoded in software although the cuda hwaccel was asked for")
    # Frames went straight into one (N, H, W, 3) array (stacking a list of them afterwards costs as much as the
    # decoding), returned as an (N, 3, H, W) view: no per-frame transposes.
    frames = (out if resident else torch.from_numpy(out)).permute(0, 3, 1, 2)
    return frames.to(str(device)) if device.is_cuda else frames


ADAPTER = PyAV()
