"""Code to paste: for each library and device, a `torch.utils.data.Dataset` of K evenly spaced frames per video
(uint8, (K, 3, H, W)) written against the library itself, not this package, with the settings the playbook
measured, and the `DataLoader` line that drives it (notebooks 22 and 24 print them; tests/unit/test_recipes.py
runs every CPU one and checks the frames by their stamps, the GPU ones on a GPU).

Every recipe samples as `sampling.uniform` does (the frame at the middle of each of K equal segments), so its
frames are the ones `read_frames(path, sampling.uniform(n, k), ...)` returns. What the playbook's adapters add
beyond them (refusals of files a library gets wrong, rotation, error types that survive workers, colour by the
file's tags on every GPU path) is said in a sentence for each: `RECIPES[...]["caveat"]`.
"""

from __future__ import annotations

from string import Template

_UNIFORM = "[min(n - 1, (2 * j + 1) * n // (2 * k)) for j in range(k)]"

_PYAV = Template('''import av
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class VideoClips(Dataset):
    """$k evenly spaced frames of each video, uint8 (K, 3, H, W), decoded by PyAV (FFmpeg) on the CPU."""

    def __init__(self, paths, k=$k):
        self.paths, self.k = list(paths), k

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with av.open(str(self.paths[i])) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"  # frame and slice threads: FFmpeg's default here is one thread
            stream.thread_count = $threads
            n = stream.frames or sum(1 for p in container.demux(stream) if p.size)  # MKV has no count
            k = self.k
            want = $uniform
            container.seek(0)
            picked, last = {}, want[-1]
            for j, frame in enumerate(container.decode(stream)):  # presentation order, counted from 0
                if j in want:
                    picked[j] = frame.to_ndarray(format="rgb24")
                if j >= last:
                    break
        return torch.from_numpy(np.stack([picked[j] for j in want])).permute(0, 3, 1, 2)


$driver
''')

_TORCHCODEC = Template('''${frame_table_imports}import torch
from torch.utils.data import $data_imports
from torchcodec.decoders import VideoDecoder


${frame_table}class VideoClips(Dataset):
    """$k evenly spaced frames of each video, uint8 (K, 3, H, W), decoded by TorchCodec on $device."""

    def __init__(self, paths, k=$k, device="$device"):
        self.paths, self.k, self.device = list(paths), k, device

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):$prelude
        decoder = VideoDecoder(
            str(self.paths[i]),
            device=self.device,$how
        )
        n, k = decoder.metadata.num_frames, self.k
        return decoder.get_frames_at($uniform).data


$driver
''')

_EXACT = """
            seek_mode="exact",  # frame indices from the file's index, not estimated from the frame rate"""
_FORWARD_PRELUDE = """
        forward, table = frame_table(self.paths[i])"""
_FORWARD = """
            # open-GOP HEVC: one forward pass from frame 0; the others: frame indices from the file's index
            **({"custom_frame_mappings": table} if forward else {"seek_mode": "exact"}),"""

# TorchCodec on NVDEC, for a folder with open-GOP HEVC: such a file is read by one forward pass from its first frame
# (a frame table whose only keyframe is frame 0, so the decoder never seeks into a later GOP), as the playbook's
# adapter does (`decoders.torchcodec.frame_mappings`); the others seek as above
_FRAME_TABLE_IMPORTS = """import json

import av  # the packets' timestamps, read without decoding (pip install av)
"""
_FRAME_TABLE = '''def frame_table(path):
    """(whether `path` is open-GOP HEVC, TorchCodec's custom_frame_mappings with frame 0 its only keyframe). After
    a seek into open-GOP HEVC TorchCodec on NVDEC returned neighbouring frames (notebook 12; its seeks in open-GOP
    H.264 were exact): such a file is read by one forward pass from its first frame."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        hevc = stream.codec_context.name == "hevc"
        packets = [  # decode order; a discarded packet is hidden by an MP4 edit list, never shown
            (p.pts, p.is_keyframe) for p in container.demux(stream) if p.size and p.pts is not None and not p.is_discard
        ]
    open_gop, key = False, None
    for j, (pts, is_key) in enumerate(packets):
        if is_key and j:
            key = pts
        elif key is not None and pts < key:  # decoded after a keyframe, shown before it: open GOP
            open_gop = True
    pts = sorted(p for p, _ in packets)
    gaps = [b - a for a, b in zip(pts, pts[1:])] or [1]
    durations = gaps + gaps[-1:]
    frames = [{"pts": p, "duration": d, "key_frame": int(j == 0)} for j, (p, d) in enumerate(zip(pts, durations))]
    return hevc and open_gop, json.dumps({"frames": frames})


'''

