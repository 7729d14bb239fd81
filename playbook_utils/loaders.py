"""Training loaders over `read_frames` (notebook 21): a Dataset of sampled clips, a DataLoader on CPU workers
(`make_loader`), GPU loaders on threads (`GpuLoader`) or processes (`GpuProcessLoader`), and DALI's (`dali_loader`)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import multiprocessing
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import forkserver
from typing import NamedTuple

from playbook_utils import sampling, transforms
from playbook_utils.decoders import (
    PROBED_ENV,
    adapter,
    child_env,
    frame_size,
    read_frames,
    set_cpu_threads,
    video_info,
    why_unavailable,
)
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable, DecodeError, first_line, redact
from playbook_utils.resize import resize_uint8
from playbook_utils.transforms import CLIP_MEAN, CLIP_STD

__all__ = [
    "batch_of",
    "check_item_size",
    "close_loader",
    "collate_skipping",
    "dali_loader",
    "decode_ahead",
    "finish_sending",
    "GpuLoader",
    "GpuProcessLoader",
    "make_loader",
    "MAX_FRAME_PIXELS",
    "MAX_ITEM_BYTES",
    "parse_route",
    "share_of_cores",
    "Skipped",
    "start_worker_server",
    "VideoClipDataset",
    "worker_options",
]


class Skipped(NamedTuple):
    """An item the dataset could not deliver, carried to the main process instead of a crash (notebook 23):
    its index, its file and the cause (unreadable, refused, too short for the clip, or another size)."""

    index: int
    path: str
    cause: str


MAX_FRAME_PIXELS = 8192 * 8192  # a frame larger than 8K x 8K is refused before decoding (no 4K dataset meets it)
MAX_ITEM_BYTES = 2 * 2**30  # an item's decoded RGB frames (K x 3 x H x W bytes) above 2 GiB: refused before decoding


def check_item_size(path, info, count: int, backend: str | None, limits) -> None:
    """Raise `DecodeError` naming the file and the limit, from the probe and before decoding, where a frame exceeds
    `limits.max_frame_pixels` or `count` decoded RGB frames exceed `limits.max_item_bytes` (None: no limit)."""
    pixels = info.width * info.height
    if limits.max_frame_pixels is not None and pixels > limits.max_frame_pixels:
        raise DecodeError(
            path,
            f"frames of {info.width}x{info.height} ({pixels / 1e6:.0f} Mpixel) exceed max_frame_pixels "
            f"({limits.max_frame_pixels / 1e6:.0f} Mpixel); pass a larger one, or None, to read them",
            backend,
        )
    decoded = count * 3 * pixels
    if limits.max_item_bytes is not None and decoded > limits.max_item_bytes:
        raise DecodeError(
            path,
            f"{count} frames of {info.width}x{info.height} decode to {decoded / 2**20:.0f} MiB, above max_item_bytes "
            f"({limits.max_item_bytes / 2**20:.0f} MiB); pass a larger one, or None, or sample fewer frames",
            backend,
        )


def parse_route(backend, device: str) -> list[tuple[str, str]]:
    """[(backend, device), ...] from `backend`: one name (read on `device`), or a route, a sequence tried in order
    for each file, each entry a name (on `device`) or 'name@device' ('torchcodec@cuda', 'pyav@cpu')."""
    entries = [backend] if isinstance(backend, str) else list(backend)
    if not entries:
        raise ValueError("a route needs at least one backend")
    parts = [str(e).partition("@") for e in entries]
    return [(name, dev or device) for name, _, dev in parts]


class VideoClipDataset:
    """Item i: uint8 frames (K, 3, H, W) sampled from video i by `strategy` ('uniform' or 'clip'), decoded by `backend`
    (a library, or a route tried in order per file); `size` or mixed_sizes='list' for videos of several sizes.
    on_error='raise' raises an error naming the file, 'skip' returns a `Skipped` record. Notebook 21."""

    def __init__(
        self,
        paths,
        backend: str = "pyav",
        device: str = "cpu",
        strategy: str = "uniform",
        k: int = 16,
        clip_len: int = 8,
        stride: int = 2,
        seed: int = 0,
        size=None,
        on_error: str = "raise",
        mixed_sizes: str | None = None,
        max_frame_pixels: int | None = MAX_FRAME_PIXELS,
        max_item_bytes: int | None = MAX_ITEM_BYTES,
    ):
        if strategy not in ("uniform", "clip"):
            raise ValueError(f"strategy must be 'uniform' or 'clip', got {strategy!r}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if mixed_sizes not in (None, "list"):
            raise ValueError(f"mixed_sizes must be None or 'list', got {mixed_sizes!r}")
        self.on_error, self.mixed_sizes = on_error, mixed_sizes
        self.paths = [str(p) for p in paths]
        self.route = parse_route(backend, device)
        self.backend, self.device, self.strategy = self.route[0][0], device, strategy
        self.k, self.clip_len, self.stride, self.seed, self.size = k, clip_len, stride, seed, size
        self.max_frame_pixels, self.max_item_bytes = max_frame_pixels, max_item_bytes
        self._reference = None
        self._refused: dict = {}  # (i, backend, device): why that route entry refused video i when it read it

    def __len__(self) -> int:
        return len(self.paths)

    def backend_for(self, i: int) -> tuple[str, str]:
        """(backend, device) of the first route entry that accepts video i (`why_unavailable`: its codec, its
        traits, the library here; and not refused by it when read, `read`); `BackendUnavailable` naming every
        entry's reason where none does."""
        if len(self.route) == 1:
            return self.route[0]
        reasons = []
        for b, d in self.route:
            why = self._refused.get((i, b, d)) or why_unavailable(b, d, self.paths[i])
            if why is None:
                return b, d
            reasons.append(f"{b} on {d}: {why}")
        raise BackendUnavailable(self.paths[i], "no backend of the route takes it (" + "; ".join(reasons) + ")", None)

    def read(self, i: int, idx: list[int], entry: tuple[str, str] | None = None):
        """Frames `idx` of video i, read by its route entry (`backend_for`, or `entry`) and moved to this dataset's
        device; an entry that refuses the file when it reads it passes it to the next entry, for good."""
        entry = entry or self.backend_for(i)
        while True:
            if len(self.route) > 1 and (i, *entry) in self._refused:
                entry = self.backend_for(i)
            backend, device = entry
            try:
                frames = read_frames(self.paths[i], idx, backend=backend, device=device)
            except BackendUnavailable as e:
                if len(self.route) == 1:
                    raise
                self._refused[(i, backend, device)] = f"refused when read: {e.cause}"
                continue
            return frames.to(self.device) if device != self.device else frames

    def indices(self, i: int) -> list[int]:
        """The frames item i reads; `DecodeError` for a file that cannot be read or is too short for the clip."""
        n = video_info(self.paths[i], self.backend).num_frames
        if self.strategy == "uniform":
            return sampling.uniform(n, self.k)
        span = sampling.clip_span(self.clip_len, self.stride)
        if span > n:
            raise DecodeError(
                self.paths[i],
                f"too short for the clip: {n} frames, and a clip of {self.clip_len} "
                f"frames at stride {self.stride} spans {span}",
                self.backend,
            )
        return sampling.random_clips(n, self.clip_len, self.stride, 1, seed=self.seed * 1_000_003 + i)[0]

    def _other_size(self, i: int) -> str | None:
        """Why item i does not fit the batches, or None: neither `size` nor mixed_sizes='list' given, and another size
        than the first video that can be probed (the same in every worker and on every rank)."""
        if self.size is not None or self.mixed_sizes == "list":
            return None
        own = frame_size(video_info(self.paths[i], self.backend))
        if self._reference is None:  # (path, (H, W)), kept once found
            for p in self.paths:
                try:
                    self._reference = (p, frame_size(video_info(p)))
                    break
                except DecodeError:
                    pass
        ref = self._reference
        if ref is None or own == ref[1]:
            return None
        return (
            f"{self.paths[i]}: frames of {own[1]}x{own[0]} (width x height) do not fit batches of {ref[1][1]}x{ref[1][0]} "
            f"(the size of {ref[0]}); pass size=(H, W) to resize every video, or mixed_sizes='list'"
        )

    def __getitem__(self, i: int):
        try:
            count = self.k if self.strategy == "uniform" else self.clip_len
            check_item_size(self.paths[i], video_info(self.paths[i], self.backend), count, self.backend, self)
            idx = self.indices(i)
            if other := self._other_size(i):
                if self.on_error == "raise":
                    raise ValueError(other)
                return Skipped(i, redact(self.paths[i]), other)
            frames = self.read(i, idx)
        except (DecodeError, BackendUnavailable) as e:
            if self.on_error == "raise":
                raise
            return Skipped(i, redact(self.paths[i]), str(e))
        if self.size is not None and tuple(frames.shape[-2:]) != tuple(self.size):
            frames = resize_uint8(frames, self.size)
        return frames


