"""K frames of every video in a folder, decoded by NVIDIA DALI on the GPU (NVDEC) or the CPU, batched for training.

From the Accelerated Video Loading Playbook (notebook 22); needs `pip install nvidia-dali-cuda130 av` (the wheel of
your CUDA major; PyAV reads the packets and the colour tags, and decodes the first frame for the display rotation).
An item is K evenly spaced frames of one video, upright and with square pixels, as a player shows it, uint8 (K, 3,
SIZE, SIZE) on the decoding device: the shorter side resized to SIZE (antialiased), the centre cut out, so videos of
any size batch together. Colour follows the file's tags; untagged video is read as BT.601, limited range (FFmpeg's
rule, as every path of the playbook). A file that cannot be read or is refused is skipped and named. DALI's CPU
decoder takes VP8, VP9 and MJPEG only.
Threads of this process feed DALI (`loader`): its pipelines do not survive in forked DataLoader workers. On the GPU
they work on a CUDA stream of their own, so that their work does not queue behind the training step's.
Each item first reads all of its file's packets, to place its frames exactly: on long videos, much of an item
(30 minutes of 720p: the whole 0.9 GB file, and about 0.3 s of Python that the threads take in turns, so one
process reads a few such files a second at most).
On the GPU, each file's keyframes are also decoded once on the CPU: NVDEC goes on at a file's first picture size, so a
file whose size changes mid-stream is refused.
Under torchrun, device="cuda" is this rank's GPU (LOCAL_RANK).

    clips = VideoClips(paths, k=16, size=224, device="cuda")
    batches = loader(clips, batch_size=8, workers=4)   # threads
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        for frames, names, skipped in batches: ...  # frames (B, K, 3, 224, 224); skipped [(path, why)]
"""

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import av
import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from nvidia.dali import fn, pipeline_def, types
from torch.utils.data import Dataset, DistributedSampler

K, SIZE = 16, 224  # 224: the input of CLIP and SigLIP ViT-B models, whose processors also cut the centre square
STREAMS, LOCK = {}, threading.Lock()  # the threads' CUDA stream, by device: one, so one memory pool
SIZES = {}  # size_change's answers, by (path, time, size)
KR_KB = {1: (0.2126, 0.0722), 9: (0.2627, 0.0593), 10: (0.2627, 0.0593)}  # by FFmpeg's colorspace number; else BT.601


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


def probe(path):
    """What a file holds, from its packets and its first frame (PyAV, no other decoding): its codec, container,
    video streams (cover pictures aside), the frames shown, whether its GOPs are open, the frames never shown (an
    edit list's, a cut's), the first frame (size, rotation, pixel format, colour tags), the pixels' aspect ratio and
    whether the file stores its duration (a live or browser recording does not). ValueError for a file cut short or
    with no frame to decode."""
    with av.open(path) as container:
        stream = video_stream(container)
        got = [(p.pts, p.is_keyframe, p.is_discard) for p in container.demux(stream) if p.size]
        if stream.frames > len(got):  # an MP4 whose index lists more frames than it holds
            raise ValueError(f"cut short: its index lists {stream.frames - len(got)} more frames than it holds")
        shown = [(pts, is_key) for pts, is_key, hidden in got if pts is not None and not hidden]
        if len({pts for pts, _ in shown}) < len(shown):
            raise ValueError(
                "frames share a presentation time (overlapping pieces joined?), so their order is unknown: re-encode it"
            )
        if got and not got[0][1]:  # in decode order: a frame before the first keyframe cannot be decoded
            raise ValueError(
                "it starts between keyframes (a piece cut from a stream?): its first frames cannot be decoded"
            )
        open_gop, key = False, None
        for j, (pts, is_key) in enumerate(shown):  # decode order: a frame after a keyframe, shown before it
            key = pts if is_key and j else key
            open_gop |= key is not None and pts < key
        container.seek(0)
        stream.thread_count = 1
        first = next(container.decode(stream), None)
        if first is None:
            raise ValueError("no frame of its video stream decodes")
        check_order(container, stream, [pts for pts, _, hidden in got if pts is not None and not hidden])
        return {
            "codec": stream.codec_context.codec.canonical_name, "container": container.format.name,
            "streams": sum(not s.disposition & av.stream.Disposition.attached_pic for s in container.streams.video),
            "frames": len(shown), "open_gop": open_gop,
            "hidden": len(got) - len(shown), "first": first, "has_duration": container.duration is not None,
            "sar": stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio or 1,  # pixels' shape
        }  # fmt: skip


@pipeline_def(batch_size=1, num_threads=2, prefetch_queue_depth=1)
def frames_of(decoder):
    encoded = fn.external_source(name="encoded", dtype=types.UINT8, ndim=1)  # a file's bytes, at each run
    frames = fn.external_source(name="frames", dtype=types.INT32, ndim=1)  # the frames wanted, at each run
    return fn.decoders.video(encoded, device=decoder, frames=frames)


