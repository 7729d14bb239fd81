"""PyNvVideoCodec adapter: NVIDIA's Python bindings over NVDEC, frames straight into GPU memory (notebook 13). One
`SimpleDecoder` per GPU and thread is reused (`reconfigure_decoder`); its NV12 output is converted by the file's
matrix and range (`colour.nv12_to_rgb`). Do not load TorchCodec into the same process: their FFmpeg libraries clash."""

from __future__ import annotations

import contextlib
import threading

from playbook_utils import colour
from playbook_utils.decoders import base
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable

__all__ = ["ADAPTER", "decoder_for", "PyNvVideoCodec", "reuse_key"]

_CHUNK = 8
_local = threading.local()


def _held(name: str) -> dict:
    """This thread's {(GPU, stream): ...} of `name`: the decoders `decoder_for` keeps, the forward passes `_forward`
    keeps, each on the CUDA stream that was torch's current one when it was made (`_on`)."""
    if not hasattr(_local, name):
        setattr(_local, name, {})
    return getattr(_local, name)


def _on(gpu: int) -> tuple[int, int]:
    """(GPU, the handle of torch's current CUDA stream there): where a decoder made now copies its frames out."""
    import torch

    return gpu, torch.cuda.current_stream(gpu).cuda_stream


def _wrong(trait: str, what: str) -> base.KnownWrong:
    return base.known_wrong(
        trait, f"PyNvVideoCodec cannot be trusted with {base.trait_words(trait)} video: {what}", ("cuda",), seen="2.2.4"
    )


class PyNvVideoCodec(base.Adapter):
    """Always FFmpeg's best video stream (its FFmpeg demuxer's choice); NVDEC returns the picture as stored
    (read_frames turns it as displayed)."""

    NAME, IMPORT, DISTRIBUTION = "pynvvideocodec", "PyNvVideoCodec", "pynvvideocodec"
    DEVICES = ("cuda",)
    HANDOVER = {"cuda": "pynvvideocodec_clips"}
    OWN_STREAM = ("cuda",)  # its decoders copy out, and the frames are converted, on torch's current stream
    ROLES = {"simpler": 3, "gpu_loader": 0, "raw_nvdec": 0, "rank_gpu": 1}
    # What the correctness matrix caught it getting wrong, and files it has not been checked on: refused.
    KNOWN_WRONG = (
        *base.nv12_path_refusals(),
        base.known_wrong(
            "edit-list",
            "PyNvVideoCodec decodes without FFmpeg's decoder, which is what drops the frames an MP4 edit list hides; "
            "not checked on such files",
            ("cuda",),
        ),
        base.known_wrong(
            "open-gop",
            "PyNvVideoCodec returns other frames after a seek in open-GOP video (H.264: asked [24, 33], got [1, none]; "
            "HEVC: asked 33, got 38)",
            ("cuda",),
            seen="2.2.4",
            reads="seek",
        ),
        base.known_wrong(
            "container:mpegts",
            "PyNvVideoCodec's seek in MPEG-TS finds no index entry ('Seek target index is out of range', "
            "its handed-over module on an H100)",
            ("cuda",),
            seen="2.2.4",
            reads="seek",
        ),
        _wrong(
            "10-bit",
            "RGB output of 10-bit streams carries wrong or unreadable frames (91 of 120 in notebook 00's probe)",
        ),
        _wrong("container:matroska", "frame indices drift near the end of MKV files (asked 46, got 44)"),
    )

    # Open-GOP files are read by one forward pass from frame 0 (`_forward`, no seek): exact on every stamped
    # open-GOP clip it takes (tests/unit/test_open_gop.py on a GPU)
    FORWARD_ON: tuple = ("cuda",)

    def read(self, path: str, indices: list[int], device: Device, info):
        gpu = device.ordinal
        base.refuse_size_change(path, "pynvvideocodec")
        try:
            if self.forward_only(info, device.kind):
                unique = sorted(set(indices))
                return base.in_order(_forward(path, unique, gpu, info), unique, indices)
            try:
                return _read(decoder_for(path, gpu, info), indices, gpu, info)
            except Exception:
                # A reconfigured decoder can fail where a fresh one works (e.g. 8-bit -> 10-bit): retry once.
                _held("decoders").pop(_on(gpu), None)
                return _read(decoder_for(path, gpu, info), indices, gpu, info)
        except Exception as e:
            if "Unsupported" in type(e).__name__ or "not supported" in str(e).lower():
                raise BackendUnavailable(
                    path, f"NVDEC cannot decode this {info.codec} stream ({type(e).__name__})", "pynvvideocodec"
                ) from e
            raise


def reuse_key(info) -> tuple:
    """What a decoder reused for another file with `reconfigure_decoder` must share with it: the codec, the display
    size and the pixel format (else the picture comes out wrong); for another key a new decoder is made."""
    return (info.codec, info.width, info.height, info.pix_fmt) if info is not None else None


