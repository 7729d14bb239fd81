"""decord adapter: a C++ video reader with batched random access (notebook 11). decord 0.6.0 or its maintained fork
decord2 installs the `decord` module; PyPI wheels are CPU-only. Refusals name the installed build and version."""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

from playbook_utils import child
from playbook_utils.decoders import base
from playbook_utils.device import Device

__all__ = ["ADAPTER", "Decord", "alternative", "installed", "raw_read"]

BUILDS = ("decord2", "decord")  # the distributions that install the `decord` module


def installed(path=None) -> tuple[str, str] | None:
    """(distribution, version) of the build whose `decord` module this process imports ('decord', '0.6.0' or
    'decord2', '3.4.0'), read from the metadata beside the module without importing it; None where there is none.
    `path`: a folder to look in instead of sys.path (`alternative`'s)."""
    site = _site() if path is None else Path(path)
    if site is None:
        return None
    for dist in BUILDS:
        for info in sorted(site.glob(f"{dist}-*.dist-info")):
            return dist, info.name[len(dist) + 1 : -len(".dist-info")]
    return None


@lru_cache(maxsize=1)
def _site() -> Path | None:
    """The folder holding the `decord` package this process imports (found once: every refusal names its build)."""
    spec = importlib.util.find_spec("decord")
    return Path(spec.origin).parent.parent if spec is not None and spec.origin else None


def alternative() -> tuple[str, str, Path] | None:
    """(distribution, version, folder) of the decord build `make setup` put beside the environment
    (<venv>/decord-alt/<name>): the one not installed in it, which a child process imports first with that folder on
    its PYTHONPATH (notebook 11). None where there is none."""
    for folder in sorted((Path(sys.prefix) / "decord-alt").glob("*")):
        found = installed(folder)
        if found and found != installed():
            return (*found, folder)
    return None


def _wrong(trait: str, what: str, reads: str = "any", fixed: str | None = None) -> base.KnownWrong:
    return base.known_wrong(
        trait,
        f"decord cannot be trusted with {base.trait_words(trait)} video: {what}",
        seen="0.6.0",
        fixed=fixed,
        reads=reads,
    )


