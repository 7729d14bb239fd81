"""Sharded video loading for many GPUs and nodes: one shard per rank, every sample once per epoch (notebook 30).
`ShardSampler` is `DistributedSampler` without padding: shard sizes differ by at most one, so a DDP loop must handle
the uneven end (`torch.distributed.algorithms.join.Join`)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from playbook_utils.decoders import by_role, why_unavailable
from playbook_utils.device import Device
from playbook_utils.errors import DecodeError
from playbook_utils.loaders import (
    Skipped,
    VideoClipDataset,
    close_loader,
    collate_skipping,
    decode_ahead,
    worker_options,
)

__all__ = [
    "choose_backend",
    "default_world_sizes",
    "exactly_once",
    "file_sizes",
    "GPU_BACKENDS",
    "rank_device",
    "shard",
    "sharded_loader",
    "ShardedLoader",
    "ShardSampler",
]

GPU_BACKENDS = by_role("rank_gpu")  # can decode on the rank's GPU, in the order 'auto' tries them


def choose_backend(asked: str, kind: str, here, best_gpu: str | None = None) -> tuple[str, str, str | None]:
    """(backend, why it was chosen, why decoding falls back to the CPU or None): notebook 30's `BACKEND` on a `kind`
    machine whose usable backends are `here`. 'auto' tries `best_gpu` (notebook 21's) first, then the role's order; a
    named backend that cannot run here raises ValueError with the reason."""
    if asked != "auto":
        why = why_unavailable(asked, kind if asked in GPU_BACKENDS and kind == "cuda" else "cpu")
        if why:
            raise ValueError(f"BACKEND={asked!r} cannot run here: {why}")
        return asked, "BACKEND", None
    order = GPU_BACKENDS if kind == "cuda" else by_role("rank_cpu")
    if kind == "cuda" and best_gpu:
        order = (best_gpu, *[b for b in order if b != best_gpu])
    backend = next((b for b in order if b in here), None)
    if backend is not None:
        if kind == "cuda" and best_gpu == backend:
            return backend, "notebook 21's best GPU-side loader here", None
        missing = "" if best_gpu or kind == "cpu" else " (notebook 21 did not run into this folder)"
        return backend, f"the first available of {', '.join(order)}{missing}", None
    backend = next((b for b in by_role("rank_cpu") if why_unavailable(b, "cpu") is None), None)
    if backend is None:
        raise ValueError(f"no backend can decode here: none of {', '.join(by_role('rank_cpu'))} is usable on the CPU")
    return (
        backend,
        "no GPU decoder here",
        f"no GPU decoder here ({', '.join(here) or 'none'}): {backend} decodes on the CPU, batches go to the GPU",
    )


def default_world_sizes(kind: str) -> list[int]:
    """The world sizes notebook 30 runs by default: 1, 2, 4, 8, 16 up to every GPU on a GPU machine ('cuda'),
    1 and 2 on the CPU."""
    if kind != "cuda":
        return [1, 2]
    import torch

    gpus = torch.cuda.device_count()
    return sorted({n for n in (1, 2, 4, 8, 16) if n <= gpus} | {gpus})


def shard(items, rank: int, world_size: int) -> list:
    """The items of `rank` out of `world_size`: items[rank::world_size], no padding, so every item lands on exactly
    one rank and shard sizes differ by at most one (notebook 30)."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in 0..world_size-1, got rank={rank}, world_size={world_size}")
    return list(items)[rank::world_size]


class ShardSampler:
    """A `DistributedSampler` without padding: rank's share of range(n), each index once per epoch. With shuffle,
    seeded by seed + epoch (call `set_epoch`); usable as `DataLoader(sampler=...)`. Notebook 30."""

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


def _collate_indexed(pairs):
    """(ids of the delivered samples, their batch or None, the `Skipped` ones) from (i, item) pairs: every
    sample of the batch lands in exactly one of the ids and the skipped."""
    frames, skipped = collate_skipping([x for _, x in pairs])
    return [i for i, x in pairs if not isinstance(x, Skipped)], frames, skipped


class _ThreadedBatches:
    """Batches (ids, frames, skipped) of a rank that decodes on its GPU: `threads` threads decode the
    sampler's items ahead of the consumer, batches in sampler order. DataLoader workers are processes and
    cannot hold the rank's CUDA decoders; threads can (as `loaders.GpuLoader` does in notebook 21)."""

    def __init__(self, dataset, sampler, batch_size: int, threads: int):
        self.dataset, self.sampler, self.batch_size, self.threads = dataset, sampler, batch_size, threads

    def __len__(self) -> int:
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        order = list(self.sampler)
        # every thread busy and a batch ahead of the consumer
        results = decode_ahead(self.dataset.__getitem__, order, self.threads, self.batch_size + self.threads)
        for a in range(0, len(order), self.batch_size):
            yield _collate_indexed([next(results) for _ in range(min(self.batch_size, len(order) - a))])


