"""Run a backend in its own process (notebooks 12, 13 and the benchmarks).

Some libraries cannot share a process (PyNvVideoCodec's bundled FFmpeg breaks TorchCodec once
loaded), some crash or hang on bad input, and benchmarks need a fresh process per backend. Here a
child process does the decoding; errors come back as our own exceptions, a crash or a time-out as
`DecodeError`, never as a dead kernel.

    python -m playbook_utils.decoders.isolated   (the child; reads one JSON request per line)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from playbook_utils.errors import BackendUnavailable, DecodeError, last_line


def _child_env() -> dict:
    from playbook_utils.decoders import child_env

    env = child_env()   # the imports this process has probed need no second probe there
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def read_frames_isolated(path, indices, backend: str = "pyav", device: str = "cpu", timeout: float = 300,
                         stream: int | None = None):
    """`read_frames` in a child process (of the container's stream `stream`, by default FFmpeg's best video
    stream); the frames come back through a temporary .npy file.

    Returns the same tensor `read_frames` would (moved to `device`). Introduced in notebook 12.
    """
    import numpy as np
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "frames.npy"
        req = {"path": str(path), "indices": [int(i) for i in indices], "backend": backend,
               "device": device, "save": str(out), "stream": stream}
        results = run_requests([req], timeout=timeout)
        r = results[0]
        if r["status"] != "ok":
            raise_result(r, path, backend)
        frames = torch.from_numpy(np.load(out))
    return frames.to(device) if device != "cpu" else frames


def raise_result(r: dict, path, backend: str):
    """Turn a child's failure record back into the exception it stands for."""
    cls = BackendUnavailable if r["status"] == "unavailable" else DecodeError
    raise cls(path, r["error"], backend)


def run_requests(requests: list[dict], timeout: float = 300) -> list[dict]:
    """Serve `requests` (dicts of path, indices, backend, device[, stream][, save]) in one child process.

    Each result: {'status': 'ok' | 'unavailable' | 'error' | 'crashed', 'stamps' (when asked with
    'stamps': True), 'error'}. If the child dies, the request it was on is 'crashed' and a new
    child takes the rest.
    """
    results: list[dict] = []
    pending = list(requests)
    while pending:
        payload = "".join(json.dumps(r) + "\n" for r in pending)
        try:
            run = subprocess.run([sys.executable, "-m", "playbook_utils.decoders.isolated"], input=payload,
                                 capture_output=True, text=True, timeout=timeout, env=_child_env())
            lines = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
            died = f"exit {run.returncode}: {last_line(run.stderr)[:200]}"
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
            died = f"no answer within {timeout:.0f} s"
        results += lines
        pending = pending[len(lines):]
        if pending:
            results.append({"status": "crashed", "error": f"the decoding process died ({died})"})
            pending = pending[1:]
    return results


def _serve_one(req: dict) -> dict:
    import numpy as np

    from playbook_utils.decoders import as_stored, read_frames, video_info

    try:
        frames = read_frames(req["path"], req["indices"], backend=req["backend"], device=req["device"],
                             stream=req.get("stream"))
    except BackendUnavailable as e:
        return {"status": "unavailable", "error": e.cause}
    except DecodeError as e:
        return {"status": "error", "error": e.cause}
    except Exception as e:  # anything else is a bug in an adapter: report it as data
        return {"status": "error", "error": f"unexpected {type(e).__name__}: {e}"[:400]}
    result = {"status": "ok", "error": None, "shape": list(frames.shape)}
    if req.get("stamps"):
        from playbook_utils.media import StampError, read_stamp

        stamps = []
        for f in as_stored(frames, video_info(req["path"], stream=req.get("stream"))):   # stamps read upright
            try:
                stamps.append(read_stamp(f))
            except StampError:
                stamps.append(None)
        result["stamps"] = stamps
    if req.get("save"):
        np.save(req["save"], frames.cpu().numpy())
    return result


if __name__ == "__main__":
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(_serve_one(json.loads(line))), flush=True)
