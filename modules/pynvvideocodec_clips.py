"""K frames of every video in a folder, decoded on the GPU (NVDEC) by PyNvVideoCodec, batched for training.

From the Accelerated Video Loading Playbook (notebook 22); needs `pip install pynvvideocodec av` (PyAV reads the
packets and the colour tags, and decodes the first frame for the display rotation). An item is K evenly spaced
frames of one video, upright and with square pixels, as a player shows it, uint8 (K, 3, SIZE, SIZE) on the GPU: the
shorter side resized to SIZE (antialiased, on the GPU), the centre cut out, so videos of any size batch together.
NVDEC hands out NV12, converted here by the file's colour tags; untagged video is read as BT.601, limited range
(FFmpeg's rule, as every path of the playbook), where PyNvVideoCodec's own RGB takes BT.709 for every file. A file
that cannot be read or is refused is skipped and named.
Threads of this process decode (`loader`): DataLoader workers would each make a CUDA context.
The threads decode on a CUDA stream of their own, so that their work does not queue behind the training step's.
Each item first reads all of its file's packets, to place its frames exactly: on long videos, much of an item
(30 minutes of 720p: the whole 0.9 GB file, and about 0.3 s of Python that the threads take in turns, so one
process reads a few such files a second at most).
Each file's keyframes are also decoded once on the CPU: NVDEC goes on at a file's first picture size, so a
file whose size changes mid-stream is refused.
The GPU: `gpu`, else this rank's under torchrun (LOCAL_RANK), else GPU 0.

    clips = VideoClips(paths, k=16, size=224)   # gpu=N to choose one
    batches = loader(clips, batch_size=8, workers=8)   # decoding threads
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        for frames, names, skipped in batches: ...  # frames (B, K, 3, 224, 224) on the GPU; skipped [(path, why)]
"""

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, islice

import av
import PyNvVideoCodec as nvc
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import Dataset, DistributedSampler

K, SIZE = 16, 224  # 224: the input of CLIP and SigLIP ViT-B models, whose processors also cut the centre square
STREAMS, LOCK = {}, threading.Lock()  # the decoding threads' CUDA stream, by GPU: one, so one memory pool
SIZES = {}  # size_change's answers, by (path, time, size)
NVDEC_LACKS = "refused: NVDEC on this GPU lacks this format (CUDA error 801; gray 4:0:0 is one): read it on the CPU"
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