class ShardedLoader:
    """Iterates (sample_ids, frames) over one rank's shard: frames uint8 (B, K, 3, H, W) on the rank's device (a list
    with mixed_sizes='list'); with on_error='skip', (sample_ids, frames or None, skipped). Call `set_epoch(e)` before
    each epoch when shuffling."""

    def __init__(self, loader, sampler: ShardSampler, device: str, decode_device: str, skipping: bool = False):
        self.loader, self.sampler, self.device, self.decode_device = loader, sampler, device, decode_device
        self.skipping = skipping

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def close(self) -> list[int]:
        """End the DataLoader workers now, even mid-epoch; their exit codes (`loaders.close_loader`). A new epoch
        starts new ones."""
        return close_loader(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def _on_device(self, frames):
        if isinstance(frames, list):
            return [self._on_device(f) for f in frames]
        if frames is not None and str(frames.device) != self.device:
            return frames.to(self.device, non_blocking=True)
        return frames

    def __iter__(self):
        for ids, frames, skipped in self.loader:
            frames = self._on_device(frames)
            yield (ids, frames, skipped) if self.skipping else (ids, frames)


def sharded_loader(
    paths,
    backend: str = "pyav",
    rank: int = 0,
    world_size: int = 1,
    device: str = "cpu",
    batch_size: int = 4,
    num_workers: int = 2,
    shuffle: bool = False,
    seed: int = 0,
    decode_device: str = "auto",
    **dataset_kwargs,
) -> ShardedLoader:
    """The loader of one rank for `backend`: its shard of `paths`, delivered on `device` (`cuda:LOCAL_RANK` or
    'cpu'). decode_device 'auto': GPU backends decode on that GPU in threads, others in DataLoader workers.
    `dataset_kwargs` go to `loaders.VideoClipDataset`. Returns a `ShardedLoader`. Notebook 30."""
    import torch

    rank_cuda = Device.parse(device).is_cuda
    if decode_device == "auto":
        decode_device = device if rank_cuda and backend in GPU_BACKENDS else "cpu"
    ds = VideoClipDataset(paths, backend=backend, device=decode_device, **dataset_kwargs)
    sampler = ShardSampler(len(ds), rank, world_size, shuffle=shuffle, seed=seed)
    if Device.parse(decode_device).is_cuda:  # CUDA decoders live in the rank's own process: threads, not workers
        loader = _ThreadedBatches(_Indexed(ds), sampler, batch_size, max(1, num_workers))
    else:
        # workers as make_loader's: a forkserver's (a forked worker of a multi-threaded CUDA/NCCL parent can hang),
        # with a batch timeout and decoders that share the cores
        loader = torch.utils.data.DataLoader(
            _Indexed(ds),
            batch_size=batch_size,
            sampler=sampler,
            num_workers=num_workers,
            collate_fn=_collate_indexed,
            pin_memory=rank_cuda and decode_device == "cpu",
            **worker_options(num_workers),
        )
    return ShardedLoader(loader, sampler, device, decode_device, ds.on_error == "skip")


def rank_device(kind: str) -> tuple[str, str]:
    """(torch device, process-group backend) of this rank for a device `kind` ('cpu' or 'cuda'):
    ('cuda:LOCAL_RANK', 'nccl') or ('cpu', 'gloo')."""
    if not Device.parse(kind).is_cuda:
        return "cpu", "gloo"
    import torch

    local = int(os.environ.get("LOCAL_RANK", 0))
    if not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for, but torch sees no CUDA GPU in this rank")
    if local >= torch.cuda.device_count():
        raise RuntimeError(
            f"LOCAL_RANK {local} has no GPU: this node has {torch.cuda.device_count()}; "
            "start at most that many processes per node (--nproc_per_node)"
        )
    return f"cuda:{local}", "nccl"


def exactly_once(ids_per_rank, n: int) -> dict:
    """Whether the ranks' sample ids cover range(n) exactly once: {'ok', 'seen', 'duplicates' (id -> count),
    'missing' (ids never seen), 'unexpected'}."""
    counts = Counter(i for ids in ids_per_rank for i in ids)
    dup = {i: c for i, c in sorted(counts.items()) if c > 1}
    missing = [i for i in range(n) if i not in counts]
    unexpected = sorted(i for i in counts if not 0 <= i < n)
    return {
        "ok": not dup and not missing and not unexpected,
        "seen": sum(counts.values()),
        "duplicates": dup,
        "missing": missing,
        "unexpected": unexpected,
    }


def file_sizes(paths) -> list[int]:
    """The size in bytes of each video; `DecodeError` naming the first one that is missing or empty."""
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
