"""Sharded video loading for many GPUs and many nodes: one shard per rank, every sample once (notebook 30).

Each rank (one process per GPU, started by `torchrun`) decodes its own shard on its own GPU, so
decoding scales with the GPUs' NVDEC engines as long as storage keeps up.

Why not `torch.utils.data.DistributedSampler` as it is: to give every rank the same number of
samples it either pads the last round by *repeating* samples (drop_last=False) or drops the tail
(drop_last=True), so an epoch sees some samples twice or never. `ShardSampler` takes the same
(optionally shuffled, seed + epoch) order and the same strided split, without padding: every
sample is seen exactly once per epoch, and shard sizes differ by at most one. The price: ranks run
different numbers of steps, so a DDP training loop must handle the uneven end
(`torch.distributed.algorithms.join.Join([model])`), or pad, knowing which samples it repeats.

Nothing heavy is imported here until a function that needs it is called.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

GPU_BACKENDS = ("pynvvideocodec", "torchcodec", "dali")  # can decode on the rank's GPU


def default_world_sizes(kind: str) -> list[int]:
    """The world sizes notebook 30 runs by default: 1, 2, 4, 8, 16 up to every GPU on a GPU machine ('cuda'),
    1 and 2 on the CPU."""
    if kind != "cuda":
        return [1, 2]
    import torch

    gpus = torch.cuda.device_count()
    return sorted({n for n in (1, 2, 4, 8, 16) if n <= gpus} | {gpus})


def shard(items, rank: int, world_size: int) -> list:
    """The items of `rank` out of `world_size`: items[rank::world_size], no padding (notebook 30).

    Every item lands on exactly one rank; shard sizes differ by at most one.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in 0..world_size-1, got rank={rank}, world_size={world_size}")
    return list(items)[rank::world_size]


class ShardSampler:
    """A `DistributedSampler` without padding: rank's share of range(n), each index once per epoch.

    With shuffle, the order is `torch.randperm(n)` seeded by seed + epoch (call `set_epoch` each
    epoch, as with DistributedSampler), so for n divisible by world_size it yields exactly what
    DistributedSampler yields. Usable as `DataLoader(sampler=...)`. Introduced in notebook 30.
    """

    def __init__(self, n: int, rank: int, world_size: int, shuffle: bool = False, seed: int = 0):
        shard([], rank, world_size)  # validates rank and world_size
        self.n, self.rank, self.world_size, self.shuffle, self.seed = n, rank, world_size, shuffle, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self) -> list[int]:
        """All n indices in this epoch's order (the same on every rank)."""
        if not self.shuffle:
            return list(range(self.n))
        import torch

        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def __iter__(self):
        return iter(shard(self.order(), self.rank, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.world_size))


class _Indexed:
    """Item i of a dataset as (i, item), so a loader's batches say which samples they hold."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        return i, self.dataset[i]


class _ThreadedBatches:
    """Batches (ids, frames) of a rank that decodes on its GPU: `threads` threads decode the sampler's
    items ahead of the consumer, batches in sampler order. DataLoader workers are processes and cannot
    hold the rank's CUDA decoders; threads can (as `loaders.GpuLoader` does in notebook 21)."""

    def __init__(self, dataset, sampler, batch_size: int, threads: int):
        self.dataset, self.sampler, self.batch_size, self.threads = dataset, sampler, batch_size, threads

    def __len__(self) -> int:
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        import torch

        from playbook_utils.loaders import decode_ahead

        order = list(self.sampler)
        # every thread busy and a batch ahead of the consumer
        results = decode_ahead(self.dataset.__getitem__, order, self.threads, self.batch_size + self.threads)
        for a in range(0, len(order), self.batch_size):
            items = [next(results) for _ in range(min(self.batch_size, len(order) - a))]
            yield torch.tensor([i for i, _ in items]), torch.stack([x for _, x in items])


