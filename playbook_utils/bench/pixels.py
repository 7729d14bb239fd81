"""Same pixels from every backend (notebook 20): each backend's RGB against a reference converted from the same
decoded planes with the file's colour tags (`colour.yuv_to_rgb`), clips read alternately in one process per backend
so a decoder reused across files shows. `controls` shows THRESHOLD_DB sits between right and wrong conversions."""

from __future__ import annotations

import math
import re
import statistics
import tempfile
from pathlib import Path

import numpy as np

from playbook_utils import colour
from playbook_utils.decoders import why_unavailable
from playbook_utils.decoders.isolated import run_requests
from playbook_utils.probe import video_info
from playbook_utils.resize import psnr

THRESHOLD_DB = 36.0  # at least this PSNR against the reference on every frame: the backend converts as the tags say


def _planes(frame, bits: int):
    """The Y, U and V planes of a PyAV frame as numpy arrays, as decoded (no conversion by swscale)."""
    dtype = np.dtype(np.uint8) if bits == 8 else np.dtype("<u2")
    out = []
    for plane in frame.planes:
        flat = np.frombuffer(plane, dtype)
        out.append(flat.reshape(-1, plane.line_size // dtype.itemsize)[: plane.height, : plane.width].copy())
    return out


def decoded_planes(path, indices) -> tuple:
    """(Y, U, V) int32 tensors (N, h, w) of the frames `indices` of `path`, as FFmpeg decodes them (PyAV, one
    forward pass from the start, frames matched by their timestamps)."""
    import av
    import torch

    info = video_info(path)
    index_of = {p: i for i, p in enumerate(info.pts)}
    wanted, got = set(indices), {}
    with av.open(str(path)) as container:
        stream = container.streams.video[info.stream]
        for frame in container.decode(stream):
            i = index_of.get(frame.pts)
            if i in wanted:
                got[i] = _planes(frame, info.bit_depth)
            if len(got) == len(wanted):
                break
    missing = wanted - set(got)
    if missing:
        raise RuntimeError(f"{path}: frames {sorted(missing)} not decoded")
    return tuple(torch.from_numpy(np.stack([got[i][k] for i in indices]).astype(np.int32)) for k in range(3))


def reference_rgb(path, indices, matrix: str | None = None, colour_range: str | None = None):
    """uint8 (N, 3, H, W): the frames `indices` converted from their decoded planes with the file's tags (or
    FFmpeg's rule for untagged files: `colour.effective`), or with `matrix` / `colour_range` where given."""
    info = video_info(path)
    m, r = colour.effective(info)
    y, u, v = decoded_planes(path, indices)
    return colour.yuv_to_rgb(y, u, v, matrix or m, colour_range or r, info.bit_depth)


def controls(path, indices) -> dict:
    """How far the same decoded planes land with the wrong matrix and with the wrong range, from the reference
    (dB): where the threshold has to stay above."""
    info = video_info(path)
    m, r = colour.effective(info)
    ref = reference_rgb(path, indices)
    other_m = "bt709" if m != "bt709" else "bt601"
    other_r = "full" if r == "limited" else "limited"
    return {
        "wrong_matrix": other_m,
        "wrong_matrix_db": psnr(reference_rgb(path, indices, matrix=other_m), ref),
        "wrong_range": other_r,
        "wrong_range_db": psnr(reference_rgb(path, indices, colour_range=other_r), ref),
    }


def run(clips: dict, backends, device: str = "cpu", indices=(0, 3, 5), rounds: int = 3, timeout: float = 300, env=None):
    """The pixel-agreement matrix: every backend reads `indices` of every clip ({name: path}) in turn, `rounds` times,
    in one child process per backend (`env` added), against the clip's reference. Returns one row per (backend, clip,
    round): {'status', 'psnr_db', 'identical', 'agrees', 'error', ...}. Notebook 20."""
    indices = [int(i) for i in indices]
    rows = []
    with tempfile.TemporaryDirectory(prefix="pixels-") as tmp:
        refs = {}
        for name, path in clips.items():
            refs[name] = str(Path(tmp) / f"{name}.npy")
            np.save(refs[name], reference_rgb(path, indices).numpy())
        for backend in backends:
            why = why_unavailable(backend, device)  # the backend here, then each clip
            refused = {n: w for n, p in clips.items() if (w := why or why_unavailable(backend, device, p))}
            ask = {"indices": indices, "backend": backend, "device": device}
            requests = [
                {**ask, "path": str(clips[n]), "reference": refs[n], "_clip": n, "_round": r}
                for r in range(rounds)
                for n in clips
                if n not in refused
            ]
            answers = run_requests(requests, timeout=timeout, env=env)
            rows += [_row(backend, device, n, 0, {"status": "unavailable", "error": why}) for n, why in refused.items()]
            rows += [_row(backend, device, q["_clip"], q["_round"], a) for q, a in zip(requests, answers)]
    return rows


def _row(backend, device, clip, round_, answer) -> dict:
    frames = answer.get("psnr_db") or []
    worst = min((math.inf if p is None else p) for p in frames) if frames else None
    identical = worst == math.inf
    return {
        "backend": backend,
        "device": device,
        "clip": clip,
        "round": round_,
        "status": answer["status"],
        "psnr_db": None if identical else worst,
        "identical": identical,
        "agrees": worst is not None and worst >= THRESHOLD_DB,
        "error": answer.get("error"),
    }


def summary(rows) -> dict:
    """{backend on device: {'clips', 'agree', 'worst_db', 'median_db', 'identical', 'disagree', 'refused',
    'failed'}} over the rows of `run`."""
    out: dict = {}
    for r in rows:
        s = out.setdefault(
            f"{r['backend']} on {r['device']}",
            {"clips": set(), "agree": set(), "dbs": [], "identical": 0, "disagree": {}, "refused": {}, "failed": {}},
        )
        s["clips"].add(r["clip"])
        if r["status"] == "unavailable":
            s["refused"][r["clip"]] = r["error"]
        elif r["status"] != "ok":
            s["failed"][r["clip"]] = r["error"]
        else:
            if r["psnr_db"] is not None:
                s["dbs"].append(r["psnr_db"])
            else:  # every frame of the clip identical to the reference
                s["identical"] += 1
            if r["agrees"]:
                s["agree"].add(r["clip"])
            else:
                s["disagree"][r["clip"]] = min(r["psnr_db"], s["disagree"].get(r["clip"], r["psnr_db"]))
    for s in out.values():
        finite = s.pop("dbs")
        s["worst_db"] = min(finite) if finite else None
        s["median_db"] = statistics.median(finite) if finite else None
        s["agree"] = sorted(s["agree"] - set(s["disagree"]))
        s["clips"] = sorted(s["clips"])
    return out


def _by_reason(why: dict) -> str:
    """'clip, clip (reason); clip (reason)': the clips of `why` ({clip: reason}) grouped by their reason, each
    reason said once, without the file's path and backend that an adapter's refusal starts with."""
    groups: dict = {}
    for clip, w in why.items():
        groups.setdefault(re.sub(r"^\w+: \S+ \[\w+\]: ", "", str(w)), []).append(clip)
    return "; ".join(f"{', '.join(clips)} ({w})" for w, clips in groups.items())


def verdict_lines(summ: dict) -> list[str]:
    """One line per backend: agrees on every clip it read (with its worst and median dB), or which clips it
    disagrees on and by how much, and what it refused."""
    lines = []
    for key, s in summ.items():
        read = len(s["clips"]) - len(s["refused"]) - len(s["failed"])
        if not read:
            why = next(iter(s["refused"].values()), None) or next(iter(s["failed"].values()), "")
            lines.append(f"{key}: not measured: {why}")
            continue
        head = f"{key}: "
        if s["disagree"]:
            worst = ", ".join(f"{c} {db:.1f} dB" for c, db in s["disagree"].items())
            head += f"DISAGREES on {len(s['disagree'])} of {read} clips ({worst})"
        elif s["worst_db"] is None:  # no frame differed from the reference at all: no dB to give
            head += f"agrees on all {read} clips it read (every frame identical to the reference)"
        else:
            head += (
                f"agrees on all {read} clips it read (worst frame {s['worst_db']:.1f} dB, median {s['median_db']:.1f})"
            )
        if s["refused"]:
            head += f"; refused {len(s['refused'])}: " + _by_reason(s["refused"])
        if s["failed"]:
            head += f"; FAILED {len(s['failed'])}: " + _by_reason(s["failed"])
        lines.append(head)
    return lines