_DECORD = Template('''import decord
import torch
from torch.utils.data import DataLoader, Dataset


class VideoClips(Dataset):
    """$k evenly spaced frames of each video, uint8 (K, 3, H, W), decoded by decord on the CPU.
    decord (PyPI, CPU only, unmaintained since 2021) returns wrong frames on some files (notebook 11): check yours."""

    def __init__(self, paths, k=$k):
        self.paths, self.k = list(paths), k

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        reader = decord.VideoReader(str(self.paths[i]), ctx=decord.cpu(0), num_threads=0)  # a reader per call
        n, k = len(reader), self.k
        frames = torch.from_numpy(reader.get_batch($uniform).asnumpy())
        return frames.permute(0, 3, 1, 2)


$driver
''')

_SPDL = Template('''import spdl.io
import torch
from torch.utils.data import DataLoader, Dataset


class VideoClips(Dataset):
    """$k evenly spaced frames of each video, uint8 (K, 3, H, W), decoded by SPDL (FFmpeg) on the CPU: only the
    GOPs that hold them are decoded."""

    def __init__(self, paths, k=$k):
        self.paths, self.k = list(paths), k

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        packets = spdl.io.demux_video(str(self.paths[i]))
        n, k = len(packets.get_timestamps()), self.k
        want = $uniform
        wanted = sorted(set(want))  # SPDL takes each index once, ascending
        frames = spdl.io.sample_decode_video(packets, wanted, filter_desc=spdl.io.get_video_filter_desc(pix_fmt="rgb24"))
        rgb = spdl.io.to_torch(spdl.io.convert_frames(frames)).permute(0, 3, 1, 2)
        return rgb[[wanted.index(j) for j in want]]  # repeats restored when K exceeds the frame count


$driver
''')

_PYNVVIDEOCODEC = Template('''import PyNvVideoCodec as nvc
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

# BT.601 (FFmpeg's rule for untagged video) or BT.709, limited range: Kr, Kb
MATRIX = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}


def nv12_to_rgb(nv12, h, w, matrix="bt601"):
    """uint8 (N, 3, h, w) from NV12 surfaces (N, rows, pitch): the luma on the first 2/3 of the rows, then U, V
    interleaved at half size. PyNvVideoCodec's own RGB takes BT.709 for every file; this follows the file."""
    kr, kb = MATRIX[matrix]
    rows = nv12.shape[1] * 2 // 3
    y = (nv12[:, :h, :w].float() - 16) / 219
    uv = nv12[:, rows : rows + (h + 1) // 2, : 2 * ((w + 1) // 2)].unflatten(2, (-1, 2)).permute(0, 3, 1, 2)
    cb, cr = F.interpolate((uv.float() - 128) / 224, size=(h, w), mode="bilinear").unbind(1)
    r, b = y + 2 * (1 - kr) * cr, y + 2 * (1 - kb) * cb
    g = (y - kr * r - kb * b) / (1 - kr - kb)
    return (torch.stack((r, g, b), 1) * 255).round().clamp(0, 255).to(torch.uint8)


class VideoClips(Dataset):
    """$k evenly spaced frames of each video, uint8 (K, 3, H, W) on the GPU, decoded by NVDEC through
    PyNvVideoCodec. Use it in the training process itself (num_workers=0) or from threads, one decoder each."""

    def __init__(self, paths, k=$k, gpu=0, matrix="bt601"):
        self.paths, self.k, self.gpu, self.matrix = list(paths), k, gpu, matrix

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        dec = nvc.SimpleDecoder(str(self.paths[i]), gpu_id=self.gpu, use_device_memory=True,
                                output_color_type=nvc.OutputColorType.NATIVE)
        n, k = len(dec), self.k
        want = $uniform
        got = dict(zip(sorted(set(want)), dec.get_batch_frames_by_index(sorted(set(want)))))  # drops repeats
        nv12 = torch.stack([torch.from_dlpack(got[j]) for j in want])  # copied: the frames borrow the decoder
        h, w = dec.get_stream_metadata().height, dec.get_stream_metadata().width
        return nv12_to_rgb(nv12.squeeze(-1) if nv12.dim() == 4 else nv12, h, w, self.matrix)


$driver
''')

