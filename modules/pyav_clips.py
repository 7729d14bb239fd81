"""K frames of every video in a folder, decoded by PyAV (FFmpeg) on the CPU, batched for training.

From the Accelerated Video Loading Playbook (notebook 22); needs only `pip install av torch`. An item is K evenly
spaced frames of one video, upright and with square pixels, as a player shows it, uint8 (K, 3, SIZE, SIZE): the
shorter side resized to SIZE, the centre cut out, so videos of any size batch together. Colour follows the file's
tags; untagged video is read as BT.601, limited range (FFmpeg's rule, as every path of the playbook). A file that
cannot be read is skipped and named.
Each item first reads all of its file's packets, to place its frames exactly: on long videos, much of an item
(30 minutes of 720p: the whole 0.9 GB file, and about 0.3 s of one CPU core).
Worker processes start by importing your script: build and read the loader under `if __name__ == "__main__":`.

    clips = VideoClips(paths, k=16, size=224)
    batches = loader(clips, batch_size=8, workers=4)
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        for frames, names, skipped in batches: ...  # frames (B, K, 3, 224, 224); skipped [(path, why)]
"""

import copy
import os
from functools import partial

import av
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

K, SIZE = 16, 224  # 224: the input of CLIP and SigLIP ViT-B models, whose processors also cut the centre square


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
    """Item i: (frames, path, None), or (None, path, why) for a file that cannot be read."""

    def __init__(self, paths, k=K, size=SIZE, threads=None):
        self.paths, self.k, self.size, self.threads = listed(paths), *sizes(k, size), threads

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        try:
            return self.read(self.paths[i]), self.paths[i], None
        except Exception as e:  # a broken file is skipped and named; the epoch goes on
            return None, self.paths[i], why(self.paths[i], e)

    def read(self, path):
        with av.open(path) as container:
            stream = video_stream(container)
            stream.thread_type, stream.thread_count = "AUTO", self.threads or 0  # FFmpeg's default: one thread
            packets = [p for p in container.demux(stream) if p.size]
            if stream.frames > len(packets):  # an MP4 whose index lists more frames than it holds
                raise ValueError(f"cut short: its index lists {stream.frames} frames, it holds {len(packets)}")
            # the frames shown, in presentation order (packets an edit list hides are marked discard; a stream-copy
            # cut may leave some without a time)
            shown = sorted((p.pts, p.is_keyframe) for p in packets if p.pts is not None and not p.is_discard)
            pts, index = [t for t, _ in shown], {t: j for j, (t, _) in enumerate(shown)}
            if len(index) < len(pts):
                raise ValueError(
                    "frames share a presentation time (overlapping pieces joined?), so their order is unknown: re-encode it"
                )
            if packets and not packets[0].is_keyframe:  # in decode order: before the first keyframe, nothing decodes
                raise ValueError(
                    "it starts between keyframes (a piece cut from a stream?): its first frames cannot be decoded"
                )
            check_order(container, stream, [p.pts for p in packets if p.pts is not None and not p.is_discard])
            # the keyframes' decode times: where MPEG-TS seeks to them
            dts = {p.pts: p.dts for p in packets if p.is_keyframe and p.dts is not None}
            key_of, key = [], 0  # for each frame, the keyframe a seek to it lands on
            for j, (_, is_key) in enumerate(shown):
                key = j if is_key else key
                key_of.append(key)
            want, got, frames, at = uniform(len(pts), self.k), {}, None, -1
            sar = stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio or 1  # the pixels' shape
            for j in sorted(set(want)):
                if frames is None or key_of[j] > at + 1:  # seek only to skip whole GOPs
                    key = pts[key_of[j]]
                    # to the keyframe's presentation time; where that lands past it (MPEG-TS), its decode time
                    for target in dict.fromkeys((key, dts.get(key, key))):
                        container.seek(target, stream=stream)
                        frames = container.decode(stream)
                        frame, at = self.next_frame(frames, index, j)
                        if at == j:
                            break
                else:
                    frame, at = self.next_frame(frames, index, j)
                if at != j:
                    raise ValueError(f"frame {j} of {len(pts)} did not decode")
                got[j] = self.picture(frame, sar)
        return torch.stack([got[j] for j in want])

    @staticmethod
    def next_frame(frames, index, j):
        """The next of the decoded `frames` at or past frame j, and its place (-1 where the stream ended first)."""
        for frame in frames:
            at = index.get(frame.pts, -1)
            if at >= j:
                return frame, at
        return None, -1

    def picture(self, frame, sar):
        """(3, size, size): scaled by FFmpeg (with the colour conversion), turned upright, the centre cut out."""
        turn = int(frame.rotation) // 90 % 4  # quarter turns counterclockwise, from the display matrix
        h, w = shown_size(frame.height, frame.width, sar, turn, self.size)
        sw, sh = (h, w) if turn % 2 else (w, h)
        rgb = torch.from_numpy(frame.to_ndarray(width=sw, height=sh, format="rgb24", interpolation="BILINEAR"))
        rgb = torch.rot90(rgb.permute(2, 0, 1), turn, dims=(1, 2))
        top, left = (h - self.size) // 2, (w - self.size) // 2
        return rgb[:, top : top + self.size, left : left + self.size]


def collate(items, empty):
    """(frames (B, K, 3, S, S), paths read, [(path, why) skipped]); `empty`, (0, K, 3, S, S), where every item of the
    batch failed."""
    good = [(f, p) for f, p, _ in items if f is not None]
    frames = torch.stack([f for f, _ in good]) if good else empty
    return frames, [p for _, p in good], [(p, why) for f, p, why in items if f is None]


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
    the ranks, PyTorch's DistributedSampler repeats a few, so that every rank has as many batches. Each worker's decoder
    gets its share of the cores."""
    if clips.threads is None:  # set on a copy: a later loader of these clips, with other workers, sets its own
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        clips = copy.copy(clips)
        clips.threads = max(1, cores // max(1, workers))
    ranks, rank = this_rank()
    sampler = DistributedSampler(clips, num_replicas=ranks, rank=rank, shuffle=True, seed=seed)
    # forkserver: a worker forked from a process that already runs threads (CUDA, a notebook) can hang in FFmpeg
    context = "forkserver" if workers else None
    empty = torch.empty((0, clips.k, 3, clips.size, clips.size), dtype=torch.uint8)  # a batch of failed items
    return DataLoader(clips, batch_size, sampler=sampler, num_workers=workers, collate_fn=partial(collate, empty=empty),
                      persistent_workers=workers > 0, multiprocessing_context=context)  # fmt: skip
