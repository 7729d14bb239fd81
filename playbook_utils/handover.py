"""The code we hand over: per library path, one self-contained module in `modules/` (the library's own calls, nothing
of this package) that reads K evenly spaced frames of every video of a folder, batched, upright, coloured by
`colour.effective`, refusing by name the files its library gets wrong, sharded by rank. Each adapter names its modules
(`Adapter.HANDOVER`); notebook 22 copies the one it recommends (`write`) and prints how to use it (`usage`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from playbook_utils.decoders import ADAPTERS, adapter
from playbook_utils.device import Device

__all__ = ["DIFFERS", "FOLDER", "module", "path", "route_usage", "usage", "why_apart", "write"]

FOLDER = Path(__file__).resolve().parents[1] / "modules"  # beside the package: files to copy, not to import

# what each module does otherwise than the playbook's loader for the same path, where their rates may part
_FULL_SIZE = "the playbook's loader converts each frame at full size and resizes it after"
DIFFERS = {
    ("pyav", "cpu"): f"the module scales inside FFmpeg's conversion to RGB; {_FULL_SIZE}",
    ("torchcodec", "cpu"): f"the module resizes inside TorchCodec's decoder (a Resize transform); {_FULL_SIZE}",
    ("decord", "cpu"): f"the module resizes inside decord's reader; {_FULL_SIZE}",
    ("spdl", "cpu"): f"the module scales in FFmpeg's filter graph; {_FULL_SIZE}",
    ("torchcodec", "cuda"): "the module opens a new decoder for each file after reading its packets with PyAV; the "
    "playbook's loader reads a file's frame table once (its probe) and keeps the decoder for the file",
    ("pynvvideocodec", "cuda"): "the module opens a new decoder for each file and decodes its first frame with PyAV "
    "for the display rotation; the playbook's loader reconfigures one decoder per thread and reads the rotation "
    "from the MP4 header",
    ("dali", "cuda"): "the module decodes the first frame of each file with PyAV for the display rotation",
    ("dali", "cpu"): "the module decodes the first frame of each file with PyAV for the display rotation",
}


def why_apart(backend: str, device: str = "cpu") -> str:
    """What the module for `backend` on `device` does otherwise than the playbook's loader (`DIFFERS`). Notebook 22."""
    return DIFFERS[(backend, Device.parse(device).kind)]


def module(backend: str, device: str = "cpu") -> str | None:
    """The name of the module handed over for `backend` on `device` ('cuda:1' counts as 'cuda'), or None where there
    is none. Introduced in notebook 22."""
    return adapter(backend).HANDOVER.get(Device.parse(device).kind)


def path(backend: str, device: str = "cpu") -> Path:
    """The file of `module(backend, device)`; KeyError naming the paths that have one where there is none."""
    name = module(backend, device)
    if name is None:
        have = ", ".join(f"{b} on {d}" for b, a in ADAPTERS.items() for d in a.HANDOVER)
        raise KeyError(f"no module for {backend} on {device}; there are: {have}")
    return FOLDER / f"{name}.py"


def write(backend: str, device: str, folder) -> Path:
    """Copy the module of `backend` on `device` into `folder`; return the copy's path. Notebook 22."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(path(backend, device), folder))


def _clips(backend: str, device: str, files: str, k: int, size: int) -> str:
    where = f', device="{device}"' if backend in ("torchcodec", "dali") else ""
    return f"VideoClips({files}, k={k}, size={size}{where})"


GUARD = 'if __name__ == "__main__":  # the worker processes start by importing this script'


def _processes(backend: str, device: str, workers: int) -> bool:
    """Whether the module's `loader` starts `workers` processes here (by forkserver: each imports the script)."""
    return workers > 0 and not str(device).startswith("cuda") and '"forkserver"' in path(backend, device).read_text()


def _guarded(lines: list[str], processes: bool) -> str:
    """`lines` after their imports, under `GUARD` where the loader starts worker processes."""
    if not processes:
        return "\n".join(lines)
    body = [j for j, line in enumerate(lines) if not line.startswith(("from ", "import "))][0]
    return "\n".join([*lines[:body], GUARD, *("    " + line for line in lines[body:])])


PATHS = '"videos"'  # the files of `usage`'s lines (a folder: its videos, in subfolders too), as the README's


def usage(backend: str, device: str, k: int = 16, workers: int = 4, batch_size: int = 8, size: int = 224) -> str:
    """The lines that use the module of `backend` on `device` with K frames per video, `workers` (DataLoader
    workers on the CPU, decoding threads on a GPU) and `batch_size`, as the recommendation was measured; under
    `GUARD` where the workers are processes. Notebook 22."""
    name = path(backend, device).stem
    processes = _processes(backend, device, workers)
    lines = [
        f"from {name} import VideoClips, loader  # {name}.py beside your training script",
        f"paths, epochs = {PATHS}, 10  # your folder (subfolders too), or a list of files",
        f"batches = loader({_clips(backend, device, 'paths', k, size)}, batch_size={batch_size}, "
        f"workers={workers})  # {'worker processes' if processes else 'decoding threads' if workers else 'in this process'}",
        "for epoch in range(epochs):",
        "    batches.sampler.set_epoch(epoch)  # the shuffle, and each rank's share under torch.distributed",
        f"    for frames, names, skipped in batches: ...  # frames uint8 (B, {k}, 3, {size}, {size}); skipped "
        "[(path, why)]",
    ]
    return _guarded(lines, processes)


def route_usage(legs, k: int = 16, batch_size: int = 8, size: int = 224) -> str:
    """The lines that use a route's modules, `legs` [(backend, device, workers or threads), ...]: each leg's module
    reads its list of the reader's files in `22_route.json` (which notebook 22 writes beside them), one epoch the
    first leg's files, then the next's; under `GUARD` where a leg's workers are processes. Notebook 22."""
    names = [path(b, d).stem for b, d, _ in legs]
    lines = [
        f"import itertools, json, {', '.join(dict.fromkeys(names))}  # beside your training script",
        'route, epochs = json.load(open("22_route.json")), 10  # which of your files each module reads',
    ]
    for j, ((b, d, w), name) in enumerate(zip(legs, names)):
        clips = _clips(b, d, f'route["{b} on {d}"]', k, size)
        lines.append(f"leg{j} = {name}.loader({name}.{clips}, batch_size={batch_size}, workers={w})")
    legs_ = ", ".join(f"leg{j}" for j in range(len(legs)))
    lines += [
        "for epoch in range(epochs):",
        f"    for leg in ({legs_}):",
        "        leg.sampler.set_epoch(epoch)",
        f"    for frames, names, skipped in itertools.chain({legs_}): ...  # uint8 (B, {k}, 3, {size}, {size})",
    ]
    return _guarded(lines, any(_processes(*leg) for leg in legs))
