"""A torch IterableDataset around any iterable object (`shards.ShardDataset`): a DataLoader tells iterable datasets
from map-style ones by this base class. Imports torch, so only `shards.shard_loader` imports this module."""

from __future__ import annotations

import torch

__all__ = ["Iterable"]


class Iterable(torch.utils.data.IterableDataset):
    """`dataset` seen by a DataLoader as an IterableDataset (each worker iterates its own copy)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __iter__(self):
        return iter(self.dataset)