def from_bt601(rgb, colorspace):
    """R'G'B' (N, 3, H, W) float that DALI's NVDEC path converted as BT.601 (with the file's range: it never reads
    the matrix), converted again by the file's matrix; colours the first conversion clipped stay clipped."""
    kr, kb = KR_KB.get(int(colorspace), (0.299, 0.114))
    r, g, b = rgb.unbind(1)
    y = 0.299 * r + 0.587 * g + 0.114 * b
    r, b = y + (1 - kr) / (1 - 0.299) * (r - y), y + (1 - kb) / (1 - 0.114) * (b - y)
    return torch.stack((r, (y - kr * r - kb * b) / (1 - kr - kb), b), 1)


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

    def __init__(self, paths, k=K, size=SIZE, device="cuda"):
        self.paths, self.k, self.size, self.device = listed(paths), *sizes(k, size), rank_gpu(device)
        self.pipes, self.whole, self.lock = {}, set(), threading.Lock()  # one DALI run at a time

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        try:
            if not self.device.startswith("cuda"):
                return self.read(self.paths[i]), self.paths[i], None
            with LOCK:
                if self.device not in STREAMS:
                    STREAMS[self.device] = torch.cuda.Stream(self.device)
            stream = STREAMS[self.device]  # on the default stream, DALI's copy would wait for the training step
            with torch.cuda.stream(stream):
                frames = self.read(self.paths[i])
            stream.synchronize()  # ready when the thread hands it over
            frames.record_stream(torch.cuda.default_stream(frames.device))  # read there before its memory is reused
            return frames, self.paths[i], None
        except Exception as e:  # a broken or refused file is skipped and named; the epoch goes on
            return None, self.paths[i], why(self.paths[i], e)

    def read(self, path):
        info = probe(path)
        first, n, codec, gpu = info["first"], info["frames"], info["codec"], self.device.startswith("cuda")
        changed = gpu and size_change(path)
        if changed:  # NVDEC went on at the first size: where the size went down, other frames came back in silence
            raise ValueError(changed)
        step = 16 if codec in ("h264", "mpeg2video", "mpeg4") else 8  # the codec's block: the coded size
        coded = (codec, -(-first.width // step) * step, -(-first.height // step) * step)
        refused = {  # what DALI 2.4 was seen to get wrong or cannot read (notebooks 14 and 20)
            "refused: DALI's CPU decoder takes VP8, VP9 and MJPEG only": not gpu and codec not in ("vp8", "vp9", "mjpeg"),
            "refused: DALI's NVDEC path was not checked on frames never shown (an edit list, a cut)": gpu and info["hidden"],
            # DALI keeps its NVDEC decoders per process, reused by coded size: a picture cropped from that size, read
            # after one shown whole, got its chroma from the wrong rows
            "refused: a file shown whole at this coded size was read before in this process": gpu
            and coded in self.whole and coded[1:] != (first.width, first.height),
        }  # fmt: skip
        for why, found in refused.items():
            if found:
                raise ValueError(why)
        want = uniform(n, self.k)
        unique = sorted(set(want))
        kind = (codec, first.width, first.height, first.format.name)  # a decoder keeps the first file's picture
        with self.lock:
            pipe = self.pipes.pop(kind, None)
            if pipe is None:
                pipe = frames_of(
                    "mixed" if gpu else "cpu", device_id=(torch.device(self.device).index or 0) if gpu else None
                )
                pipe.build()
            self.pipes[kind] = pipe  # the one used last, last; 4 kept, each holding a decoder
            while len(self.pipes) > 4:
                self.pipes.pop(next(iter(self.pipes)))
            pipe.feed_input("encoded", [np.fromfile(path, dtype=np.uint8)])
            pipe.feed_input("frames", [np.asarray(unique, dtype=np.int32)])
            try:
                (video,) = pipe.run()
            except Exception as e:
                self.pipes.pop(kind, None)  # DALI marks a pipeline invalid after an error
                if gpu and ("not supported on this GPU" in str(e) or "Failed to create video decoder" in str(e)):
                    # e.g. AV1 on Turing, GA100 and Hopper; 10-bit or 4:2:2 H.264 before Blackwell
                    raise ValueError(f"refused: NVDEC on this GPU cannot decode this {codec} stream "
                                     f"({first.format.name}); read it on the CPU") from e  # fmt: skip
                raise
            rgb = torch.from_dlpack(video[0]).clone()  # copied: DALI reuses its output
            if gpu:
                torch.cuda.current_stream(rgb.device).synchronize()  # copied before DALI's next run writes there
                if coded[1:] == (first.width, first.height):
                    self.whole.add(coded)
        if rgb.shape[0] != len(unique):  # past its own count of frames DALI drops them, in silence
            raise ValueError(f"DALI returned {rgb.shape[0]} frames for the {len(unique)} asked")
        turn = int(first.rotation) // 90 % 4  # quarter turns counterclockwise, from the display matrix
        h, w = shown_size(first.height, first.width, info["sar"], turn, self.size)
        rgb = F.interpolate(rgb.permute(0, 3, 1, 2).float(), (w, h) if turn % 2 else (h, w), mode="bilinear",
                            antialias=True)  # fmt: skip
        rgb = from_bt601(rgb, first.colorspace) if gpu else rgb
        rgb = torch.rot90(rgb.round_().clamp_(0, 255).to(torch.uint8), turn, dims=(2, 3))
        top, left = (h - self.size) // 2, (w - self.size) // 2
        return rgb[[unique.index(j) for j in want], :, top : top + self.size, left : left + self.size]


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
    the ranks, PyTorch's DistributedSampler repeats a few, so that every rank has as many batches. `workers`: threads
    feeding DALI."""
    ranks, rank = this_rank()
    sampler = DistributedSampler(clips, num_replicas=ranks, rank=rank, shuffle=True, seed=seed)
    return ThreadLoader(clips, batch_size, workers, sampler)