class Decord(base.Adapter):
    NAME, IMPORT, DISTRIBUTION = "decord", "decord", "decord"
    DEVICES = ("cpu", "cuda")
    ROTATES = True  # returns frames turned as the display matrix says
    HANDOVER = {"cpu": "decord_clips"}
    ROLES = {"simpler": 5, "cpu_reference": 2, "cpu_anchor": 2, "cpu_sweep": 2, "rank_cpu": 2}
    # File traits decord was seen to get wrong in the correctness matrix: refused, never guessed.
    # Open GOP: wrong only after a seek, so on the CPU such a file is read in one forward pass (`_forward`), which
    # the correctness tests prove exact
    FORWARD_ON = ("cpu",)
    KNOWN_WRONG = (
        _wrong(
            "open-gop",
            "after a seek it returns a neighbouring frame (seen with H.264 and HEVC, off by 1-3)",
            reads="seek",
        ),
        # decord2 3.4.0 brings FFmpeg 8, whose AV1 decoder is exact; decord's versions (0.6) sort below every
        # decord2 release, so a row fixed in decord2 still refuses decord 0.6
        _wrong("codec:av1", "its bundled FFmpeg 4 has no AV1 decoder ('cannot find video stream')", fixed="3.4.0"),
        _wrong("container:avi", "random access returns frames of the first GOP (seen with and without B-frames)"),
        _wrong("container:mpegts", "random access returns frames of later GOPs (seen with H.264 and MPEG-2 video)"),
        _wrong("container:asf", "random access returns frames a GOP early (seen with WMV 8 in a .wmv file)"),
        _wrong("container:ogg", "it fails to open Ogg files ('Failed to measure duration/frame-count', Theora)"),
        _wrong(
            "edit-list",
            "it counts the frames an MP4 edit list hides, and returns frames other than those a player shows",
        ),
        _wrong(
            "several-streams",
            "it has no way to choose a stream, and decord 0.6's FFmpeg 4 picked another than FFmpeg's best "
            "(a 204x114 stream where the others read the 256x144 default one; the stamped clips cannot show decord2's)",
        ),
    )

    def version(self) -> str | None:
        """The version of the installed build (`installed`): decord 0.6.0, or decord2's."""
        found = installed()
        return found[1] if found else None

    def _why_file(self, info, kind: str) -> str | None:
        why = super()._why_file(info, kind)  # the refusal names the build and version it is about
        found = installed()
        return why.replace("decord ", f"{found[0]} {found[1]} ", 1) if why and found else why

    def _check_device(self, kind: str) -> str | None:
        """Whether this decord was built with CUDA, asked of a child process (once per process, as every machine
        check is): decord is never imported into this process, since its bundled FFmpeg 4 libraries, once loaded,
        break PyAV's VP9 encoder in the same process (shown in notebook 11)."""
        if kind != "cuda":
            return None
        found = child.call(
            child.python(
                "-c", "import json, decord; print(json.dumps({'status': 'ok', 'gpu': bool(decord.gpu(0).exist)}))"
            ),
            timeout=120,
        )
        if found["status"] != "ok" or not found.get("gpu"):
            return "this decord was built without CUDA (the PyPI wheel is CPU-only)"
        return None

    def read(self, source, indices: list[int], device: Device, info):
        """`source`: a path, or an open binary file object (`read_file`: decord's VideoReader reads it whole into
        memory before decoding; notebook 24)."""
        # decord2 3.4.0's threaded decoder now and then fails to send a packet (EAGAIN) on HEVC, and a fresh reader
        # reads the file: up to three readers
        for attempt in range(3):
            try:
                return self._read(source, indices, device, info)
            except Exception as e:
                if attempt == 2 or "Error sending packet" not in str(e):
                    raise

    read_file = read

    def _read(self, path: str, indices: list[int], device: Device, info):
        import torch

        decord = _quiet_decord()
        ctx = decord.gpu(device.ordinal) if device.is_cuda else decord.cpu(0)
        vr = decord.VideoReader(path, ctx=ctx)
        if len(vr) != info.num_frames:
            raise RuntimeError(
                f"decord counts {len(vr)} frames, the packets say {info.num_frames}: "
                "its frame indices cannot be trusted for this file"
            )
        # get_batch is several times slower on unsorted indices: fetch each frame once, in order.
        unique = sorted(set(indices))
        if self.forward_only(info, device.kind):
            frames = _forward(vr, unique)
        else:
            # DLPack hands decord's own buffer to torch on the CPU too: asnumpy() would copy the whole clip
            frames = torch.from_dlpack(vr.get_batch(unique).to_dlpack())
        return base.in_order(frames, unique, indices).permute(0, 3, 1, 2)


@lru_cache(maxsize=None)
def _quiet_decord():
    """decord, imported once with FFmpeg's log lines off: a broken file's error is raised and named instead."""
    import decord

    decord.logging.set_level(decord.logging.QUIET)
    return decord


def raw_read(path: str, indices: list[int]):
    """The library's own call with none of the adapter's checks: a `VideoReader` and one `get_batch` of `indices`,
    uint8 (N, 3, H, W). What notebook 11 sets decord 0.6 and decord2 side by side with, on the correctness matrix."""
    import torch

    return torch.from_numpy(_quiet_decord().VideoReader(str(path)).get_batch(list(indices)).asnumpy()).permute(
        0, 3, 1, 2
    )


# frames per get_batch call of the forward pass: 32 frames of 1080p RGB are 200 MB at a time
FORWARD_RUN = 32


def _forward(vr, unique: list[int]):
    """The frames `unique` (sorted) of a fresh VideoReader, decoded in one pass from frame 0 by `get_batch` over
    consecutive runs of `FORWARD_RUN` frames, never seeking: exact on open-GOP video. Returns (K, H, W, 3) uint8."""
    import bisect

    import torch

    kept, end = [], unique[-1] + 1
    if len(unique) == end:  # every frame from the first: one call, no copy (the output holds them all anyway)
        return torch.from_dlpack(vr.get_batch(unique).to_dlpack())
    for a in range(0, end, FORWARD_RUN):
        b = min(end, a + FORWARD_RUN)
        run = torch.from_dlpack(vr.get_batch(list(range(a, b))).to_dlpack())  # decoded even where none is wanted
        want = unique[bisect.bisect_left(unique, a) : bisect.bisect_left(unique, b)]
        if len(want) == b - a:
            kept.append(run)
        elif want:
            kept.append(run[[t - a for t in want]])  # a copy: the rest of the run is freed
    return torch.cat(kept)


ADAPTER = Decord()