# DALI: one pipeline per kind of picture (its video decoder keeps the display size of the first file it read: on
# the H200 one pipeline shared by files of the same coded size but another display size returned the wrong
# picture, 17-20 dB), fed each file's bytes and the frames wanted (notebook 14's recipe); PyAV reads the frame
# count and the picture's kind from the container, without decoding. On NVDEC DALI converts every file as
# BT.601, whatever its tags say: `matrix` converts again (the playbook's adapter does it from each file's tags)
_DALI = Template('''import os
${threading}
import av  # the frame count and the kind of picture, from the container (pip install av)
import numpy as np
import torch
from nvidia.dali import fn, pipeline_def, types
from torch.utils.data import $data_imports


@pipeline_def(batch_size=1, num_threads=4, prefetch_queue_depth=1)
def frames_of(decoder):
    encoded = fn.external_source(name="encoded", dtype=types.UINT8, ndim=1)  # a file's bytes, at each run
    frames = fn.external_source(name="frames", dtype=types.INT32, ndim=1)  # the frames wanted, at each run
    return fn.decoders.video(encoded, device=decoder, frames=frames)


${colour}class VideoClips(Dataset):
    """$k evenly spaced frames of each video, uint8 (K, 3, H, W), decoded by DALI on $device."""

    def __init__(self, paths, k=$k${init_args}):
        self.paths, self.k${init_names} = list(paths), k${init_values}
        self.pipes, self.pid = {}, os.getpid()  # this process's pipelines, by kind of picture
${state}
    def __len__(self):
        return len(self.paths)

    def pipeline(self, kind):
        """This process's pipeline for one kind of picture (its decoder keeps the first file's size); the 4 used
        last are kept, as each holds a decoder."""
        if self.pid != os.getpid():  # a forked worker: the pipelines it inherited are not its own
            self.pipes, self.pid = {}, os.getpid()
        pipe = self.pipes.pop(kind, None)
        if pipe is None:
            pipe = frames_of("$decoder", device_id=$device_id)
            pipe.build()
        self.pipes[kind] = pipe  # the one used last, last
        while len(self.pipes) > 4:
            self.pipes.pop(next(iter(self.pipes)))
        return pipe

    def __getitem__(self, i):
        with av.open(str(self.paths[i])) as container:
            s, c = container.streams.video[0], container.streams.video[0].codec_context
            kind = (c.name, c.width, c.height, c.pix_fmt)  # codec, picture size, pixel format
            n = s.frames or sum(1 for p in container.demux(s) if p.size)  # WebM and MKV have no count
        k = self.k
        want = $uniform
        encoded = np.fromfile(str(self.paths[i]), dtype=np.uint8)
${run}
        if rgb.shape[0] != len(want):  # past its own count of frames DALI drops them, in silence
            raise RuntimeError(f"{self.paths[i]}: DALI returned {rgb.shape[0]} frames for the {len(want)} asked")
        return rgb


$driver
''')

_DALI_CPU = {
    "threading": "",
    "colour": "",
    "init_args": "",
    "init_names": "",
    "init_values": "",
    "state": """
    def __getstate__(self):  # a DataLoader worker, forked or spawned, builds its own pipelines
        return {**self.__dict__, "pipes": {}}
""",
    "decoder": "cpu",
    "device_id": "None",
    "driver_note": "# DALI's threads do not survive a fork: read nothing through VideoClips in this process before the\n"
    '# DataLoader has started its workers (or pass multiprocessing_context="spawn"), else a forked worker hangs\n',
    "run": """        pipe = self.pipeline(kind)
        pipe.feed_input("encoded", [encoded])
        pipe.feed_input("frames", [np.asarray(want, dtype=np.int32)])
        (video,) = pipe.run()
        rgb = torch.from_dlpack(video[0]).clone().permute(0, 3, 1, 2)  # copied: DALI reuses its output""",
}