class ShardedLoader:
    """Iterates (sample_ids, frames) over one rank's shard: ids a list of ints, frames uint8
    (B, K, 3, H, W) on the rank's device. Call `set_epoch(e)` before each epoch when shuffling."""

    def __init__(self, loader, sampler: ShardSampler, device: str, decode_device: str):
        self.loader, self.sampler, self.device, self.decode_device = loader, sampler, device, decode_device

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        for ids, frames in self.loader:
            if str(frames.device) != self.device:
                frames = frames.to(self.device, non_blocking=True)
            yield ids.tolist(), frames


def sharded_loader(paths, backend: str = "pyav", rank: int = 0, world_size: int = 1, device: str = "cpu",
                   batch_size: int = 4, num_workers: int = 2, shuffle: bool = False, seed: int = 0,
                   decode_device: str = "auto", **dataset_kwargs) -> ShardedLoader:
    """The loader of one rank for `backend`: its shard of `paths`, decoded, delivered on `device`.

    `device` is the rank's device (`cuda:LOCAL_RANK` or 'cpu'). decode_device 'auto' decodes on
    that GPU for the backends that can (PyNvVideoCodec, TorchCodec, DALI: in the rank's process,
    `num_workers` decoding threads) and on the CPU otherwise (PyAV, decord: in `num_workers` spawned
    DataLoader workers, batches then copied to `device`). DALI goes through the same per-rank path
    (`read_frames` with device cuda:N); DALI's own `fn.readers.video(shard_id=, num_shards=)`
    is not used, since it samples fixed-length sequences rather than our K frames per video.
    (Run on two H200s with NCCL and PyNvVideoCodec; the DALI path has not yet run on GPUs.)
    dataset_kwargs go to `loaders.VideoClipDataset` (k, strategy, size, ...). Returns a
    `ShardedLoader` of (sample_ids, frames). Introduced in notebook 30.
    """
    import torch

    from playbook_utils.loaders import VideoClipDataset, worker_options

    if decode_device == "auto":
        decode_device = device if device.startswith("cuda") and backend in GPU_BACKENDS else "cpu"
    ds = VideoClipDataset(paths, backend=backend, device=decode_device, **dataset_kwargs)
    if ds.on_error != "raise":
        raise ValueError("sharded_loader counts every sample; use on_error='raise' (the default)")
    sampler = ShardSampler(len(ds), rank, world_size, shuffle=shuffle, seed=seed)
    if decode_device.startswith("cuda"):   # CUDA decoders live in the rank's own process: threads, not workers
        return ShardedLoader(_ThreadedBatches(_Indexed(ds), sampler, batch_size, max(1, num_workers)),
                             sampler, device, decode_device)
    # workers as make_loader's: spawned (a forked worker of a multi-threaded CUDA/NCCL parent can hang), with a
    # batch timeout and decoders that share the cores
    loader = torch.utils.data.DataLoader(
        _Indexed(ds), batch_size=batch_size, sampler=sampler, num_workers=num_workers,
        pin_memory=device.startswith("cuda") and decode_device == "cpu", **worker_options(num_workers))
    return ShardedLoader(loader, sampler, device, decode_device)


def rank_device(kind: str) -> tuple[str, str]:
    """(torch device, process-group backend) of this rank: ('cuda:LOCAL_RANK', 'nccl') or ('cpu', 'gloo')."""
    if kind == "cpu":
        return "cpu", "gloo"
    import torch

    local = int(os.environ.get("LOCAL_RANK", 0))
    if not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for, but torch sees no CUDA GPU in this rank")
    if local >= torch.cuda.device_count():
        raise RuntimeError(f"LOCAL_RANK {local} has no GPU: this node has {torch.cuda.device_count()}; "
                           "start at most that many processes per node (--nproc_per_node)")
    return f"cuda:{local}", "nccl"


