"""Run a backend in its own process (notebooks 12, 13 and the benchmarks): a child process decodes
(`playbook_utils.child`); its errors come back as our own exceptions, a crash or a time-out as `DecodeError`. `python
-m playbook_utils.decoders.isolated` is the child (one JSON request per line)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from playbook_utils import child
from playbook_utils.decoders import as_stored, child_env, read_frames, video_info
from playbook_utils.decoders import decord as decord_builds
from playbook_utils.errors import BackendUnavailable, DecodeError
from playbook_utils.stamps import read_stamps

__all__ = ["read_frames_isolated", "run_requests"]


def read_frames_isolated(
    path, indices, backend: str = "pyav", device: str = "cpu", timeout: float = 300, stream: int | None = None
):
    """`read_frames` in a child process, the frames back through a temporary .npy file: returns the same tensor
    `read_frames` would (moved to `device`). Introduced in notebook 12."""
    import numpy as np
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "frames.npy"
        req = {
            "path": str(path),
            "indices": [int(i) for i in indices],
            "backend": backend,
            "device": str(device),
            "save": str(out),
            "stream": stream,
        }
        r = run_requests([req], timeout=timeout)[0]
        if r["status"] != "ok":  # the child's failure raised here as the exception it stands for
            cls = BackendUnavailable if r["status"] == "unavailable" else DecodeError
            raise cls(path, r.get("cause") or r["error"], backend)
        frames = torch.from_numpy(np.load(out))
    return frames.to(str(device)) if str(device) != "cpu" else frames


def run_requests(requests: list[dict], timeout: float = 300, env: dict | None = None) -> list[dict]:
    """Serve `requests` (dicts of path, indices, backend, device[, stream][, save][, stamps][, reference]) in one
    child process; return one `child` answer each, with 'shape', and 'stamps' or 'psnr_db' when asked. `env`: extra
    variables for the child (notebook 11)."""
    # the imports this process has checked need no second check there
    return child.serve(
        child.python("-m", "playbook_utils.decoders.isolated"), requests, timeout, {**child_env(), **(env or {})}
    )


def _serve_one(req: dict) -> dict:
    import numpy as np

    if req.get("raw"):  # the library's own call, none of the adapter's checks (decord: notebook 11)
        frames = decord_builds.raw_read(req["path"], req["indices"])
    else:
        frames = read_frames(
            req["path"], req["indices"], backend=req["backend"], device=req["device"], stream=req.get("stream")
        )
    result = {"shape": list(frames.shape)}
    if req.get("stamps"):  # read upright
        result["stamps"] = read_stamps(as_stored(frames, video_info(req["path"], stream=req.get("stream"))))
    if req.get("save"):
        np.save(req["save"], frames.cpu().numpy())
    if req.get("reference"):  # per-frame PSNR (dB) against an RGB reference of the same shape, saved as .npy
        ref = np.load(req["reference"]).astype(np.float64)
        got = frames.cpu().numpy().astype(np.float64)
        if got.shape != ref.shape:
            raise DecodeError(req["path"], f"shape {got.shape} against the reference's {ref.shape}", req["backend"])
        mse = ((got - ref) ** 2).reshape(len(got), -1).mean(axis=1)
        result["psnr_db"] = [None if m == 0 else float(10 * np.log10(255**2 / m)) for m in mse]  # None: identical
    return result


if __name__ == "__main__":
    child.serve_requests(_serve_one)
