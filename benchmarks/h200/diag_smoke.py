"""Where the reader's smoke run spends its time on a GPU machine: child start-up, the CPU sweep's phases, the
bench's jobs. Run from the project root: python3 benchmarks/h200/diag_smoke.py VIDEO_DIR WORK_DIR [table] (with
`table`, 20's smoke table on the folder's 1080p file too, about 2 minutes more).
Prints one line per measurement; nothing here is a result the notebooks quote."""

import subprocess
import sys
import time
from pathlib import Path


def fresh(code: str, n: int = 1) -> float:
    """Seconds for `n` fresh interpreters running `code` side by side."""
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    for p in procs:
        p.wait()
    return time.perf_counter() - t


def main() -> None:
    video_dir, work = Path(sys.argv[1]), Path(sys.argv[2])
    for what, code, n in [
        ("python", "pass", 1),
        ("import torch", "import torch", 1),
        ("import torch x16", "import torch", 16),
        ("torch + CUDA context", "import torch; torch.zeros(1).cuda()", 1),
        ("import av", "import av", 1),
        ("import torchcodec", "import torch, torchcodec.decoders", 1),
        ("import torchcodec x16", "import torch, torchcodec.decoders", 16),
        ("import PyNvVideoCodec", "import PyNvVideoCodec", 1),
        ("import playbook_utils.decoders", "import playbook_utils.decoders", 1),
    ]:
        print(f"{what:34s} {fresh(code, n):6.2f} s", flush=True)

    from playbook_utils import folders
    from playbook_utils.bench import harness, loader_bench
    from playbook_utils.decoders import BACKENDS

    folder = folders.scan_videos(video_dir)
    base = list(folder.videos.values())
    t = time.perf_counter()
    paths = loader_bench.epoch_items(base, 192, work / "epoch")
    print(f"192 epoch files: {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    for b in ("pyav", "torchcodec"):
        loader_bench.accepted(paths, b)
    print(f"accepted() for 2 backends: {time.perf_counter() - t:.1f} s", flush=True)
    rows, _, _ = loader_bench.sweep_workers(paths, ["pyav", "torchcodec"], [16], 16, 4, 0.02, 12, 5, (720, 1280), 120)
    for r in rows:
        print(
            f"  {r['backend']} x16: config {r['config_s']:.1f} s, first batch {r['first_batch_s']:.1f}, "
            f"prefetched {r['prefetched_s']:.1f}, close {r['close_s']:.1f}",
            flush=True,
        )

    clip = next(p for p in base if "1080" in p.name)
    for b in ("pynvvideocodec", "torchcodec"):
        spec = {
            "kind": "gpu",
            "backend": b,
            "threads": 4,
            "device": "cuda",
            "batch_size": 4,
            "chunk": 24,
            "warmup_batches": 1,
            "paths": loader_bench.distinct_copies(clip, 24, work / "epoch"),
        }
        t = time.perf_counter()
        r = loader_bench.measure_isolated(spec)
        print(
            f"GPU row {b} x4 over 24 items: {time.perf_counter() - t:.1f} s in all, start-up "
            f"{r.get('startup_s', 0):.1f} s, window {r.get('seconds') or 0:.1f} s, {r.get('frames_per_s') or 0:,.0f} "
            f"frames/s",
            flush=True,
        )
    if sys.argv[3:] != ["table"]:
        return
    jobs = [
        harness.Job(b, d, w, str(clip), 1, 0.3, max_frames=120)
        for d in ("cpu", "cuda")
        for b in BACKENDS
        for w in ("sequential", "uniform16", "clips4x8s2")
    ]
    t = time.perf_counter()
    out = harness.run_all(jobs, progress=False)
    print(f"20's table on {clip.name}: {len(jobs)} jobs in {time.perf_counter() - t:.1f} s", flush=True)
    for r in out:
        if r["status"] == "ok":
            ph = " ".join(f"{k} {v:.2f}" for k, v in r["phases_s"].items())
            print(f"  {r['backend']:15s} {r['device']:5s} {r['workload']:11s} served {r['served_s']:5.1f} s: {ph}")


if __name__ == "__main__":
    main()
