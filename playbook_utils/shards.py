"""WebDataset-style .tar shards of videos: write them, list them, and load them without extracting (notebook 24).
Members are grouped into samples by key (`clip0001.mp4`, `clip0001.json`); a video is read in place as a byte range
of its shard (`sources.TarMember`). `ShardDataset` and `shard_loader` give every sample once per epoch."""

from __future__ import annotations

import io
import json
import re
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

from playbook_utils import decoders, sampling, sources
from playbook_utils.errors import BackendUnavailable, DecodeError, redact
from playbook_utils.loaders import MAX_FRAME_PIXELS, MAX_ITEM_BYTES, Skipped, check_item_size, worker_options
from playbook_utils.probe import video_info
from playbook_utils.resize import resize_uint8
from playbook_utils.sources import tar_index

__all__ = [
    "assign",
    "collate_samples",
    "epoch",
    "list_samples",
    "SampleRef",
    "shard_loader",
    "ShardDataset",
    "split_name",
    "video_member",
    "write_shards",
]

VIDEO_EXTS = ("mp4", "webm", "mkv", "mov", "avi")
_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")


def split_name(member: str) -> tuple[str, str] | None:
    """(key, extension) of a member name, WebDataset's way ('a/b.c.mp4' -> ('a/b', 'c.mp4')); None without a dot."""
    m = _KEY.match(member)
    return (m.group(1), m.group(2)) if m else None


def write_shards(samples, directory, prefix: str = "shard", per_shard: int = 100) -> list[Path]:
    """Write `samples` — (key, {extension: bytes, a path, or a dict (written as JSON)}) — into tar shards of
    `per_shard` samples each, `<directory>/<prefix>-000000.tar`, ...; return the shard paths (notebook 24)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths, tar, count = [], None, 0
    try:
        for key, parts in samples:
            if tar is None or count == per_shard:
                if tar is not None:
                    tar.close()
                paths.append(directory / f"{prefix}-{len(paths):06d}.tar")
                tar, count = tarfile.open(paths[-1], "w", format=tarfile.USTAR_FORMAT), 0
            if "." in Path(key).name:
                raise ValueError(f"a sample key has no dot in its last component, got {key!r}")
            for ext, value in parts.items():
                if isinstance(value, dict):
                    value = json.dumps(value).encode()
                elif isinstance(value, (str, Path)):
                    value = Path(value).read_bytes()
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mtime = len(value), 0
                tar.addfile(info, io.BytesIO(value))
            count += 1
    finally:
        if tar is not None:
            tar.close()
    return paths


class SampleRef(NamedTuple):
    """One sample of a shard: its id (position in the dataset), shard, key and {extension: member name}."""

    id: int
    shard: str
    key: str
    members: dict


def list_samples(shards, storage_options: dict | None = None) -> list[SampleRef]:
    """Every sample of `shards`, in shard order then member order, from the tar headers only (notebook 24)."""
    out = []
    for shard in shards:
        groups: dict[str, dict] = {}
        for member in tar_index(str(shard), storage_options):
            parts = split_name(member)
            if parts is not None:
                groups.setdefault(parts[0], {})[parts[1]] = member
        for key, members in groups.items():
            out.append(SampleRef(len(out), str(shard), key, members))
    return out


def video_member(ref: SampleRef) -> str | None:
    """The member name of `ref`'s video (the first of VIDEO_EXTS it has), or None."""
    return next((ref.members[ext] for ext in VIDEO_EXTS if ext in ref.members), None)


def assign(refs: list[SampleRef], part: int, parts: int, split: str = "shard") -> list[SampleRef]:
    """The samples that reader `part` of `parts` (rank x workers, flattened) reads. split='shard': whole
    shards, the i-th shard to reader i mod parts (sequential reads, but readers idle when shards are fewer
    than readers); 'sample': every parts-th sample. Each sample lands on exactly one reader."""
    if not 0 <= part < parts:
        raise ValueError(f"part must be in 0..{parts - 1}, got {part}")
    if split == "sample":
        return refs[part::parts]
    if split != "shard":
        raise ValueError(f"split must be 'shard' or 'sample', got {split!r}")
    order = list(dict.fromkeys(r.shard for r in refs))
    mine = set(order[part::parts])
    return [r for r in refs if r.shard in mine]