def exactly_once(ids_per_rank, n: int) -> dict:
    """Check that the ranks' sample ids cover range(n) exactly once.

    Returns {'ok', 'seen', 'duplicates' (id -> count), 'missing' (ids never seen), 'unexpected'}.
    """
    counts = Counter(i for ids in ids_per_rank for i in ids)
    dup = {i: c for i, c in sorted(counts.items()) if c > 1}
    missing = [i for i in range(n) if i not in counts]
    unexpected = sorted(i for i in counts if not 0 <= i < n)
    return {"ok": not dup and not missing and not unexpected, "seen": sum(counts.values()),
            "duplicates": dup, "missing": missing, "unexpected": unexpected}


def file_sizes(paths) -> list[int]:
    """The size in bytes of each video; `DecodeError` naming the first one that is missing or empty."""
    from playbook_utils.errors import DecodeError

    sizes = []
    for p in paths:
        try:
            size = Path(p).stat().st_size
        except OSError as e:
            raise DecodeError(p, f"cannot read the file: {e.strerror or e}") from e
        if size == 0:
            raise DecodeError(p, "file is empty (0 bytes)")
        sizes.append(size)
    return sizes


def _rank_errors(output: Path) -> str:
    """The errors the failed ranks recorded (`scaling_worker` writes `<output>.rank<R>.error`)."""
    found = sorted(output.parent.glob(f"{output.name}.rank*.error"))
    lines = [f"{p.name.rsplit('.', 2)[1]}: {p.read_text()}" for p in found]
    lines.sort(key=lambda line: "closed by peer" in line)  # the root cause first, its echoes after
    return "; ".join(lines) if lines else "no rank recorded an error (see the output below)"


def torchrun_command(world_size: int, worker_args: list[str], nnodes: int = 1) -> list[str]:
    """The `torchrun` command line that starts `world_size` ranks of `playbook_utils.scaling_worker`.

    Single node: `--standalone` (rendezvous on localhost at a free port, so parallel runs never
    collide). Several nodes need `--nnodes`, `--node_rank` or a rendezvous endpoint: see notebook 30.
    """
    if nnodes != 1:
        raise ValueError("torchrun_command builds single-node runs; for several nodes see notebook 30")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}",
            "-m", "playbook_utils.scaling_worker", *worker_args]


def launch(world_size: int, paths, output, backend: str = "pyav", device: str = "cpu",
           timeout: float = 600, **worker_options) -> dict:
    """Run one epoch-measurement with `world_size` ranks under torchrun; return rank 0's JSON.

    `paths` is written to a file next to `output` for the ranks to read; worker_options become
    `--name value` flags of `scaling_worker` (k, size, batch_size, num_workers, epochs, shuffle, seed;
    None leaves a flag out).
    Raises RuntimeError with the tail of the ranks' output when the run fails or times out.
    Introduced in notebook 30.
    """
    file_sizes(paths)  # a missing or empty file is named here, before any rank starts
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    paths_file = output.with_suffix(".paths.json")
    paths_file.write_text(json.dumps([str(p) for p in paths]))
    args = ["--backend", backend, "--device", device, "--paths", str(paths_file), "--output", str(output)]
    for name, value in worker_options.items():
        if value is None:
            continue
        args += [f"--{name.replace('_', '-')}", str(value)]
    cmd = torchrun_command(world_size, args)
    for stale in [output, *output.parent.glob(f"{output.name}.rank*.error")]:
        stale.unlink(missing_ok=True)
    start = time.perf_counter()
    # Own process group, so a timeout ends torchrun and every rank it started, nothing else.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        raise RuntimeError(f"{world_size} rank(s) of {backend} did not finish in {timeout:.0f} s:\n"
                           f"{log[-2000:]}") from e
    if proc.returncode != 0 or not output.exists():
        raise RuntimeError(f"{world_size} rank(s) of {backend} failed (exit {proc.returncode}): "
                           f"{_rank_errors(output)}\n--- last output of the ranks ---\n{log[-3000:]}")
    result = json.loads(output.read_text())
    result["launch_s"] = round(time.perf_counter() - start, 2)
    result["command"] = " ".join(cmd)
    return result