def batch_of(videos):
    """One uint8 tensor (B, K, 3, H, W) of `videos` of one shape (in a DataLoader worker, made in shared memory
    as PyTorch's default collate does), else the list of them (mixed_sizes='list')."""
    import torch

    if len({tuple(v.shape) for v in videos}) == 1:
        return torch.utils.data.default_collate(videos)
    return list(videos)


def collate_skipping(items):
    """Collate for on_error='skip': (the good items as `batch_of` makes them, or None when none is good;
    the list of `Skipped`). Every item lands in exactly one of the two."""
    good = [x for x in items if not isinstance(x, Skipped)]
    return (batch_of(good) if good else None), [x for x in items if isinstance(x, Skipped)]


def _worker_start(threads: int, probed: str, worker_id: int) -> None:
    """DataLoader worker start-up: `threads` decoder threads (see make_loader), the parent's import checks trusted
    (`decoders.child_env`), and the last batch let out before exit (`finish_sending`)."""
    os.environ[PROBED_ENV] = probed
    set_cpu_threads(threads)
    atexit.unregister(finish_sending)  # once per process
    atexit.register(finish_sending)


def finish_sending(timeout_s: float = 10.0) -> None:
    """Wait (at most `timeout_s`) for this process's multiprocessing queue feeder threads, at a loader worker's exit, so
    that interpreter shutdown does not abort it mid-send (SIGABRT). Notebook 23."""
    deadline = time.monotonic() + timeout_s
    for t in threading.enumerate():
        if t.name == "QueueFeederThread" and t.is_alive() and t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()))