def decoder_for(path: str, gpu_id: int, info=None):
    """A SimpleDecoder on `path`: the cached one of this thread and GPU, kept as it is for the same file
    (`base.file_identity`; a loader reading it in chunks keeps the decoder's position), reconfigured
    for another file of the same `reuse_key` (`info`, the file's probe), or new."""
    import PyNvVideoCodec as nvc

    cache, on = _held("decoders"), _on(gpu_id)
    key = (path, base.file_identity(path))
    held_key, held_reuse, dec = cache.get(on, (None, None, None))
    if dec is not None and held_key == key:
        return dec
    if dec is not None and held_reuse == reuse_key(info):
        with contextlib.suppress(Exception):  # a different codec or a larger size: start afresh
            dec.reconfigure_decoder(path)
            cache[on] = (key, held_reuse, dec)
            return dec
    cache.pop(on, None)
    dec = nvc.SimpleDecoder(
        path, gpu_id=gpu_id, cuda_stream=on[1], use_device_memory=True, output_color_type=nvc.OutputColorType.NATIVE
    )
    cache[on] = (key, reuse_key(info), dec)
    return dec


def _read(dec, indices: list[int], gpu: int, info):
    import torch

    if len(dec) != info.num_frames:
        raise RuntimeError(f"PyNvVideoCodec counts {len(dec)} frames, the packets say {info.num_frames}")
    wanted = sorted(set(indices))
    got = []
    with torch.cuda.device(gpu):
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            frames = dec.get_batch_frames_by_index(chunk)
            if len(frames) != len(chunk):
                raise RuntimeError(f"asked PyNvVideoCodec for {len(chunk)} frames, got {len(frames)}")
            got.append(_rgb([torch.from_dlpack(f) for f in frames], info))  # NV12, borrowed
    return base.in_order(torch.cat(got), wanted, indices)


def _rgb(surfaces: list, info):
    """RGB (N, 3, H, W) of NV12 surfaces (uint8 tensors on the GPU, in the decoder's memory or copied out),
    converted by the file's colour matrix and range (`colour.nv12_to_rgb`)."""
    import torch

    if any(t.dtype != torch.uint8 for t in surfaces):
        raise RuntimeError(f"PyNvVideoCodec returned {surfaces[0].dtype} frames, expected uint8 NV12")
    matrix, rng = colour.effective(info)
    return colour.nv12_to_rgb(torch.stack(surfaces), info.height, info.width, matrix, rng)


def _forward(path: str, unique: list[int], gpu: int, info):
    """The frames `unique` (sorted) of `path` in one forward pass from the first packet, no seek, as RGB (`_rgb`).
    The pass is kept per thread and GPU (`_ForwardPass`): a later read of the same file from where it stopped goes
    on."""
    import torch

    passes, on = _held("forward"), _on(gpu)
    key = (path, base.file_identity(path))
    run = passes.pop(on, None)
    if run is None or run.key != key or unique[0] < run.first_available:
        run = _ForwardPass(key, path, *on)
    with torch.cuda.device(gpu):
        kept = run.frames(unique)
    if not run.ended:
        passes[on] = run
    if len(kept) != len(unique):
        raise RuntimeError(f"PyNvVideoCodec's forward pass gave {run.next} frames; asked up to {unique[-1]}")
    return _rgb([kept[i] for i in unique], info)


class _ForwardPass:
    """One forward pass over a file: its demuxer's packets, its decoder, the index of the next frame the decoder
    will hand out, and the frames it handed out past the last one asked for (copied: the decoder reuses its
    surfaces), for the next read to start from."""

    def __init__(self, key, path: str, gpu: int, stream: int):
        import PyNvVideoCodec as nvc

        self.key, self.next, self.held, self.ended = key, 0, {}, False
        self.demuxer = nvc.CreateDemuxer(path)
        self.packets = iter(self.demuxer)
        self.decoder = nvc.CreateDecoder(
            gpuid=gpu, codec=self.demuxer.GetNvCodecId(), cudacontext=0, cudastream=stream, usedevicememory=True
        )

    @property
    def first_available(self) -> int:
        return min(self.held, default=self.next)

    def frames(self, unique: list[int]) -> dict:
        """{index: NV12 copy} of the frames `unique` (sorted, none before `first_available`) that the file has."""
        import PyNvVideoCodec as nvc
        import torch

        wanted, last = set(unique), unique[-1]
        kept = {i: t for i, t in self.held.items() if i in wanted}
        self.held = {i: t for i, t in self.held.items() if i > last}
        while self.next <= last and not self.ended:
            packet = next(self.packets, None)
            if packet is None:
                self.ended = True  # end of stream: flush what the decoder holds
            for f in self.decoder.Decode(nvc.PacketData() if packet is None else packet):
                if self.next in wanted or self.next > last:
                    (kept if self.next in wanted else self.held)[self.next] = torch.from_dlpack(f).clone()
                self.next += 1
        return kept


ADAPTER = PyNvVideoCodec()
