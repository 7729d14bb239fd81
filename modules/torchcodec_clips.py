"""K frames of every video in a folder, decoded by TorchCodec on the CPU or on the GPU (NVDEC), batched for training.

From the Accelerated Video Loading Playbook (notebook 22); needs `pip install torchcodec av` (PyAV reads the packets
to find the files TorchCodec gets wrong). An item is K evenly spaced frames of one video, upright and with square
pixels, as a player shows it, uint8 (K, 3, SIZE, SIZE) on the decoding device: the shorter side resized to SIZE, the
centre cut out, so videos of any size batch together. Colour follows the file's tags; untagged video is read as
BT.601, limited range (FFmpeg's rule, as every path of the playbook). A file that cannot be read, or that TorchCodec
was seen to read wrong, is skipped and named. On the GPU, threads of this process decode (`loader`): DataLoader
workers would each make a CUDA context.
The threads decode on a CUDA stream of their own, so that their work does not queue behind the training step's.
Each item first reads all of its file's packets, to place its frames exactly: on long videos, much of an item
(30 minutes of 720p: the whole 0.9 GB file, and about 0.3 s of Python that the threads take in turns, so one
process reads a few such files a second at most).
Under torchrun, device="cuda" is this rank's GPU (LOCAL_RANK).
On the CPU, worker processes start by importing your script: build and read the loader under
`if __name__ == "__main__":`.

    clips = VideoClips(paths, k=16, size=224, device="cuda")
    batches = loader(clips, batch_size=8, workers=8)   # threads on CUDA, worker processes on the CPU
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        for frames, names, skipped in batches: ...  # frames (B, K, 3, 224, 224); skipped [(path, why)]
"""

import copy
import json
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import islice

import av
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchcodec.decoders import VideoDecoder
from torchcodec.transforms import Resize

K, SIZE = 16, 224  # 224: the input of CLIP and SigLIP ViT-B models, whose processors also cut the centre square
STREAMS, LOCK = {}, threading.Lock()  # the decoding threads' CUDA stream, by device: one, so one memory pool
SIZES = {}  # size_change's answers, by (path, time, size)
NVDEC_LACKS = "refused: NVDEC on this GPU lacks this format (CUDA error 801; gray 4:0:0 is one): read it on the CPU"


def video_stream(container):
    """FFmpeg's best video stream of an open file; ValueError naming why a file has none to read frames from, or none
    whose frames can be placed."""
    stream = container.streams.best("video")
    if stream is None:
        raise ValueError("no video stream")
    if stream.disposition & av.stream.Disposition.attached_pic:  # an audio file's artwork, or a video's thumbnail
        raise ValueError("FFmpeg's video stream is a cover picture, not a video")
    if container.format.name.startswith("image2") or container.format.name.endswith("_pipe"):
        raise ValueError(f"a still picture ({container.format.name}), not a video")
    if stream.codec_context is None:
        raise ValueError("FFmpeg has no decoder for its video codec")
    if container.format.name == "avi" and stream.codec_context.has_b_frames:  # PyAV and TorchCodec were a frame off
        fix = (  # MPEG-4 Part 2 (XviD, DivX): FFmpeg's parser gives each frame its time; H.264 and others: none does
            "remux it: ffmpeg -fflags +genpts -i IN -c copy -bsf:v mpeg4_unpack_bframes OUT.mp4"
            if stream.codec_context.name == "mpeg4"
            else "re-encode it: ffmpeg -i IN -c:v libx264 -crf 18 OUT.mp4 (a remux with -c copy leaves them out of "
            "place)"
        )
        raise ValueError(f"AVI with B-frames stores no presentation times, so no frame's place is known: {fix}")
    if container.format.name == "mpeg":  # seeks missed in PyAV, TorchCodec and decord; SPDL raised
        raise ValueError(
            "MPEG-PS (.mpg, .vob) may store no time for a frame and its seeks miss: remux it to MP4 "
            "with ffmpeg -fflags +genpts -i IN -c copy OUT.mp4"
        )
    return stream