def make_loader(
    paths,
    backend: str = "pyav",
    batch_size: int = 4,
    num_workers: int = 2,
    timeout_s: float = 600.0,
    decoder_threads: int | None = None,
    prefetch_factor: int | None = None,
    **dataset_kwargs,
):
    """A `torch.utils.data.DataLoader` of uint8 batches (B, K, 3, H, W) decoded on the CPU in workers (notebook 21).
    dataset_kwargs go to `VideoClipDataset`. Workers start by forkserver (a forked child of a CUDA-threaded parent
    may deadlock) and raise RuntimeError after `timeout_s` without a batch."""
    import torch

    ds = VideoClipDataset(paths, backend=backend, device="cpu", **dataset_kwargs)
    collate = collate_skipping if ds.on_error == "skip" else batch_of
    return torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=num_workers,
        collate_fn=collate,
        **worker_options(num_workers, timeout_s=timeout_s, decoder_threads=decoder_threads),
        **({"prefetch_factor": prefetch_factor} if prefetch_factor and num_workers > 0 else {}),
    )


def close_loader(loader, now: bool = False) -> list[int]:
    """End the workers of a `make_loader` loader (or a `ShardedLoader`) now, even mid-epoch: each finishes its batch, or
    with `now` is killed at once (SIGTERM). Returns the workers' exit codes (notebook 23)."""
    inner = getattr(loader, "loader", loader)  # a ShardedLoader holds its DataLoader as .loader
    it = getattr(inner, "_iterator", None)
    if it is None or not hasattr(it, "_shutdown_workers"):
        return []
    if now and not getattr(it, "_shutdown", True) and not hasattr(it, "_pin_memory_thread"):
        import torch.utils.data._utils as data_utils

        if it._worker_pids_set:  # no longer watched: an ended worker is no failure to report
            data_utils.signal_handling._remove_worker_pids(id(it))
            it._worker_pids_set = False
        for w in it._workers:
            if w.is_alive():
                w.terminate()
        for w in it._workers:
            w.join(timeout=5)
    it._shutdown_workers()
    inner._iterator = None
    return [w.exitcode for w in it._workers]