class ShardDataset:
    """Samples of `shards` as dicts {'id', 'key', 'frames' uint8 (K, 3, H, W), 'meta', 'source'}, or a `loaders.Skipped`
    record for one that cannot be read (on_error='skip', the default). Frames: strategy 'uniform' (k) or 'vlm' (`fps`,
    `max_frames`); `size` resizes. Each worker of each rank reads its part (`assign`). Notebook 24."""

    def __init__(
        self,
        shards,
        backend: str = "pyav",
        rank: int = 0,
        world_size: int = 1,
        split: str = "shard",
        strategy: str = "uniform",
        k: int = 8,
        fps: float = 2.0,
        max_frames: int | None = None,
        size=None,
        on_error: str = "skip",
        storage_options: dict | None = None,
        max_frame_pixels: int | None = MAX_FRAME_PIXELS,
        max_item_bytes: int | None = MAX_ITEM_BYTES,
    ):
        if strategy not in ("uniform", "vlm"):
            raise ValueError(f"strategy must be 'uniform' or 'vlm', got {strategy!r}")
        if on_error not in ("skip", "raise"):
            raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..world_size-1, got rank={rank}, world_size={world_size}")
        self.refs = list_samples(shards, storage_options)
        self.backend, self.rank, self.world_size, self.split = backend, rank, world_size, split
        self.strategy, self.k, self.fps, self.max_frames, self.size = strategy, k, fps, max_frames, size
        self.on_error, self.storage_options = on_error, storage_options
        self.max_frame_pixels, self.max_item_bytes = max_frame_pixels, max_item_bytes

    def __len__(self) -> int:
        """All samples of all shards (this rank reads only its part)."""
        return len(self.refs)

    def mine(self, worker: int = 0, workers: int = 1) -> list[SampleRef]:
        """The samples worker `worker` of `workers` on this rank reads."""
        return assign(self.refs, self.rank * workers + worker, self.world_size * workers, self.split)

    def indices(self, info) -> list[int]:
        """The frames a sample of `info` gives; `DecodeError` where the sampling rule refuses the video (a VLM's rule
        wants at least `sampling.QWEN_FRAME_FACTOR` frames), which on_error='skip' absorbs."""
        try:
            if self.strategy == "vlm":
                return sampling.vlm_indices(info.num_frames, info.fps, fps=self.fps, max_frames=self.max_frames)
            return sampling.uniform(info.num_frames, self.k)
        except ValueError as e:
            raise DecodeError(info.path, f"the {self.strategy!r} sampling rule refuses it: {e}", "shards") from e

    def load(self, ref: SampleRef):
        """One sample (see the class docstring); a `Skipped` record instead when on_error='skip' and it fails."""
        member = video_member(ref)
        name = redact(f"tar://{member or ref.key}::{ref.shard}")  # a shard's URL may carry a signed query
        try:
            if member is None:
                raise DecodeError(name, f"sample {ref.key!r} has no video member ({', '.join(ref.members)})", "shards")
            src = sources.TarMember(ref.shard, member)
            info = video_info(sources.resolve(src, self.storage_options))
            idx = self.indices(info)
            check_item_size(name, info, len(idx), "shards", self)
            frames = decoders.read_source(src, idx, self.backend, storage_options=self.storage_options).frames
            meta = {}
            if "json" in ref.members:
                meta_member = sources.TarMember(ref.shard, ref.members["json"])
                raw = sources.resolve(meta_member, self.storage_options).read_bytes()
                try:
                    meta = json.loads(raw)
                except ValueError as e:
                    raise DecodeError(str(meta_member), f"bad JSON: {e}", "shards") from e
        except (DecodeError, BackendUnavailable) as e:
            if self.on_error == "raise":
                raise
            return Skipped(ref.id, name, str(e))
        if self.size is not None and tuple(frames.shape[-2:]) != tuple(self.size):
            frames = resize_uint8(frames, self.size)
        return {"id": ref.id, "key": ref.key, "frames": frames, "meta": meta, "source": name}

    def __iter__(self):
        import torch

        worker = torch.utils.data.get_worker_info()
        wid, workers = (worker.id, worker.num_workers) if worker is not None else (0, 1)
        for ref in self.mine(wid, workers):
            yield self.load(ref)


def collate_samples(items) -> dict:
    """A batch of `ShardDataset` items: {'ids', 'keys', 'frames' (one uint8 tensor when the videos share a
    shape, else a list), 'meta', 'skipped' (the `Skipped` records, set aside so the epoch goes on)}."""
    import torch

    good = [x for x in items if not isinstance(x, Skipped)]
    frames = [x["frames"] for x in good]
    same = len({tuple(f.shape) for f in frames}) == 1
    return {
        "ids": [x["id"] for x in good],
        "keys": [x["key"] for x in good],
        "frames": torch.stack(frames) if same else frames,
        "meta": [x["meta"] for x in good],
        "skipped": [x for x in items if isinstance(x, Skipped)],
    }


def shard_loader(
    shards,
    backend: str = "pyav",
    rank: int = 0,
    world_size: int = 1,
    batch_size: int = 4,
    num_workers: int = 2,
    start_method: str | None = None,
    **dataset_kwargs,
):
    """A DataLoader over this rank's part of `shards` (`ShardDataset`), batches from `collate_samples`, workers as
    `loaders.make_loader`'s; every sample reaches exactly one (rank, worker) per epoch. Notebook 24."""
    import torch

    from playbook_utils._iterable import Iterable  # imports torch: only where a DataLoader is made

    ds = ShardDataset(shards, backend=backend, rank=rank, world_size=world_size, **dataset_kwargs)
    return torch.utils.data.DataLoader(
        Iterable(ds),
        batch_size=batch_size,
        num_workers=num_workers,
        collate_fn=collate_samples,
        **worker_options(num_workers, start_method=start_method),
    )


def epoch(loader) -> dict:
    """Run one epoch of a `shard_loader`; return {'ids', 'skipped' (source: cause), 'frames', 'seconds'}."""
    t0 = time.perf_counter()
    ids, skipped, frames = [], {}, 0
    for batch in loader:
        ids += batch["ids"]
        skipped.update({s.path: s.cause for s in batch["skipped"]})
        frames += sum(f.shape[0] for f in batch["frames"])
    return {"ids": ids, "skipped": skipped, "frames": frames, "seconds": time.perf_counter() - t0}