def check_order(container, stream, times):
    """ValueError where a file whose decoder reorders frames (B-frames) stores its packets' times in decode order, as a
    remux with -c copy of an AVI writes them: its frames would come back one out of place. `times`: its packets'
    presentation times in decode order; only a file whose times all rise there is decoded (its first 16 frames)."""
    if not stream.codec_context.has_b_frames or any(b <= a for a, b in zip(times, times[1:])):
        return
    container.seek(0)
    shown = [f.pts for _, f in zip(range(16), container.decode(stream)) if f.pts is not None]
    if any(b <= a for a, b in zip(shown, shown[1:])):
        raise ValueError(
            "its B-frames carry their decode order as presentation times (an AVI remuxed with -c copy?), so no "
            "frame's place is known: re-encode it (ffmpeg -i IN -c:v libx264 -crf 18 OUT.mp4)"
        )


def size_change(path):
    """The refusal of a file whose picture size changes mid-stream (an adaptive stream's recording, a video call's),
    else None: NVDEC goes on at the first size. The keyframes are decoded on the CPU, once per file and version."""
    try:
        s = os.stat(path)
        key = (path, s.st_mtime_ns, s.st_size)
        found = SIZES.get(key, False)  # False: not asked yet
        if found is False:
            found = None
            with av.open(path) as container:
                stream = video_stream(container)
                stream.codec_context.skip_frame = "NONKEY"  # a new size starts on a keyframe
                first = None
                for frame in container.decode(stream):
                    first = first or (frame.width, frame.height)
                    if (frame.width, frame.height) != first:
                        sizes = f"{first[0]}x{first[1]}, then {frame.width}x{frame.height} at {frame.time:.2f} s"
                        found = (
                            f"refused: its picture size changes mid-stream ({sizes}), which this NVDEC path does not "
                            "follow: re-encode it at one size, or read it on the CPU"
                        )
                        break
            if len(SIZES) > 100_000:  # a bound on the memory it keeps
                SIZES.clear()
            SIZES[key] = found
        return found
    except Exception:  # the read's own error stands
        return None


