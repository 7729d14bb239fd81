"""Where frames are decoded: one small type for 'cpu', 'cuda' and 'cuda:N', parsed once from the string a reader
writes (`Device.parse("cuda:1")` is `Device(kind='cuda', index=1)`); `str(device)` gives the string back for torch
and the libraries."""

from __future__ import annotations

import dataclasses

__all__ = ["cuda_visible", "Device"]

KINDS = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class Device:
    """A decoding device: `kind` 'cpu' or 'cuda', and for CUDA the GPU `index` (None: plain 'cuda', the current
    GPU). `str()` writes it as torch does ('cpu', 'cuda', 'cuda:1')."""

    kind: str
    index: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"device kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.index is not None and (self.kind == "cpu" or self.index < 0):
            raise ValueError(f"a {self.kind} device has no GPU index {self.index!r}")

    @classmethod
    def parse(cls, spec) -> Device:
        """A `Device` from 'cpu', 'cuda', 'cuda:N', 'auto' (CUDA where torch sees a GPU, else the CPU), a
        `torch.device` or a `Device`. Raises ValueError naming anything else."""
        if isinstance(spec, Device):
            return spec
        text = str(spec).strip()
        if text == "auto":
            return cls("cuda") if cuda_visible() else cls("cpu")
        kind, sep, index = text.partition(":")
        if kind in KINDS and not sep:
            return cls(kind)
        if kind == "cuda" and index.isdigit():
            return cls("cuda", int(index))
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {spec!r}")

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def ordinal(self) -> int:
        """The GPU number the libraries take (0 for plain 'cuda'); raises ValueError for the CPU."""
        if not self.is_cuda:
            raise ValueError("the CPU has no GPU ordinal")
        return self.index or 0

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def cuda_visible() -> bool:
    """Whether torch sees a CUDA GPU (False where torch is not installed)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