_DALI_GPU = {
    "threading": "import threading\n",
    "colour": '''# BT.601 or BT.709, limited range: Kr, Kb
MATRIX = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}


def bt601_to(rgb, matrix):
    """uint8 (N, 3, H, W) that DALI's NVDEC path converted as BT.601 (it reads the file's range, never its
    matrix), converted again by `matrix`, the file's; colours the first conversion clipped stay off."""
    kr, kb = MATRIX[matrix]
    r, g, b = rgb.float().unbind(1)
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb, cr = (b - y) / 1.772, (r - y) / 1.402
    r, b = y + 2 * (1 - kr) * cr, y + 2 * (1 - kb) * cb
    g = (y - kr * r - kb * b) / (1 - kr - kb)
    return torch.stack((r, g, b), 1).round().clamp(0, 255).to(torch.uint8)


''',
    "init_args": ', gpu=0, matrix="bt601"',
    "init_names": ", self.gpu, self.matrix, self.lock",
    "init_values": ", gpu, matrix, threading.Lock()",
    "state": "",
    "decoder": "mixed",
    "device_id": "self.gpu",
    "run": """        with self.lock:  # the loader's threads share the pipelines: one run at a time
            pipe = self.pipeline(kind)
            pipe.feed_input("encoded", [encoded])
            pipe.feed_input("frames", [np.asarray(want, dtype=np.int32)])
            (video,) = pipe.run()
            rgb = torch.from_dlpack(video[0]).clone().permute(0, 3, 1, 2)  # copied: DALI reuses its output
            rgb = rgb if self.matrix == "bt601" else bt601_to(rgb, self.matrix)
            torch.cuda.current_stream(self.gpu).synchronize()  # copied before DALI's next run writes there""",
}


RECIPES = {
    ("pyav", "cpu"): {
        "template": _PYAV,
        "caveat": "it skips the leading frames an MP4 edit list hides (this code counts them) and turns rotated "
        "video upright",
    },
    ("torchcodec", "cpu"): {
        "template": _TORCHCODEC,
        "caveat": "it refuses variable-frame-rate and edit-list files, where TorchCodec returned other frames than "
        "a player shows (notebook 12), and turns rotated video upright",
    },
    ("torchcodec", "cuda"): {
        "template": _TORCHCODEC,
        "caveat": "it reads open-GOP files on NVDEC by one forward pass from frame 0, where TorchCodec returned "
        "neighbouring frames after a seek such as this code's (notebook 12)",
    },
    ("decord", "cpu"): {
        "template": _DECORD,
        "caveat": "it reads open-GOP files by one forward pass from frame 0, where decord's get_batch (this code's "
        "call) returned neighbouring frames, and refuses the other kinds of file decord returned wrong frames for "
        "(notebook 11)",
    },
    ("spdl", "cpu"): {
        "template": _SPDL,
        "caveat": "it refuses MP4s whose edit list hides leading frames, which SPDL counts (notebook 24)",
    },
    ("pynvvideocodec", "cuda"): {
        "template": _PYNVVIDEOCODEC,
        "caveat": "it reads open-GOP files by one forward pass from frame 0, where PyNvVideoCodec's seeks (this "
        "code's) returned other frames, refuses 10-bit and Matroska files, where it returned wrong frames "
        "(notebook 13), and takes the colour matrix and range from each file's tags (set `matrix` here)",
    },
    ("dali", "cpu"): {
        "template": _DALI,
        "extra": _DALI_CPU,
        "caveat": "DALI's CPU decoder takes VP8, VP9 and MJPEG only (DALI 2.4), which the adapter says by name for "
        "any other file (notebook 14)",
    },
    ("dali", "cuda"): {
        "template": _DALI,
        "extra": _DALI_GPU,
        "caveat": "it takes the colour matrix from each file's tags (set `matrix` here), and refuses a file shown "
        "cropped from its coded size (1920x1080, coded 1088 rows) after one shown at that whole size in the same "
        "process, where DALI's process-wide NVDEC decoder cache gave it the wrong chroma (22-24 dB, notebook 20)",
    },
}


# the recipes that read open-GOP files by one forward pass from frame 0 when asked (`recipe(open_gop=True)`)
FORWARD_ONLY = {("torchcodec", "cuda")}


