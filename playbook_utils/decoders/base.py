"""The adapter contract: what every decoder library's adapter declares and does (notebooks 10-14, 24).
`Adapter.why_unavailable(device, info)` decides whether it may read a file: None, or the reason in words. No decoder
library is imported here: each adapter imports its library inside `read`, when first used."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import os
import re
import sys
import threading
from functools import lru_cache

from playbook_utils import env
from playbook_utils.device import Device, cuda_visible
from playbook_utils.errors import BackendUnavailable
from playbook_utils.probe import size_change
from playbook_utils.sources import file_identity  # noqa: F401 (the key of the adapters' decoder caches)

__all__ = [
    "Adapter",
    "check_imports",
    "child_env",
    "CPU_THREADS",
    "importable",
    "in_order",
    "known_wrong",
    "KnownWrong",
    "library_version",
    "nv12_path_refusals",
    "NVDEC_MIN_SIZE",
    "nvdec_too_small",
    "PROBED_ENV",
    "RECORD_ENV",
    "ROLES",
    "set_cpu_threads",
    "trait_words",
    "traits",
    "version_tuple",
]

CPU_THREADS = 0  # threads per decoder for PyAV and TorchCodec's CPU path; 0: the library's choice (every core)


def set_cpu_threads(n: int) -> None:
    """Set how many threads each CPU decoder of this process may use (PyAV, TorchCodec; 0: the library's choice),
    so that loader workers x threads fit the cores (`loaders.make_loader`; notebook 10)."""
    global CPU_THREADS
    CPU_THREADS = max(0, int(n))


# --------------------------------------------------------------------------- what a file is


NOT_420 = ("444", "422", "440", "411", "gray")  # pixel formats' chroma other than 4:2:0, as FFmpeg names them


def traits(info) -> set[str]:
    """File traits a library may get wrong: 'vfr', '10-bit', 'rotated', 'b-frames', 'open-gop', 'edit-list',
    'several-streams', 'codec:X', 'container:X', and 'chroma:X' for chroma other than 4:2:0 (X: 444, 422, 440, 411,
    gray)."""
    flags = {
        "b-frames": info.b_frames,
        "open-gop": info.open_gop,
        "vfr": info.variable_frame_rate,
        "10-bit": "10" in info.pix_fmt or "12" in info.pix_fmt,
        "rotated": info.rotation,
        "edit-list": getattr(info, "edit_list_hidden", 0),
        "several-streams": getattr(info, "video_streams", 1) > 1,
    }
    out = {f"codec:{info.codec}", f"container:{info.container.split(',')[0]}"}
    out |= {name for name, present in flags.items() if present}
    chroma = next((c for c in NOT_420 if c in info.pix_fmt), None)
    if chroma:
        out.add(f"chroma:{chroma}")
    return out


# The smallest frame NVDEC decodes, per codec: NVIDIA's NVDEC programming guide (Video Codec SDK).
NVDEC_MIN_SIZE = {
    "h264": (48, 16),
    "hevc": (144, 144),
    "vp9": (128, 128),
    "av1": (128, 128),
    "vp8": (48, 16),
    "mpeg4": (48, 16),
    "mpeg2video": (48, 16),
    "mjpeg": (48, 16),
}


def nvdec_too_small(codec: str, width: int, height: int) -> str | None:
    """Why NVDEC cannot take a `codec` stream of this size, or None when the size is fine."""
    min_w, min_h = NVDEC_MIN_SIZE.get(codec, (0, 0))
    if width < min_w or height < min_h:
        return f"NVDEC's smallest {codec} frame is {min_w}x{min_h}; this video is {width}x{height}"
    return None


# --------------------------------------------------------------------------- what a library gets wrong


def version_tuple(version: str | None) -> tuple[int, ...]:
    """'2.2.4' -> (2, 2, 4): the leading dotted numbers of a version ('0.13.0+cpu' -> (0, 13, 0)); () for None."""
    found = re.match(r"\d+(?:\.\d+)*", version or "")
    return tuple(int(x) for x in found.group(0).split(".")) if found else ()


@dataclasses.dataclass(frozen=True)
class KnownWrong:
    """One row of an adapter's refusal table: files with all of `traits` on one of `devices` are refused with `why`.
    `seen`: the library version it was caught with; `fixed`: the first version that gets it right (None: every
    version); `reads`: 'any', or 'seek' (wrong only after a seek: see `Adapter.FORWARD_ON`)."""

    traits: frozenset
    why: str
    devices: tuple = ("cpu", "cuda")
    seen: str | None = None
    fixed: str | None = None
    reads: str = "any"

    def applies(self, found: set, kind: str, version: str | None) -> bool:
        if kind not in self.devices or not self.traits <= found:
            return False
        return self.fixed is None or not version or version_tuple(version) < version_tuple(self.fixed)


# how a reader says a file trait (`decoders.traits`' names, which the refusals key on)
_TRAIT_WORDS = {"open-gop": "open-GOP", "several-streams": "multi-stream", "vfr": "variable-frame-rate"}
_NAMED = {
    "h264": "H.264",
    "hevc": "HEVC",
    "av1": "AV1",
    "vp9": "VP9",
    "avi": "AVI",
    "mpegts": "MPEG-TS",
    "asf": "ASF (.wmv)",
    "ogg": "Ogg (.ogv)",
    "mxf": "MXF",
    "flv": "FLV",
    "matroska": "Matroska (MKV, WebM)",
    "mov": "MP4/MOV",
}


def trait_words(trait: str) -> str:
    """A file trait as a sentence says it: 'codec:av1' -> 'AV1', 'container:avi' -> 'AVI', 'several-streams' ->
    'multi-stream'; others as they are ('10-bit', 'edit-list')."""
    kind, _, name = trait.partition(":")
    if name:
        return _NAMED.get(name, name.upper() if kind == "codec" else name)
    return _TRAIT_WORDS.get(trait, trait)


def known_wrong(
    trait_names,
    why: str,
    devices=("cpu", "cuda"),
    seen: str | None = None,
    fixed: str | None = None,
    reads: str = "any",
) -> KnownWrong:
    """A `KnownWrong` row from a trait name or an iterable of them."""
    if reads not in ("any", "seek"):
        raise ValueError(f"reads must be 'any' or 'seek', got {reads!r}")
    names = frozenset([trait_names] if isinstance(trait_names, str) else trait_names)
    return KnownWrong(names, why, tuple(devices), seen, fixed, reads)


def nv12_path_refusals() -> tuple[KnownWrong, ...]:
    """`KnownWrong` rows for an adapter whose CUDA path takes NVDEC's NV12 output (4:2:0) and converts it by the
    file's colour tags (`colour.nv12_to_rgb`): every other chroma format is refused there (PyNvVideoCodec, SPDL)."""
    why = (
        "the adapter converts NVDEC's NV12 output (4:2:0) by the file's colour tags; "
        "{} pictures are not read by this path"
    )
    return tuple(known_wrong(f"chroma:{c}", why.format(c), ("cuda",)) for c in NOT_420)


def size_change_why(path, who: str) -> str | None:
    """'its picture size changes mid-stream (480x270, then 320x180 at 1.00 s), which `who` does not follow' where it
    does (`probe.size_change`), else None."""
    changed = size_change(path)
    return f"its picture size changes mid-stream ({changed}), which {who} does not follow" if changed else None


def refuse_size_change(path: str, backend: str) -> None:
    """Raise `BackendUnavailable` where `path`'s picture size changes mid-stream (`size_change_why`): an NVDEC path
    goes on at the first size, and where the size went down returned other frames in silence (notebook 23)."""
    why = size_change_why(path, "this NVDEC path")
    if why:
        raise BackendUnavailable(path, f"{why}: re-encode it at one size, or read it on the CPU", backend)


@lru_cache(maxsize=None)
def library_version(distribution: str) -> str | None:
    """The installed version of a distribution (pip's name), read from its metadata: the library is not imported."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- does the library import here

PROBED_ENV = "PLAYBOOK_IMPORTS_PROBED"  # import names a parent process checked successfully (`child_env`)
# a file of the import names checked successfully in this run of the notebooks (`run_notebooks` sets it per run):
# each notebook's kernel is a new process, which need not repeat the checks
RECORD_ENV = "PLAYBOOK_IMPORTS_RECORD"
_probed_ok: set[str] = set()
_record_lock = threading.Lock()


def _recorded() -> set[str]:
    """The import names an earlier process of this run checked successfully with this Python (`RECORD_ENV`)."""
    record = os.environ.get(RECORD_ENV)
    if not record:
        return set()
    try:
        with open(record) as f:
            lines = f.read().splitlines()
    except OSError:  # none written yet, or the run's folder gone: nothing vouched for
        return set()
    return {name for name, _, python in (line.partition("\t") for line in lines) if python == sys.executable}


def _record(name: str) -> None:
    record = os.environ.get(RECORD_ENV)
    if record:
        # a record that cannot be written costs the next notebook a check, nothing more
        with contextlib.suppress(OSError), _record_lock, open(record, "a") as f:
            f.write(f"{name}\t{sys.executable}\n")  # one short line per write: appends do not interleave


def _vouched() -> set[str]:
    """The import names a parent process passed on as checked (`child_env`), or an earlier notebook of this run
    recorded (`RECORD_ENV`)."""
    return set(filter(None, os.environ.get(PROBED_ENV, "").split(","))) | _recorded()


@lru_cache(maxsize=None)
def importable(name: str) -> tuple[bool, str | None]:
    """(True, None) when the module `name` imports cleanly here, else (False, the error): checked once per process,
    in a child process (`env.check_import`), so that a library that crashes on import cannot take this one with it."""
    if name in _vouched():  # a measuring child, or a later notebook of the run: the earlier check stands
        return True, None
    info = env.check_import(name)
    if info["importable"]:
        _probed_ok.add(name)
        _record(name)
    return info["importable"], info["error"]


def check_imports(names) -> None:
    """`importable` for several modules side by side, each in its own child process, so that a caller waits for the
    slowest import, not their sum (notebooks 20-22)."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [n for n in dict.fromkeys(names) if n and n not in _vouched()]
    if len(todo) > 1:
        with ThreadPoolExecutor(len(todo)) as pool:
            list(pool.map(importable, todo))


def child_env() -> dict:
    """os.environ plus the libraries this process has seen import cleanly, so that the children measuring one
    backend skip a second import check (seconds per child on a GPU machine)."""
    return {**os.environ, PROBED_ENV: ",".join(sorted(_vouched() | _probed_ok))}


# --------------------------------------------------------------------------- the contract


class Adapter:
    """One decoder library behind `read_frames`. A subclass sets the class attributes below and implements
    `read(path, indices, device, info)`, returning uint8 (N, 3, H, W) on the device; optionally `read_file`,
    `read_resized` and `_check_device(kind)` (a device check beyond the import, run once per process per kind)."""

    NAME: str = ""  # the backend's name ('pyav', ...)
    IMPORT: str = ""  # the module it needs ('av'), checked in a child process before first use
    DISTRIBUTION: str = ""  # its pip name, whose installed version `KNOWN_WRONG` rows are compared with
    LABEL: str = ""
    DEVICES: tuple = ("cpu",)  # the device kinds it decodes on
    CHOOSES_STREAM = False  # True: it reads any video stream (else FFmpeg's best one only)
    ROTATES = False  # True: it turns frames as the display matrix says (else `read_frames` does)
    CODECS: dict = {}  # {device kind: codecs that path takes}, where a path takes only some
    KNOWN_WRONG: tuple = ()  # `KnownWrong` rows: file traits it is refused for
    RESIZES_ON: tuple | None = None  # device kinds `read_resized` works on (None: all of DEVICES)
    FORWARD_ON: tuple = ()  # device kinds where reads='seek' rows are served by one forward pass (`forward_only`)
    OWN_STREAM: tuple = ()  # device kinds where it works on torch's current CUDA stream: `GpuLoader`'s threads share one
    HANDOVER: dict = {}  # {device kind: the `handover` module that does the same with the library alone}
    ROLES: dict = {}  # {role: rank} where the measurements pick libraries (`ROLES`, `decoders.by_role`)
    read_file = None  # read_file(fileobj, ...): reads an open binary file itself
    read_resized = None  # read_resized(source, ..., size): decodes straight to a size

    def __init__(self):
        self._machine: dict[str, str | None] = {}
        self._learned: dict[tuple, str] = {}  # (device kind, codec, bit depth) -> why: refused when read, here
        self._lock = threading.Lock()

    def learn_refusal(self, device, codec: str, bit_depth: int, why: str) -> None:
        """Refuse from now on, in this process, every file of `codec` and `bit_depth` on `device`: this machine refused
        one when it was read (an AV1 file on an H100's NVDEC: `choose.refused_when_read`). Notebook 22."""
        self._learned[(Device.parse(device).kind, codec, bit_depth)] = why

    def __repr__(self) -> str:
        return f"<{type(self).__name__} adapter {self.NAME!r}>"

    def read(self, path: str, indices: list[int], device: Device, info):
        raise NotImplementedError

    def _check_device(self, kind: str) -> str | None:
        return None

    def version(self) -> str | None:
        """The installed version of the library (from its metadata; the library is not imported)."""
        return library_version(self.DISTRIBUTION) if self.DISTRIBUTION else None

    def why_unavailable(self, device="cpu", info=None) -> str | None:
        """None when this library can decode on `device` here (and, given a file's `media.VideoInfo`, that file
        right); else the reason in words. The machine's part is checked once per process; the file's: codec,
        `KNOWN_WRONG` traits, stream choice and, on CUDA, NVDEC's minimum frame size."""
        kind = Device.parse(device).kind
        if kind not in self._machine:
            with self._lock:
                if kind not in self._machine:
                    self._machine[kind] = self._why_machine(kind)
        why = self._machine[kind]
        if why is not None or info is None:
            return why
        return self._why_file(info, kind)

    def _why_machine(self, kind: str) -> str | None:
        if kind not in self.DEVICES:
            return f"{self.NAME} has no {kind} path (it decodes on: {', '.join(self.DEVICES)})"
        if kind == "cuda" and not cuda_visible():
            return "torch sees no CUDA GPU"
        ok, err = importable(self.IMPORT)
        if not ok:
            return f"{self.IMPORT} does not import: {err}"
        return self._check_device(kind)

    def _why_file(self, info, kind: str) -> str | None:
        if self._learned and (learned := self._learned.get((kind, info.codec, info.bit_depth))):
            return learned
        codecs = self.CODECS.get(kind)
        if codecs and info.codec not in codecs:
            return (
                f"{self.LABEL or self.NAME}'s {kind.upper()} video decoder does not take {info.codec} (only "
                f"{', '.join(codecs)}); use device='{'cuda' if kind == 'cpu' else 'cpu'}'"
            )
        for row in self._rows_for(info, kind):
            if row.reads == "any" or kind not in self.FORWARD_ON:
                return row.why
        if info.stream != info.best_stream and not self.CHOOSES_STREAM:
            return (
                f"{self.NAME} always decodes FFmpeg's best video stream ({info.best_stream}); it cannot read "
                f"stream {info.stream}"
            )
        if kind == "cuda":
            return nvdec_too_small(info.codec, info.width, info.height)
        return None

    def _rows_for(self, info, kind: str) -> list:
        """The `KNOWN_WRONG` rows that apply to a file (`media.VideoInfo`) on a device kind."""
        found = traits(info)
        version = self.version() if any(row.fixed for row in self.KNOWN_WRONG) else None
        return [row for row in self.KNOWN_WRONG if row.applies(found, kind, version)]

    def forward_only(self, info, kind: str) -> str | None:
        """Why this adapter reads the file only by one forward pass from frame 0 on `kind` (a reads='seek' row, on a
        FORWARD_ON device), or None when its reads may seek. Exact, but every frame up to the last one asked for is
        decoded."""
        if kind not in self.FORWARD_ON:
            return None
        return next((row.why for row in self._rows_for(info, kind) if row.reads == "seek"), None)


# The roles an adapter may declare (`Adapter.ROLES`), each with what its rank orders
ROLES = {
    "simpler": "every library, by how simple a dependency it is: the tie rule's last resort (notebook 22)",
    "cpu_reference": "the CPU decoders whose decode checks another library's frames of an unstamped file, tried in turn",
    "cpu_anchor": "the CPU libraries notebook 20 sets against the FFmpeg command line",
    "cpu_sweep": "the CPU libraries of notebook 21's worker sweep, in the order it takes them without a table of 20",
    "gpu_loader": "the libraries of the sampled-frames GPU loaders (notebooks 21 and 22)",
    "raw_nvdec": "the libraries whose raw NVDEC decode the ceiling takes the best of (`bench.nvdec`)",
    "rank_gpu": "what a rank decodes with on its GPU in notebook 30, in the order 'auto' tries",
    "rank_cpu": "what a rank decodes with on the CPU in notebook 30, in the order 'auto' tries",
}


# --------------------------------------------------------------------------- helpers the adapters share


def in_order(frames, unique: list[int], indices: list[int]):
    """`frames` decoded once each for the sorted `unique` indices, gathered into the order of `indices`
    (repeats included) with one index operation on the frames' device."""
    import torch

    if unique == indices:
        return frames
    position = {i: k for k, i in enumerate(unique)}
    return frames[torch.tensor([position[i] for i in indices], device=frames.device)]