def uniform(n, k):
    """The middle frame of each of k equal parts of n frames (of fewer than k frames, some come twice)."""
    return [min(n - 1, (2 * j + 1) * n // (2 * k)) for j in range(k)]


def shown_size(height, width, sar, turn, size):
    """(h, w) of a stored height x width picture as a player shows it (its pixels made square by the sample aspect
    ratio, turned upright by `turn` quarter turns), resized so that its shorter side is `size`."""
    width = width * sar
    h, w = (width, height) if turn % 2 else (height, width)
    s = size / min(h, w)
    return max(size, round(h * s)), max(size, round(w * s))


def rank_gpu(device):
    """Under torchrun, 'cuda' is this rank's GPU (LOCAL_RANK), not the first one; any other device as given. A GPU
    that torch cannot see is an error here: otherwise every file would be skipped, each with the same cause."""
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={str(device)!r}, but torch sees no CUDA GPU (a CPU build of torch, or no driver)")
    if str(device) == "cuda" and "LOCAL_RANK" in os.environ:
        return f"cuda:{int(os.environ['LOCAL_RANK'])}"
    return str(device)


def packets(path):
    """What the packets say, without decoding: (codec, container, presentation times, open GOP, frames never shown
    (an edit list's, a cut's), the pixels' aspect ratio, whether the file stores its duration). ValueError for a file
    cut short."""
    with av.open(path) as container:
        stream = video_stream(container)
        got = [(p.pts, p.is_keyframe, p.is_discard) for p in container.demux(stream) if p.size]
        if stream.frames > len(got):  # an MP4 whose index lists more frames than it holds
            raise ValueError(f"cut short: its index lists {stream.frames - len(got)} more frames than it holds")
        kept = [(pts, is_key) for pts, is_key, hidden in got if pts is not None and not hidden]
        if len({pts for pts, _ in kept}) < len(kept):
            raise ValueError(
                "frames share a presentation time (overlapping pieces joined?), so their order is unknown: re-encode it"
            )
        if got and not got[0][1]:  # in decode order: a frame before the first keyframe cannot be decoded
            raise ValueError(
                "it starts between keyframes (a piece cut from a stream?): its first frames cannot be decoded"
            )
        check_order(container, stream, [pts for pts, _ in kept])
        open_gop, key = False, None
        for j, (pts, is_key) in enumerate(kept):  # decode order: a frame after a keyframe, shown before it
            key = pts if is_key and j else key
            open_gop |= key is not None and pts < key
        shown = sorted(pts for pts, _ in kept)
        sar = stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio or 1
        return (
            stream.codec_context.codec.canonical_name,
            container.format.name,
            shown,
            open_gop,
            len(got) - len(shown),
            sar,
            container.duration is not None,  # a live or browser recording (MediaRecorder's WebM) stores none
        )


VIDEOS = (  # the suffixes notebook 22's scan takes for video (its `folders.VIDEO_SUFFIXES`)
    *(".mp4", ".m4v", ".mkv", ".webm", ".mov", ".avi", ".ts", ".mts", ".m2ts", ".mpg", ".mpeg", ".vob", ".flv"),
    *(".f4v", ".wmv", ".asf", ".ogv", ".3gp", ".3g2", ".mxf", ".divx"),
)


def listed(paths):
    """The paths, as strings: a folder's video files (by `VIDEOS`, in any case, its subfolders' too), sorted, or the
    list given (with `~` expanded). ValueError where there are none, or where one file was given for a list (it would
    be read as a list of its characters)."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        folder = os.path.expanduser(os.fsdecode(paths))
        if not os.path.isdir(folder):
            what = "is one file" if os.path.exists(folder) else f"does not exist (looked for from {os.getcwd()})"
            raise ValueError(f"paths {folder!r} {what}: give a folder, or a list of paths ([path] for one)")
        seen, paths = set(), []
        for d, dirs, files in os.walk(folder, followlinks=True):  # linked subfolders too, each folder once
            real = os.path.realpath(d)
            if real in seen:
                dirs.clear()
                continue
            seen.add(real)
            dirs.sort()
            # ._name: the metadata macOS writes beside a file on a drive it does not format, not a video
            paths += [os.path.join(d, f) for f in files if os.path.splitext(f)[1].lower() in VIDEOS and f[:2] != "._"]
        paths.sort()
        if not paths:
            raise ValueError(f"no video file in {folder} (by its name's suffix: {', '.join(VIDEOS)})")
    else:
        paths = [os.path.expanduser(os.fsdecode(p)) for p in paths]  # "~/a.mp4" too
    if not paths:
        raise ValueError("no video paths given: does the glob match your files' names (.mp4, .MP4, .mov, ...)?")
    return paths


def sizes(k, size):
    """(k, size), each a whole number of at least 1 (size: the side of the square picture); else ValueError."""
    for name, value in (("k", k), ("size", size)):
        if isinstance(value, bool) or not hasattr(value, "__index__") or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1 (size: the square's side), got {value!r}")
    return int(k), int(size)


def why(path, e):
    """Why a file could not be read, in words: an empty file said to be one (FFmpeg calls it invalid data), else the
    error's type and message."""
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        return "the file is empty (0 bytes): a copy or download that did not finish?"
    return f"{type(e).__name__}: {e}"


class VideoClips(Dataset):
    """Item i: (frames, path, None), or (None, path, why) for a file that cannot be read or is refused."""

    def __init__(self, paths, k=K, size=SIZE, device="cpu", threads=None):
        self.paths, self.k, self.size, self.threads = listed(paths), *sizes(k, size), threads
        self.device = rank_gpu(device)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        try:
            if not str(self.device).startswith("cuda"):
                return self.read(self.paths[i]), self.paths[i], None
            # TorchCodec works on torch's current stream: on the default one it would wait for the training step
            with LOCK:
                if self.device not in STREAMS:
                    STREAMS[self.device] = torch.cuda.Stream(self.device)
            stream = STREAMS[self.device]
            with torch.cuda.stream(stream):
                frames = self.read(self.paths[i])
            stream.synchronize()  # ready when the thread hands it over
            frames.record_stream(torch.cuda.default_stream(frames.device))  # read there before its memory is reused
            return frames, self.paths[i], None
        except Exception as e:  # a broken or refused file is skipped and named; the epoch goes on
            if "Unsupported device" in str(e):  # a TorchCodec built without CUDA: no file would be read
                raise RuntimeError(f"this TorchCodec cannot decode on {self.device}: {e}") from e
            if "NVDEC decoder: 801" in str(e):  # CUDA's "not supported": a format NVDEC lacks, e.g. gray (4:0:0)
                return None, self.paths[i], NVDEC_LACKS
            changed = str(self.device).startswith("cuda") and size_change(self.paths[i])
            if changed:  # the libraries fail on such a file with errors that do not say so
                return None, self.paths[i], changed
            return None, self.paths[i], why(self.paths[i], e)

    def read(self, path):
        codec, container, shown, open_gop, hidden, sar, has_duration = packets(path)
        gpu = str(self.device).startswith("cuda")
        if hidden:  # TorchCodec 0.13 returned frame 6 for frame 0 of such a file
            raise ValueError(f"refused: TorchCodec counts the {hidden} frames never shown (an edit list, a cut)")
        if container == "mpegts":  # 0.13 and 0.14 return a later GOP's frame (frame 15 for 3 of a camera's .ts)
            raise ValueError("refused: TorchCodec's seeks in MPEG-TS land a GOP late (remux it to MP4 with -c copy)")
        if gpu and container == "avi":  # TorchCodec 0.17 on CUDA failed mid-file on an AVI
            raise ValueError("refused: TorchCodec's CUDA path failed on AVI files; read it on the CPU")
        options = {"seek_mode": "exact"}
        if gpu and open_gop and codec == "hevc":
            # after a seek into open-GOP HEVC NVDEC returned neighbouring frames: a frame table whose only
            # keyframe is frame 0 makes TorchCodec read such a file forward from the start, never seeking
            durations = [b - a for a, b in zip(shown, shown[1:])] or [1]
            frames = [{"pts": t, "duration": d, "key_frame": int(j == 0)}
                      for j, (t, d) in enumerate(zip(shown, durations + durations[-1:]))]  # fmt: skip
            options = {"custom_frame_mappings": json.dumps({"frames": frames})}
        if not gpu:
            # the size upright, rotation applied; without a stored duration TorchCodec's approximate mode fails
            peek = VideoDecoder(path, seek_mode="approximate" if has_duration else "exact").metadata
            turn = round(peek.rotation or 0) // 90
            stored = (peek.width, peek.height) if turn % 2 else (peek.height, peek.width)
            cover = shown_size(*stored, sar, turn, self.size)
            options.update(num_ffmpeg_threads=self.threads or 0, transforms=[Resize(cover)])
        decoder = VideoDecoder(path, device=self.device, **options)  # turns rotated video upright itself
        if decoder.metadata.num_frames != len(shown):
            raise ValueError(f"TorchCodec counts {decoder.metadata.num_frames} frames, the packets {len(shown)}")
        frames = decoder.get_frames_at(uniform(len(shown), self.k)).data
        if gpu and "Falling back" in str(getattr(decoder, "cpu_fallback", "")):
            raise ValueError(f"refused: NVDEC cannot decode this {codec} stream (TorchCodec fell back to the CPU)")
        h, w = frames.shape[-2:]
        if gpu:  # TorchCodec resizes in the decoder on the CPU only: antialiased, on the GPU, after NVDEC
            turn = round(decoder.metadata.rotation or 0) // 90
            h, w = shown_size(*((w, h) if turn % 2 else (h, w)), sar, turn, self.size)
            frames = F.interpolate(frames.float(), (h, w), mode="bilinear", antialias=True)
            frames = frames.round_().clamp_(0, 255).to(torch.uint8)
        top, left = (h - self.size) // 2, (w - self.size) // 2
        return frames[..., top : top + self.size, left : left + self.size].contiguous()


def collate(items, empty):
    """(frames (B, K, 3, S, S), paths read, [(path, why) skipped]); `empty`, (0, K, 3, S, S), where every item of the
    batch failed."""
    good = [(f, p) for f, p, _ in items if f is not None]
    frames = torch.stack([f for f, _ in good]) if good else empty
    return frames, [p for _, p in good], [(p, why) for f, p, why in items if f is None]


class ThreadLoader:
    """Batches decoded by `threads` threads of this process (workers=0: one), at most 2 x threads videos ahead."""

    def __init__(self, clips, batch_size, threads, sampler):
        self.clips, self.batch_size, self.threads, self.sampler = clips, batch_size, max(1, threads), sampler

    def __len__(self):
        return -(-len(self.sampler) // self.batch_size)

    def __iter__(self):
        order, batch = iter(self.sampler), []
        shape, device = (0, self.clips.k, 3, self.clips.size, self.clips.size), self.clips.device
        empty = torch.empty(shape, dtype=torch.uint8, device=device)  # a batch of failed items
        with ThreadPoolExecutor(self.threads) as pool:
            pending = deque(pool.submit(self.clips.__getitem__, i) for i in islice(order, 2 * self.threads))
            while pending:
                batch.append(pending.popleft().result())
                pending.extend(pool.submit(self.clips.__getitem__, i) for i in islice(order, 1))
                if len(batch) == self.batch_size or not pending:
                    yield collate(batch, empty)
                    batch = []


def this_rank():
    """(ranks, rank) of torch.distributed, (1, 0) without it. Under torchrun before init_process_group, an error:
    every rank would read every file."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise RuntimeError(
            f"torchrun started {os.environ['WORLD_SIZE']} ranks, but torch.distributed is not initialized: call "
            "torch.distributed.init_process_group() before loader(), or every rank reads every file"
        )
    return 1, 0


def loader(clips, batch_size=8, workers=4, seed=0):
    """Batches of this rank's share of the files (torch.distributed, when initialized), shuffled by `seed` and the
    epoch: call `.sampler.set_epoch(epoch)` on what it returns before each. Where the files do not divide evenly among
    the ranks, PyTorch's DistributedSampler repeats a few, so that every rank has as many batches. `workers`: decoding
    threads on CUDA, else worker processes, each decoder with its share of the cores."""
    ranks, rank = this_rank()
    sampler = DistributedSampler(clips, num_replicas=ranks, rank=rank, shuffle=True, seed=seed)
    if str(clips.device).startswith("cuda"):
        return ThreadLoader(clips, batch_size, workers, sampler)
    if clips.threads is None:  # set on a copy: a later loader of these clips, with other workers, sets its own
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        clips = copy.copy(clips)
        clips.threads = max(1, cores // max(1, workers))
    # forkserver: a worker forked from a process that already runs threads (CUDA, a notebook) can hang in FFmpeg
    context = "forkserver" if workers else None
    empty = torch.empty((0, clips.k, 3, clips.size, clips.size), dtype=torch.uint8)  # a batch of failed items
    return DataLoader(clips, batch_size, sampler=sampler, num_workers=workers, collate_fn=partial(collate, empty=empty),
                      persistent_workers=workers > 0, multiprocessing_context=context)  # fmt: skip