# a GPU recipe's loader: threads in the training process, as the playbook's GpuLoader measured (no DataLoader
# workers: each would make its own CUDA context, and its tensors would cross processes)
_DECODE_AHEAD = Template('''from collections import deque
from concurrent.futures import ThreadPoolExecutor


def decode_ahead(clips, order, threads=$threads):
    """clips[i] for each i of `order`, in that order, decoded by `threads` threads in the training process, with
    at most 2 x threads videos in flight (each holds its K frames in GPU memory)."""
    pool, pending = ThreadPoolExecutor(threads), deque()
    try:
        for i in order:
            pending.append(pool.submit(clips.__getitem__, i))
            if len(pending) == 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:  # a loop that stops early waits for the videos being decoded, not for those not yet begun
        pool.shutdown(cancel_futures=True)


loader = decode_ahead(VideoClips(paths), torch.randperm(len(paths)).tolist())  # one epoch, shuffled''')


def entry(backend: str, device: str) -> dict:
    """`RECIPES`' entry for `backend` on `device` ('cuda:1' counts as 'cuda'); KeyError naming what exists where
    there is none."""
    key = (backend, "cuda" if str(device).startswith("cuda") else "cpu")
    if key not in RECIPES:
        have = ", ".join(f"{b} on {d}" for b, d in RECIPES)
        raise KeyError(f"no recipe for {backend} on {device}; there are: {have}")
    return RECIPES[key]


def _threads(threads: int) -> tuple[int, str]:
    """(value, comment) of a CPU recipe's threads per decoder: 0 (FFmpeg's choice) or the share of cores."""
    if not threads:
        return 0, "0: as many as FFmpeg likes (every core)"
    return threads, "the cores shared among the DataLoader's workers, as measured"


def recipe(
    backend: str,
    device: str = "cpu",
    k: int = 16,
    workers: int = 4,
    threads: int = 0,
    gpu_threads: int = 4,
    open_gop: bool = False,
    batch: int | None = None,
) -> str:
    """The code of `RECIPES[(backend, device)]` with K frames per video, `workers` DataLoader processes and, for
    PyAV and TorchCodec on the CPU, `threads` FFmpeg threads per decoder (0: as many as FFmpeg likes; `make_loader`
    gives each worker's decoders the cores divided among the workers, `loaders.share_of_cores`), and `batch` videos
    per batch (None: one video at a time). A
    GPU recipe decodes in the training process with `gpu_threads` threads, 2 x gpu_threads videos ahead, as the
    playbook's `GpuLoader` does (`decode_ahead`). `open_gop` (TorchCodec on CUDA: FORWARD_ONLY): each file that
    the playbook's adapter reads forward (open-GOP HEVC) is read so too, by one forward pass from frame 0, with a
    frame table from its packets (`frame_table`, PyAV); without it the code seeks, and returns neighbouring frames
    of such files. KeyError names what exists where there is none (`entry`)."""
    chosen = entry(backend, device)
    template, extra = chosen["template"], chosen.get("extra", {})
    gpu = str(device).startswith("cuda")
    forward = open_gop and (backend, "cuda" if gpu else "cpu") in FORWARD_ONLY
    driver = (
        _DECODE_AHEAD.substitute(threads=gpu_threads)
        if gpu
        else extra.get("driver_note", "")
        + f"loader = DataLoader(VideoClips(paths), batch_size={batch}, shuffle=True, num_workers={workers})"
        + ("  # videos of one size (resize them in __getitem__ otherwise)" if batch else "")
    )
    return template.substitute(
        k=k,
        device=device if gpu else "cpu",
        frame_table_imports=_FRAME_TABLE_IMPORTS if forward else "",
        frame_table=_FRAME_TABLE if forward else "",
        prelude=_FORWARD_PRELUDE if forward else "",
        how=(_FORWARD if forward else _EXACT)
        + ("" if gpu else "\n            num_ffmpeg_threads={},  # {}".format(*_threads(threads))),
        uniform=_UNIFORM,
        workers=workers,
        threads="{}  # {}".format(*_threads(threads)),
        driver=driver,
        data_imports="Dataset" if gpu else "DataLoader, Dataset",
        **extra,
    )
