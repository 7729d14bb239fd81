"""When does a DataLoader worker abort ("terminate called without an active exception")?

Seen on the H200 in notebook 21: two decord workers killed by SIGABRT as their loaders were dropped.
Each trial runs a child process that builds `make_loader(..., backend="decord", num_workers=2)` over 1080p
clips, takes 2 batches, waits IDLE seconds, then drops the loader (and the same with PyAV, IDLE 0). The
trial records whether a worker aborted (the parent's RuntimeError "killed by signal: Aborted", or the C++
runtime's message on stderr) and how long the shutdown took. Writes dataloader_worker_abort.json into the
current folder (results/cpu-2core/ holds the one it wrote).

    .venv/bin/python benchmarks/experiments/dataloader_worker_abort.py   # needs the full media: make playbook MODE=full
"""

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path.cwd()
CHILD = """
import sys, time
from playbook_utils import loaders
from playbook_utils.bench import media
clips = media.default_media(smoke=False)
paths = [clips["h264_1080p_gop30.mp4"], clips["hevc_1080p_gop30.mp4"]] * 30
dl = loaders.make_loader(paths, backend=sys.argv[2], batch_size=4, num_workers=2, k=16)
it = iter(dl)
for _ in range(2):
    next(it)
time.sleep(float(sys.argv[1]))
t = time.perf_counter()
del it, dl
print("SHUTDOWN_S", time.perf_counter() - t, flush=True)
"""


def trial(idle: float, backend: str = "decord") -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, str(idle), backend], capture_output=True, text=True, timeout=600)
    shutdown = [float(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("SHUTDOWN_S")]
    return {
        "backend": backend,
        "idle_s": idle,
        "returncode": p.returncode,
        "wall_s": round(time.perf_counter() - t, 1),
        "shutdown_s": round(shutdown[0], 2) if shutdown else None,
        "worker_aborted": "killed by signal: Aborted" in p.stderr or "terminate called" in p.stderr,
    }


if __name__ == "__main__":
    trials = [trial(idle) for idle in (0, 30) for _ in range(3)] + [trial(0, "pyav") for _ in range(3)]
    for t in trials:
        print(t, flush=True)
    out = {
        "what": __doc__.strip().splitlines()[0],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "trials": trials,
    }
    (HERE / "dataloader_worker_abort.json").write_text(json.dumps(out, indent=1) + "\n")