def nv12_to_rgb(nv12, h, w, first):
    """uint8 (N, 3, h, w) from NV12 surfaces (N, rows, pitch): the luma on the first 2/3 of the rows, then U and V
    interleaved at half size; converted by the matrix and range of the file's tags (`first`, a PyAV frame)."""
    kr, kb = KR_KB.get(int(first.colorspace), (0.299, 0.114))
    full = int(first.color_range) == 2 or first.format.name.startswith("yuvj")
    rows = nv12.shape[1] * 2 // 3
    y = (nv12[:, :h, :w].float() - (0 if full else 16)) / (255 if full else 219)
    uv = nv12[:, rows : rows + (h + 1) // 2, : 2 * ((w + 1) // 2)].unflatten(2, (-1, 2)).permute(0, 3, 1, 2)
    cb, cr = F.interpolate((uv.float() - 128) / (255 if full else 224), size=(h, w), mode="bilinear").unbind(1)
    r, b = y + 2 * (1 - kr) * cr, y + 2 * (1 - kb) * cb
    g = (y - kr * r - kb * b) / (1 - kr - kb)
    return torch.stack((r, g, b), 1).mul_(255)


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

    def __init__(self, paths, k=K, size=SIZE, gpu=None):
        self.paths, self.k, self.size = listed(paths), *sizes(k, size)
        self.gpu = (torch.device(rank_gpu("cuda")).index or 0) if gpu is None else gpu  # torchrun: this rank's
        self.device = f"cuda:{self.gpu}"

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        try:
            with LOCK:
                if self.gpu not in STREAMS:
                    STREAMS[self.gpu] = torch.cuda.Stream(self.gpu)
            stream = STREAMS[self.gpu]  # on the default stream, NVDEC's copies would wait for the training step
            with torch.cuda.device(self.gpu), torch.cuda.stream(stream):
                frames = self.read(self.paths[i], stream.cuda_stream)
            frames.record_stream(torch.cuda.default_stream(self.gpu))  # read there before its memory is reused
            return frames, self.paths[i], None
        except Exception as e:  # a broken or refused file is skipped and named; the epoch goes on
            if "Error code : 801" in str(e):  # CUDA's "not supported": a format NVDEC lacks, e.g. gray (4:0:0)
                return None, self.paths[i], NVDEC_LACKS
            return None, self.paths[i], why(self.paths[i], e)

    def read(self, path, stream=0):
        info = probe(path)
        first, n = info["first"], info["frames"]
        changed = size_change(path)
        if changed:  # NVDEC went on at the first size: where the size went down, other frames came back in silence
            raise ValueError(changed)
        refused = {  # what PyNvVideoCodec 2.2 was seen to get wrong (notebook 13)
            "refused: PyNvVideoCodec counts the frames never shown (an edit list, a cut)": info["hidden"],
            f"refused: PyNvVideoCodec returned wrong frames for 10-bit video; this module reads 8-bit 4:2:0 only, not "
            f"{first.format.name}": first.format.name not in ("yuv420p", "yuvj420p"),
            "refused: PyNvVideoCodec's frame indices drift near the end of MKV files": info["container"] == "matroska,webm",
        }  # fmt: skip
        for why, found in refused.items():
            if found:
                raise ValueError(why)
        want = uniform(n, self.k)
        unique = sorted(set(want))
        # after a seek into open-GOP video it returned other frames, and in MPEG-TS its seek finds no index entry:
        # read such files forward, no seek
        if info["open_gop"] or info["container"] == "mpegts":
            demuxer = nvc.CreateDemuxer(path)
            decoder = nvc.CreateDecoder(gpuid=self.gpu, codec=demuxer.GetNvCodecId(), cudacontext=0,
                                        cudastream=stream, usedevicememory=True)  # fmt: skip
            got, at = {}, 0
            for packet in chain(demuxer, [nvc.PacketData()]):  # the empty packet flushes the decoder at the end
                for frame in decoder.Decode(packet):  # in display order
                    if at in unique:
                        got[at] = torch.from_dlpack(frame).clone()  # copied: the decoder reuses its surfaces
                    at += 1
                if at > unique[-1]:
                    break
        else:
            decoder = nvc.SimpleDecoder(path, gpu_id=self.gpu, cuda_stream=stream, use_device_memory=True,
                                        output_color_type=nvc.OutputColorType.NATIVE)  # fmt: skip
            if len(decoder) != n:
                raise ValueError(f"PyNvVideoCodec counts {len(decoder)} frames, the packets {n}")
            got = {}
            for a in range(0, len(unique), 8):  # the frames borrow the decoder's surfaces: copied before the next ask
                chunk = unique[a : a + 8]
                frames = [torch.from_dlpack(f) for f in decoder.get_batch_frames_by_index(chunk)]
                got.update(zip(chunk, torch.stack(frames).unbind(0) if len(frames) == len(chunk) else ()))
        if len(got) != len(unique):
            raise ValueError(f"PyNvVideoCodec gave {len(got)} of the {len(unique)} frames asked")
        nv12 = torch.stack([got[j] for j in unique])
        rgb = nv12_to_rgb(nv12.flatten(2) if nv12.dim() == 4 else nv12, first.height, first.width, first)
        turn = int(first.rotation) // 90 % 4  # quarter turns counterclockwise, from the display matrix
        h, w = shown_size(first.height, first.width, info["sar"], turn, self.size)
        rgb = F.interpolate(rgb, (w, h) if turn % 2 else (h, w), mode="bilinear", antialias=True)
        rgb = torch.rot90(rgb.round_().clamp_(0, 255).to(torch.uint8), turn, dims=(2, 3))
        top, left = (h - self.size) // 2, (w - self.size) // 2
        rgb = rgb[[unique.index(j) for j in want], :, top : top + self.size, left : left + self.size]
        torch.cuda.current_stream().synchronize()  # the item is ready when its thread returns it
        return rgb


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


def loader(clips, batch_size=8, workers=8, seed=0):
    """Batches of this rank's share of the files (torch.distributed, when initialized), shuffled by `seed` and the
    epoch: call `.sampler.set_epoch(epoch)` on what it returns before each. Where the files do not divide evenly among
    the ranks, PyTorch's DistributedSampler repeats a few, so that every rank has as many batches. `workers`: decoding
    threads."""
    ranks, rank = this_rank()
    sampler = DistributedSampler(clips, num_replicas=ranks, rank=rank, shuffle=True, seed=seed)
    return ThreadLoader(clips, batch_size, workers, sampler)
