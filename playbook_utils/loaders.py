"""Training loaders over `read_frames`: a Dataset of sampled clips and a DataLoader factory (notebook 21).

For the CPU libraries (and TorchCodec on the CPU) the PyTorch way is worker processes: each worker
decodes whole samples and the main process only collates and copies. `measure_loader` runs a loader
against a simulated training step and reports how much of each step waited for data.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple


class Skipped(NamedTuple):
    """An item the dataset could not decode, carried to the main process instead of a crash (notebook 23)."""

    index: int
    path: str
    cause: str


class VideoClipDataset:
    """Item i: uint8 frames (K, 3, H, W) sampled from video i by `strategy`, decoded by `backend`.

    strategy: 'uniform' (K = k frames over the video) or 'clip' (one random clip of `clip_len`
    frames at `stride`, drawn from `seed` and the item index, so epochs are reproducible).
    All videos must share one size, or give `size` (H, W) to resize on the decoding side.
    on_error='raise' stops at the first bad file with its DecodeError; 'skip' returns a `Skipped`
    record for it, which `collate_skipping` sets aside so the epoch goes on.
    """

    def __init__(self, paths, backend: str = "pyav", device: str = "cpu", strategy: str = "uniform",
                 k: int = 16, clip_len: int = 8, stride: int = 2, seed: int = 0, size=None,
                 on_error: str = "raise"):
        if strategy not in ("uniform", "clip"):
            raise ValueError(f"strategy must be 'uniform' or 'clip', got {strategy!r}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.on_error = on_error
        self.paths = [str(p) for p in paths]
        self.backend, self.device, self.strategy = backend, device, strategy
        self.k, self.clip_len, self.stride, self.seed, self.size = k, clip_len, stride, seed, size

    def __len__(self) -> int:
        return len(self.paths)

    def indices(self, i: int) -> list[int]:
        from playbook_utils import sampling
        from playbook_utils.decoders import video_info

        n = video_info(self.paths[i]).num_frames
        if self.strategy == "uniform":
            return sampling.uniform(n, self.k)
        return sampling.random_clips(n, self.clip_len, self.stride, 1, seed=self.seed * 1_000_003 + i)[0]

    def __getitem__(self, i: int):
        import torch
        import torch.nn.functional as F

        from playbook_utils.decoders import read_frames
        from playbook_utils.errors import BackendUnavailable, DecodeError

        try:
            frames = read_frames(self.paths[i], self.indices(i), backend=self.backend, device=self.device)
        except (DecodeError, BackendUnavailable) as e:
            if self.on_error == "raise":
                raise
            return Skipped(i, self.paths[i], str(e))
        if self.size is not None and tuple(frames.shape[-2:]) != tuple(self.size):
            x = F.interpolate(frames.float(), size=tuple(self.size), mode="bilinear", antialias=True)
            frames = x.round_().clamp_(0, 255).to(torch.uint8)
        return frames


def collate_skipping(items):
    """Collate for on_error='skip': (uint8 batch of the good items or None, list of `Skipped`)."""
    import torch

    good = [x for x in items if not isinstance(x, Skipped)]
    return (torch.stack(good) if good else None), [x for x in items if isinstance(x, Skipped)]


def _worker_start(threads: int, probed: str, worker_id: int) -> None:
    """DataLoader worker start-up: this worker's decoders use `threads` threads (see make_loader), and the
    imports its parent probed need no second probe here (`decoders.child_env`)."""
    from playbook_utils.decoders import PROBED_ENV, set_cpu_threads

    os.environ[PROBED_ENV] = probed
    set_cpu_threads(threads)


def make_loader(paths, backend: str = "pyav", batch_size: int = 4, num_workers: int = 2,
                pin_memory: bool = False, shuffle: bool = False, start_method: str = "spawn",
                timeout_s: float = 600.0, decoder_threads: int | None = None, **dataset_kwargs):
    """A `torch.utils.data.DataLoader` of uint8 batches (B, K, 3, H, W) decoded on the CPU in workers.

    Workers start with `start_method` ('spawn' by default, not Linux's 'fork'): on the H200 machine (32
    cores, Python 3.12) a forked PyAV worker of notebook 21 hung for 20 minutes without a batch, its parent
    multi-threaded by CUDA and the notebook kernel, which Python 3.12 warns may deadlock a forked child.
    A spawned worker starts from a fresh interpreter (a few seconds per worker, once: they persist); a
    script that builds the loader needs the `if __name__ == "__main__":` guard, as on macOS and Windows.
    A worker that delivers no batch for `timeout_s` seconds raises RuntimeError instead of hanging.
    Each worker's PyAV and TorchCodec decoders use `decoder_threads` threads, by default the cores divided
    among the workers: a decoder left to its default takes every core, so N workers would run N x cores
    threads (notebook 10 measures what the extra frame threads cost at each seek).
    """
    import torch

    ds = VideoClipDataset(paths, backend=backend, device="cpu", **dataset_kwargs)
    collate = collate_skipping if ds.on_error == "skip" else None
    return torch.utils.data.DataLoader(ds, batch_size=batch_size, num_workers=num_workers, shuffle=shuffle,
                                       pin_memory=pin_memory, collate_fn=collate,
                                       **worker_options(num_workers, start_method, timeout_s, decoder_threads))


def share_of_cores(num_workers: int) -> int:
    """Threads per decoder when `num_workers` workers decode side by side: the usable cores divided among them."""
    return max(1, len(os.sched_getaffinity(0)) // max(1, num_workers))


def worker_options(num_workers: int, start_method: str = "spawn", timeout_s: float = 600.0,
                   decoder_threads: int | None = None) -> dict:
    """The DataLoader arguments of `make_loader`'s workers (also `distributed.sharded_loader`'s): started by
    `start_method`, persistent, a batch timeout, and decoders that share the cores; {} without workers."""
    import functools

    from playbook_utils.decoders import PROBED_ENV, child_env

    if num_workers <= 0:
        return {}
    threads = decoder_threads if decoder_threads is not None else share_of_cores(num_workers)
    return {"multiprocessing_context": start_method, "timeout": timeout_s, "persistent_workers": True,
            "worker_init_fn": functools.partial(_worker_start, threads, child_env()[PROBED_ENV])}


def measure_loader(loader, step_s: float, steps: int, device: str = "cpu", warmup: int = 2,
                   max_seconds: float | None = None, min_steps: int = 3) -> dict:
    """Run `steps` simulated training steps of `step_s` seconds, fed by `loader`; return the data wait.

    Each step waits for the next batch (the time counted as data wait), copies it to `device`, then
    'trains' for `step_s` (sleeping, which leaves the CPU to the workers as a GPU step would). Returns
    {'wait_fraction', 'wait_s_per_step', 'step_s', 'samples_per_s', 'steps', 'stopped_by_time'}; batches
    are recycled when the loader runs out before `steps`. `max_seconds` ends the measurement early
    (after at least `min_steps` measured steps): a slow configuration, such as one worker decoding 1080p
    clips, is then measured over fewer steps instead of holding the run for minutes.
    """
    it = iter(loader)
    waits, samples, start, rates = [], 0, None, []
    for s in range(steps + warmup):
        if (max_seconds is not None and start is not None and len(waits) >= min_steps
                and time.perf_counter() - start > max_seconds):
            break
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        batch = batch.to(device, non_blocking=True)
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)
        t1 = time.perf_counter()
        if s == warmup:
            start = t0
        time.sleep(step_s)
        if s >= warmup:
            waits.append(t1 - t0)
            samples += batch.shape[0]
            rates.append((batch.shape[0], time.perf_counter() - t0))
    total = time.perf_counter() - start
    wait = sum(waits)
    from playbook_utils.verdicts import block_rates, spread_pct

    return {"wait_fraction": wait / total, "wait_s_per_step": wait / len(waits), "step_s": step_s,
            "samples_per_s": samples / total, "samples_per_s_spread_pct": spread_pct(block_rates(*zip(*rates))),
            "steps": len(waits), "stopped_by_time": len(waits) < steps}


def decode_ahead(fn, items, threads: int, ahead: int):
    """`fn(item)` for each item, results yielded in order, computed by `threads` threads with at most `ahead`
    items in flight (GpuLoader, and the GPU ranks of `distributed.sharded_loader`): decoders on the GPU work
    while Python waits, so threads keep several busy without the copies that worker processes would need."""
    import itertools
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    items = iter(items)
    with ThreadPoolExecutor(threads) as pool:
        pending = deque(pool.submit(fn, x) for x in itertools.islice(items, ahead))
        while pending:
            result = pending.popleft().result()
            pending.extend(pool.submit(fn, x) for x in itertools.islice(items, 1))
            yield result


def _deliver(loader, videos, copy: bool = False):
    """Count `videos` in `loader.frames_delivered` and make them one batch (GpuLoader, GpuProcessLoader)."""
    loader.frames_delivered += sum(v.shape[0] for v in videos)
    return _videos_to_batch(videos, copy)


def _videos_to_batch(videos, copy: bool = False):
    """One (B, K, 3, S, S) tensor when the videos have the same length, else the list of them (videos of
    different lengths read whole): what GpuLoader and GpuProcessLoader yield. The stacked tensor is always
    new memory; with `copy`, so is each video of a list (GpuProcessLoader: the videos it got belong to
    its worker processes)."""
    import torch

    if len({tuple(v.shape) for v in videos}) == 1:
        return torch.stack(videos)
    return [v.clone() for v in videos] if copy else videos


class GpuLoader:
    """Model-ready batches decoded on the GPU by `threads` threads in this process (notebook 21).

    Item i is video i: every frame (strategy='all', read in chunks of `chunk` frames) or the frames
    `VideoClipDataset` samples, decoded by a GPU backend (pynvvideocodec, torchcodec, pyav) straight
    into GPU memory, then resized to `size` and normalized there (`transforms.to_model_batch`).
    Threads suit GPU decoders: the decode runs on NVDEC while Python waits, and the frames never leave
    the GPU, which worker processes could not share without copies. Yields float16 tensors
    (B, K, 3, size, size); `frames_delivered` counts the frames handed out so far. `measure_flat_out`
    times one flat out.
    """

    def __init__(self, paths, backend: str = "pynvvideocodec", device: str = "cuda", threads: int = 8,
                 batch_size: int = 4, size: int = 224, strategy: str = "all", chunk: int = 64, **dataset_kwargs):
        self.ds = VideoClipDataset(paths, backend=backend, device=device,
                                   strategy="uniform" if strategy == "all" else strategy, **dataset_kwargs)
        self.all_frames = strategy == "all"
        self.threads, self.batch_size, self.size, self.chunk = threads, batch_size, size, chunk
        self.frames_delivered = 0

    def __len__(self) -> int:
        return (len(self.ds) + self.batch_size - 1) // self.batch_size

    def _item(self, i: int):
        import torch

        from playbook_utils import sampling, transforms
        from playbook_utils.decoders import read_frames, video_info

        ds = self.ds
        idx = sampling.all_frames(video_info(ds.paths[i]).num_frames) if self.all_frames else ds.indices(i)
        parts = []
        for a in range(0, len(idx), self.chunk):
            frames = read_frames(ds.paths[i], idx[a:a + self.chunk], backend=ds.backend, device=ds.device)
            parts.append(transforms.to_model_batch(frames, self.size, dtype=torch.float16))
        out = torch.cat(parts)
        if out.is_cuda:
            torch.cuda.current_stream(out.device).synchronize()  # the item is ready when the thread returns
        return out

    def __iter__(self):
        batch = []
        for video in decode_ahead(self._item, range(len(self.ds)), self.threads, 2 * self.threads):
            batch.append(video)
            if len(batch) == self.batch_size:
                yield _deliver(self, batch)
                batch = []
        if batch:
            yield _deliver(self, batch)


class GpuProcessLoader:
    """Model-ready batches from `processes` worker processes, each a `GpuLoader` of `threads` threads over
    every `processes`-th video (notebook 21).

    One Python process drives only so many decoders: notebook 20's ceiling sweep needs several processes
    to keep every NVDEC engine busy. Here each worker decodes, resizes and normalizes on the GPU as
    `GpuLoader` does, and hands each finished video to this process through a bounded
    `torch.multiprocessing` queue: a CUDA tensor travels as a CUDA IPC handle (no copy through the
    host), a CPU tensor through shared memory. Videos arrive in the order they finish, not in index
    order; each is still exactly the frames asked for. A worker stays alive until the epoch ends,
    since CUDA IPC memory belongs to the process that made it. Takes GpuLoader's arguments.
    """

    def __init__(self, paths, processes: int = 4, threads: int = 2, batch_size: int = 4, **loader_kwargs):
        self.paths = [str(p) for p in paths]
        self.processes, self.threads, self.batch_size = processes, threads, batch_size
        self.kwargs = loader_kwargs
        self.frames_delivered = 0

    def __len__(self) -> int:
        return (len(self.paths) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        import queue as queue_module

        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        q, finished_epoch = ctx.Queue(maxsize=2 * self.processes), ctx.Event()
        procs = [ctx.Process(target=_process_loader_worker, daemon=True,
                             args=(self.paths[r::self.processes], self.threads, self.kwargs, r, q, finished_epoch))
                 for r in range(self.processes) if self.paths[r::self.processes]]
        for p in procs:
            p.start()
        try:
            done, batch, waited = set(), [], 0.0
            while len(done) < len(procs):
                try:
                    kind, payload = q.get(timeout=5)
                    waited = 0.0
                except queue_module.Empty:   # a worker that died without a word (a crash in a library) ends the epoch
                    waited += 5
                    dead = [(r, p.exitcode) for r, p in enumerate(procs) if r not in done and not p.is_alive()]
                    if dead or waited >= 600:
                        raise RuntimeError(f"GpuProcessLoader: workers (rank, exit code) {dead} ended without "
                                           f"finishing" if dead else "GpuProcessLoader: no video in 600 s") from None
                    continue
                if kind == "error":
                    raise RuntimeError(f"GpuProcessLoader worker: {payload}")
                if kind == "done":
                    done.add(payload)
                    continue
                batch.append(payload)   # a worker's memory until the batch is made: one copy, there
                del payload
                if len(batch) == self.batch_size:
                    yield _deliver(self, batch, copy=True)
                    batch = []
            if batch:
                yield _deliver(self, batch, copy=True)
        finally:
            finished_epoch.set()
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()


def _process_loader_worker(paths, threads, kwargs, rank, q, finished_epoch):
    """One worker of `GpuProcessLoader`: a GpuLoader over its share of the videos, one video per message."""
    try:
        for batch in GpuLoader(paths, threads=threads, batch_size=1, **kwargs):
            q.put(("video", batch[0]))
    except Exception as e:  # reported to the training process, which raises it with the cause
        from playbook_utils.errors import first_line

        q.put(("error", f"rank {rank}: {type(e).__name__}: {first_line(e)[:300]}"))
    q.put(("done", rank))
    finished_epoch.wait(timeout=3600)   # CUDA IPC: the tensors sent must outlive their use in the parent


def measure_flat_out(batches, warmup_batches: int = 0) -> dict:
    """Run an iterable of model-ready batches flat out (no training step): a `GpuLoader`, a `GpuProcessLoader`,
    or a `dali_loader` seen through `_DaliVideos`. Returns {'frames_per_s', 'batches', 'seconds', 'frames',
    'startup_s', 'clock_start'} (notebook 21).

    With `warmup_batches`, the clock starts when that many batches have arrived, and only later frames count:
    the steady rate of a loader whose start (processes, CUDA contexts, decoders) an epoch pays once.
    'startup_s' is the time until then. 'frames_per_s_spread_pct' is the spread of the rates of four runs of
    consecutive batches (`verdicts.block_rates`).
    """
    import torch

    def finished(video):  # the GPU work behind a batch is done, so the clock reads the real time
        if video.is_cuda:
            torch.cuda.synchronize(video.device)

    t0 = time.perf_counter()
    start, count, frames, last, rates = t0, 0, 0, t0, []
    for batch in batches:
        # (B, K, 3, S, S) is B videos of K frames; a GpuLoader batch of videos of unequal length is a list
        videos = batch if isinstance(batch, list) else list(batch)
        count += 1
        now = time.perf_counter()
        if count > warmup_batches:
            frames += sum(v.shape[0] for v in videos)
            rates.append((sum(v.shape[0] for v in videos), now - last))
        elif count == warmup_batches:
            finished(videos[-1])
            start = now = time.perf_counter()
        last = now
    if count <= warmup_batches:
        raise ValueError(f"measure_flat_out: {count} batches, not more than the {warmup_batches} of warm-up")
    finished(videos[-1])
    seconds = time.perf_counter() - start
    from playbook_utils.verdicts import block_rates, spread_pct

    return {"frames_per_s": frames / seconds, "frames_per_s_spread_pct": spread_pct(block_rates(*zip(*rates))),
            "batches": count - warmup_batches, "seconds": seconds,
            "frames": frames, "startup_s": start - t0, "clock_start": start}


def dali_loader(paths, sequence_length: int = 32, batch_size: int = 4, size: int = 224, device_id: int = 0,
                num_threads: int = 8, prefetch: int = 2):
    """A DALI pipeline + `DALIGenericIterator` of model-ready sequences on the GPU (notebook 21).

    `fn.experimental.readers.video` decodes consecutive, non-overlapping sequences of
    `sequence_length` frames from `paths` on NVDEC; `fn.resize` and `fn.crop_mirror_normalize`
    make float16 (B, L, 3, size, size) batches with CLIP's statistics in the same graph, so the
    preprocessing overlaps with the next batch's decoding. One epoch = every full sequence once.
    """
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    from playbook_utils.transforms import CLIP_MEAN, CLIP_STD

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id,
                  prefetch_queue_depth=prefetch)
    def pipe():
        video, _ = fn.experimental.readers.video(device="gpu", filenames=[str(p) for p in paths],
                                                 labels=list(range(len(paths))), sequence_length=sequence_length,
                                                 stride=1, step=sequence_length, name="reader")
        video = fn.resize(video, resize_x=size, resize_y=size, antialias=True)
        return fn.crop_mirror_normalize(video, dtype=types.FLOAT16, output_layout="FCHW",
                                        mean=[255 * m for m in CLIP_MEAN], std=[255 * s for s in CLIP_STD])

    p = pipe()
    p.build()
    return DALIGenericIterator([p], ["video"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP,
                               auto_reset=True)


class _DaliVideos:
    """A DALI iterator seen as an iterable of video tensors, for `measure_flat_out` and `measure_loader`."""

    def __init__(self, iterator):
        self.iterator = iterator

    def __iter__(self):
        return (out[0]["video"] for out in self.iterator)


def _run_spec(spec: dict) -> dict:
    """Build the loader `spec` describes and measure it in this process (the child of `measure_isolated`)."""
    if spec["kind"] == "dali":
        def make():
            return _DaliVideos(dali_loader(spec["paths"], sequence_length=spec.get("sequence_length", 32),
                                           batch_size=spec["batch_size"], device_id=spec.get("device_id", 0)))
    elif spec.get("processes", 1) > 1:
        def make():
            return GpuProcessLoader(spec["paths"], processes=spec["processes"], threads=spec["threads"],
                                    batch_size=spec["batch_size"], backend=spec["backend"], device=spec["device"],
                                    chunk=spec.get("chunk", 32))
    else:
        sampled = {k: spec[k] for k in ("strategy", "k") if k in spec}   # K sampled frames instead of every frame

        def make():
            return GpuLoader(spec["paths"], backend=spec["backend"], device=spec["device"], threads=spec["threads"],
                             batch_size=spec["batch_size"], chunk=spec.get("chunk", 32), **sampled)
    if spec.get("step_s") is not None:   # the data wait against a training step, instead of the flat-out rate
        return {"wait": measure_loader(make(), spec["step_s"], spec["steps"], device=spec["device"])}
    from playbook_utils.bench import Sampler
    from playbook_utils.decoders import device_index

    cuda = spec["device"].startswith("cuda")
    with Sampler(gpu=device_index(spec["device"]) if cuda else None) as sampler:
        result = measure_flat_out(make(), warmup_batches=spec.get("warmup_batches", 0))
    # while the clock ran: NVDEC and SM busy (median %), this process's CPU (% of one core; not its workers')
    result["utilization"] = {k: v for k, v in sampler.summary(since=result.pop("clock_start")).items()
                             if k in ("nvdec_pct", "sm_pct", "cpu_pct")}
    return result


def measure_isolated(spec: dict, timeout: float = 600) -> dict:
    """Measure a GPU-side loader in a fresh child process; return its result or {'error': ...} (notebook 21).

    spec: {'kind': 'gpu' (a `GpuLoader`: 'backend', 'threads', 'chunk', optional 'strategy' and 'k'
    to sample K frames per video instead of reading every frame; with 'processes' > 1 a
    `GpuProcessLoader`) or 'dali' (a `dali_loader`), 'paths', 'device', 'batch_size', optional
    'warmup_batches' (see `measure_flat_out`); with 'step_s' and 'steps', the data wait against that
    training step instead of the flat-out rate ({'wait': ...})}.
    The result also says how busy NVDEC, the SMs and the process's CPU were while the clock ran
    ('utilization', sampled every 0.1 s: `bench.Sampler`).
    Each loader gets its own process because PyNvVideoCodec's bundled FFmpeg breaks TorchCodec once
    both are loaded (notebooks 12 and 13), and so that no decoder cache carries over between runs.
    """
    import json
    import subprocess
    import sys

    spec = {**spec, "paths": [str(p) for p in spec["paths"]]}
    try:
        from playbook_utils.decoders import child_env

        run = subprocess.run([sys.executable, "-m", "playbook_utils.loaders", json.dumps(spec)],
                             capture_output=True, text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout:.0f} s"}
    lines = [x for x in run.stdout.splitlines() if x.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    from playbook_utils.errors import last_line

    return {"error": f"exit {run.returncode}: {last_line(run.stderr)[:300]}"}


if __name__ == "__main__":
    import json
    import sys

    try:
        out = _run_spec(json.loads(sys.argv[1]))
    except Exception as e:  # reported as data: the parent decides what a failure means
        from playbook_utils.errors import first_line

        out = {"error": f"{type(e).__name__}: {first_line(e)[:300]}"}
    print(json.dumps(out), flush=True)