def share_of_cores(num_workers: int) -> int:
    """Threads per decoder when `num_workers` workers decode side by side: the usable cores divided among them."""
    return max(1, len(os.sched_getaffinity(0)) // max(1, num_workers))


START_METHOD = "forkserver"  # how loader workers start (make_loader explains why)
FORKSERVER_PRELOAD = ("torch", "playbook_utils.loaders")  # what the forkserver imports once for every worker


def start_worker_server() -> None:
    """Start `make_loader`'s forkserver (`START_METHOD`) now, in the background, so that its import of
    FORKSERVER_PRELOAD is not counted in the first loader's time to its first batch (notebook 21)."""
    if START_METHOD == "forkserver":
        multiprocessing.set_forkserver_preload(list(FORKSERVER_PRELOAD))
        forkserver.ensure_running()


def worker_options(
    num_workers: int, start_method: str | None = None, timeout_s: float = 600.0, decoder_threads: int | None = None
) -> dict:
    """The DataLoader arguments of `make_loader`'s workers (also `distributed.sharded_loader`'s and
    `shards.shard_loader`'s): start method, persistent, a batch timeout, decoder threads sharing the cores; {} for 0."""
    if num_workers <= 0:
        return {}
    start_method = start_method or START_METHOD
    if start_method == "forkserver":
        multiprocessing.set_forkserver_preload(list(FORKSERVER_PRELOAD))  # no effect once the server runs
    threads = decoder_threads if decoder_threads is not None else share_of_cores(num_workers)
    return {
        "multiprocessing_context": start_method,
        "timeout": timeout_s,
        "persistent_workers": True,
        "worker_init_fn": functools.partial(_worker_start, threads, child_env()[PROBED_ENV]),
    }


def decode_ahead(fn, items, threads: int, ahead: int):
    """`fn(item)` for each item, yielded in order, computed by `threads` threads with at most `ahead` items in flight
    (GpuLoader, `distributed.sharded_loader`). Closing the generator early cancels the items not yet started."""
    items = iter(items)
    pool = ThreadPoolExecutor(threads)
    try:
        pending = deque(pool.submit(fn, x) for x in itertools.islice(items, ahead))
        while pending:
            result = pending.popleft().result()
            pending.extend(pool.submit(fn, x) for x in itertools.islice(items, 1))
            yield result
    finally:  # a consumer that stops early (break, an error) waits only for the items being decoded now
        pool.shutdown(wait=True, cancel_futures=True)


def _deliver(loader, videos, copy: bool = False):
    """Count `videos` in `loader.frames_delivered`; return what GpuLoader and GpuProcessLoader yield: one new
    (B, K, 3, S, S) tensor when the videos have the same length, else the list of them (copied with `copy`)."""
    import torch

    loader.frames_delivered += sum(v.shape[0] for v in videos)
    if len({tuple(v.shape) for v in videos}) == 1:
        return torch.stack(videos)
    return [v.clone() for v in videos] if copy else videos


class GpuLoader:
    """Model-ready float16 batches (B, K, 3, size, size) decoded on the GPU by `threads` threads in this process,
    resized and normalized there (`transforms.to_model_batch`); `frames_delivered` counts frames. on_error='skip'
    leaves out a file that cannot be read, its (path, why) in `skipped`. Notebook 21."""

    def __init__(
        self,
        paths,
        backend: str = "pynvvideocodec",
        device: str = "cuda",
        threads: int = 8,
        batch_size: int = 4,
        size: int = 224,
        strategy: str = "all",
        chunk: int = 64,
        **dataset_kwargs,
    ):
        self.ds = VideoClipDataset(
            paths,
            backend=backend,
            device=device,
            strategy="uniform" if strategy == "all" else strategy,
            **dataset_kwargs,
        )
        self.all_frames = strategy == "all"
        self.threads, self.batch_size, self.size, self.chunk = threads, batch_size, size, chunk
        self.lookahead = 2 * threads  # videos decoded or in flight ahead of the consumer
        self.frames_delivered = 0
        self.skipped: list[tuple[str, str]] = []
        self._streams, self._lock = {}, threading.Lock()  # the decoding threads' CUDA stream, by device (`_stream`)

    def __len__(self) -> int:
        return (len(self.ds) + self.batch_size - 1) // self.batch_size

    def _item(self, i: int):
        import torch

        ds = self.ds
        try:
            if self.all_frames:
                idx = sampling.all_frames(video_info(ds.paths[i], ds.backend).num_frames)
            else:
                idx = ds.indices(i)
            entry = ds.backend_for(i)  # once per video, not per chunk
            with self._stream(*entry):
                parts = []
                for a in range(0, len(idx), self.chunk):
                    frames = ds.read(i, idx[a : a + self.chunk], entry)
                    parts.append(transforms.to_model_batch(frames, self.size, dtype=torch.float16))
                out = torch.cat(parts)
                if out.is_cuda:
                    torch.cuda.current_stream(out.device).synchronize()  # the item is ready when the thread returns
        except (DecodeError, BackendUnavailable) as e:
            if ds.on_error == "raise":
                raise
            self.skipped.append((redact(ds.paths[i]), str(e)))
            return None
        return out

    def _stream(self, backend: str, device: str):
        """The decoding threads' CUDA stream where the library works on torch's current one (its adapter's
        `OWN_STREAM`): on the default stream, their work would queue behind the training step's. One stream for all
        the threads, so that they share one memory pool, as on the default stream (the allocator keeps one a stream)."""
        import torch

        if Device.parse(device).kind not in adapter(backend).OWN_STREAM:
            return contextlib.nullcontext()
        with self._lock:
            if device not in self._streams:
                self._streams[device] = torch.cuda.Stream(device)
        return torch.cuda.stream(self._streams[device])

    def __iter__(self):
        import torch

        batch = []
        for video in decode_ahead(self._item, range(len(self.ds)), self.threads, self.lookahead):
            if video is None:  # skipped (on_error='skip')
                continue
            if video.is_cuda:  # made on the threads' stream: its memory is not reused before this stream reads it
                video.record_stream(torch.cuda.current_stream(video.device))
            batch.append(video)
            if len(batch) == self.batch_size:
                yield _deliver(self, batch)
                batch = []
        if batch:
            yield _deliver(self, batch)


class GpuProcessLoader:
    """Model-ready batches from `processes` worker processes, each a `GpuLoader` of `threads` threads over every
    `processes`-th video, handed over by CUDA IPC in the order they finish. Takes GpuLoader's arguments. Notebook 21."""

    def __init__(self, paths, processes: int = 4, threads: int = 2, batch_size: int = 4, **loader_kwargs):
        self.paths = [str(p) for p in paths]
        self.processes, self.threads, self.batch_size = processes, threads, batch_size
        self.kwargs = loader_kwargs
        # videos ahead of the consumer: each worker's GpuLoader look-ahead, plus the queue between them
        self.lookahead = processes * 2 * threads + 2 * processes
        self.frames_delivered = 0

    def __len__(self) -> int:
        return (len(self.paths) + self.batch_size - 1) // self.batch_size

    @property
    def worker_exit_codes(self) -> list:
        """Exit codes of the last epoch's worker processes (None while one runs; negative: ended by that signal)."""
        return [p.exitcode for p in getattr(self, "_workers", [])]

    def __iter__(self):
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        q, finished_epoch, released = ctx.Queue(maxsize=2 * self.processes), ctx.Event(), ctx.Event()
        ranks = [r for r in range(self.processes) if self.paths[r :: self.processes]]
        procs = [
            ctx.Process(
                target=_process_loader_worker,
                daemon=True,
                args=(self.paths[r :: self.processes], self.threads, self.kwargs, r, q, finished_epoch, released),
            )
            for r in ranks
        ]
        self._workers = procs
        for p in procs:
            p.start()
        try:
            done, batch, waited = set(), [], 0.0
            while len(done) < len(procs):
                try:
                    kind, payload = q.get(timeout=5)
                    waited = 0.0
                except queue.Empty:  # a worker that died without a word (a crash in a library) ends the epoch
                    waited += 5
                    dead = [(r, p.exitcode) for r, p in enumerate(procs) if r not in done and not p.is_alive()]
                    if dead or waited >= 600:
                        raise RuntimeError(
                            f"GpuProcessLoader: workers (rank, exit code) {dead} ended without finishing"
                            if dead
                            else "GpuProcessLoader: no video in 600 s"
                        ) from None
                    continue
                if kind == "error":
                    raise RuntimeError(f"GpuProcessLoader worker: {payload}")
                if kind == "done":
                    done.add(payload)
                    continue
                batch.append(payload)  # a worker's memory until the batch is made: one copy, there
                del payload
                if len(batch) == self.batch_size:
                    out, batch = _deliver(self, batch, copy=True), []  # the workers' tensors let go before the
                    yield out  # consumer holds the copy: a break here finds none of theirs still mapped
            if batch:
                out, batch = _deliver(self, batch, copy=True), []
                yield out
        finally:
            batch = None  # a partial batch of the workers' tensors, where an error ended the epoch
            finished_epoch.set()
            try:
                _drain(q, dict(zip(ranks, procs)))
            finally:
                released.set()
                for p in procs:
                    p.join(timeout=30)
                    if p.is_alive():
                        p.kill()


def _drain(q, procs: dict, limit_s: float = 30.0) -> None:
    """Take and drop every message the workers `procs` ({rank: process}) sent and no one took, until each has said
    goodbye or died (at most `limit_s`), so that no CUDA IPC tensor is still mapped when its worker exits."""
    end, gone = time.monotonic() + limit_s, set()
    while time.monotonic() < end and not all(r in gone or not p.is_alive() for r, p in procs.items()):
        try:
            kind, payload = q.get(timeout=0.2)
        except Exception:  # nothing yet (Empty), or a message whose worker is gone and cannot be rebuilt
            continue
        if kind == "bye":
            gone.add(payload)
        del payload


def _put_unless(q, item, stop) -> bool:
    """Put `item` on the bounded queue `q`, waiting for room unless `stop` is set; whether it was put."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.2)
            return True
        except queue.Full:
            continue
    return False


def _process_loader_worker(paths, threads, kwargs, rank, q, finished_epoch, released):
    """One worker of `GpuProcessLoader`: a GpuLoader over its share of the videos, one video per message, then
    ('bye', rank); stops early once `finished_epoch` is set and exits once `released` is."""
    videos = iter(GpuLoader(paths, threads=threads, batch_size=1, **kwargs))
    stopped = False
    try:
        for batch in videos:
            if not _put_unless(q, ("video", batch[0]), finished_epoch):
                stopped = True
                break
    except Exception as e:  # reported to the training process, which raises it with the cause
        _put_unless(q, ("error", f"rank {rank}: {type(e).__name__}: {first_line(e)[:300]}"), finished_epoch)
    finally:
        videos.close()  # its decoding threads end here, before the process does
    if not stopped and _put_unless(q, ("done", rank), finished_epoch):
        finished_epoch.wait(timeout=3600)
    try:
        q.put(("bye", rank), timeout=30)
    except queue.Full:  # the training process takes nothing any more: nothing to wait for
        return
    released.wait(timeout=60)


def dali_loader(
    paths,
    sequence_length: int = 32,
    batch_size: int = 4,
    size: int = 224,
    device_id: int = 0,
    num_threads: int = 8,
    prefetch: int = 2,
):
    """A DALI pipeline + `DALIGenericIterator` of float16 (B, L, 3, size, size) sequences of `sequence_length`
    consecutive frames, decoded on NVDEC, resized and normalized with CLIP's statistics in the graph. Notebook 21."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id, prefetch_queue_depth=prefetch)
    def pipe():
        video, _ = fn.experimental.readers.video(
            device="gpu",
            filenames=[str(p) for p in paths],
            labels=list(range(len(paths))),
            sequence_length=sequence_length,
            stride=1,
            step=sequence_length,
            name="reader",
        )
        video = fn.resize(video, resize_x=size, resize_y=size, antialias=True)
        return fn.crop_mirror_normalize(
            video,
            dtype=types.FLOAT16,
            output_layout="FCHW",
            mean=[255 * m for m in CLIP_MEAN],
            std=[255 * s for s in CLIP_STD],
        )

    p = pipe()
    p.build()
    return DALIGenericIterator(
        [p], ["video"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
    )
