"""Decode benchmarks: each backend x workload x clip, in one child process per backend (notebook 20).

Each job warms up, repeats for a minimum time, checks its frames (`exactness`) and samples CPU, RSS and NVDEC use;
a failing job is a recorded row. Results: a CSV and JSON table with an environment stamp."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from playbook_utils import child, env, sampling
from playbook_utils.bench import anchor, exactness, timing, verdicts
from playbook_utils.bench.monitor import UtilizationMonitor
from playbook_utils.decoders import check_libraries, child_env, read_frames, reads_forward, video_info, why_unavailable
from playbook_utils.device import Device

WORKLOADS = {
    "sequential": {"kind": "sequential"},
    "uniform8": {"kind": "uniform", "k": 8},
    "uniform16": {"kind": "uniform", "k": 16},
    "uniform32": {"kind": "uniform", "k": 32},
    "clips4x8s2": {"kind": "clips", "clip_len": 8, "stride": 2, "num_clips": 4},
}


@dataclasses.dataclass
class Job:
    """One measurement: a backend decoding a workload from one clip, with `threads` concurrent callers."""

    backend: str
    device: str
    workload: str
    clip: str
    threads: int = 1
    min_time: float = 2.0
    warmup: int = 1
    max_frames: int | None = None  # the workload over the clip's first `max_frames` frames only (None: all)


def indices_for(workload: str, num_frames: int, call: int) -> list[int]:
    """Frame indices one call of `workload` asks for (clips vary with the call number, as in training)."""
    spec = WORKLOADS[workload]
    if spec["kind"] == "sequential":
        return sampling.all_frames(num_frames)
    if spec["kind"] == "uniform":
        return sampling.uniform(num_frames, spec["k"])
    clips = sampling.random_clips(num_frames, spec["clip_len"], spec["stride"], spec["num_clips"], seed=call)
    return [i for clip in clips for i in clip]


def _child(job: Job) -> dict:
    """Run one job in this process and return its measurements; timed calls rotate over other names of the clip
    (`timing.other_names`) so no adapter reuses the decoder of the previous call."""
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        return _measure(job, timing.other_names(job.clip, folder))


def _measure(job: Job, clips: list[str]) -> dict:
    """The measurement of `_child`, with `clips` the names of job.clip to rotate over."""
    n = video_info(job.clip).num_frames
    n = min(n, job.max_frames) if job.max_frames else n
    device = Device.parse(job.device)
    sync = timing.cuda_sync(job.device) or (lambda: None)
    want = indices_for(job.workload, n, 0)
    t0 = time.perf_counter()
    first = read_frames(job.clip, want, job.backend, job.device)
    sync()
    t1 = time.perf_counter()
    check = exactness.check_frames(job.clip, want, first, job.backend)  # stamps, or a reference decode
    t2 = time.perf_counter()
    del first
    # The first call decoded the whole clip for a sequential job: that is its warm-up. Sparse jobs warm up
    # on other frames (decoder caches, file cache), then measure.
    for w in range(0 if job.workload == "sequential" else job.warmup):
        read_frames(clips[(w + 1) % len(clips)], indices_for(job.workload, n, w + 1), job.backend, job.device)
    sync()
    t3 = time.perf_counter()
    min_calls = 2 if job.workload == "sequential" else 3

    per_thread: list[list[tuple[float, int]]] = [[] for _ in range(job.threads)]
    deadline = [0.0]

    def worker(t: int):
        call = 1000 * (t + 1)
        while time.perf_counter() < deadline[0] or len(per_thread[t]) < min_calls:
            idx = indices_for(job.workload, n, call)
            start = time.perf_counter()
            read_frames(clips[call % len(clips)], idx, job.backend, job.device)
            sync()
            per_thread[t].append((time.perf_counter() - start, len(idx)))
            call += 1

    with UtilizationMonitor(gpu=device.ordinal if device.is_cuda else None) as sampler:
        begin = time.perf_counter()
        deadline[0] = begin + job.min_time
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(job.threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - begin
    calls = [c for ts in per_thread for c in ts]
    secs = [s for s, _ in calls]
    frames = sum(k for _, k in calls)
    med = statistics.median(secs)
    return {
        "exact": check.exact,
        "check": check.method,
        "check_detail": check.detail,
        "agree_db": check.lowest_db,  # luma PSNR against the reference decode (reference checks; None: identical)
        "calls": len(calls),
        "frames": frames,
        "fps": frames / wall,  # aggregate over all threads, wall clock
        "call_median_s": med,
        "call_spread_pct": 100 * (max(secs) - min(secs)) / med,
        "rate_spread_pct": verdicts.spread_pct([k / s for s, k in calls]),  # per-call rates, middle half
        "frames_per_call": frames / len(calls),
        # where the job's time went, in seconds (the measured part is `wall`)
        "phases_s": {"first_call": t1 - t0, "frame_check": t2 - t1, "warmup": t3 - t2, "measured": wall},
        **sampler.summary(),
    }


def _serve_one(request: dict) -> dict:
    """A serving child's answer to a job (`_child`) or to notebook 20's {'anchor': [library, path, repeats, first]}."""
    if "anchor" in request:
        return anchor._child(*request["anchor"])
    return _child(Job(**request))


def _warm(job: dict) -> dict:
    """A child's warm-up before its first job: frame 0 of the job's clip read by its backend (CUDA context made)
    and by the reference library; for {'anchor': [library, path]}, `anchor._warm`."""
    import torch

    if "anchor" in job:
        return anchor._warm(*job["anchor"])
    job = Job(**job)
    t = time.perf_counter()
    frames = read_frames(job.clip, [0], job.backend, job.device)
    if Device.parse(job.device).is_cuda:
        torch.cuda.synchronize(job.device)
    ref = exactness.reference_backend(job.clip, job.backend)
    if ref is not None:
        read_frames(job.clip, [0], ref, "cpu")
    return {"shape": list(frames.shape), "reference": ref, "seconds": time.perf_counter() - t}


def machine() -> dict:
    """Where a table was measured: `env.machine_facts` and the decoder libraries' installed versions
    ('libraries', from their metadata, without importing them)."""
    return {**env.machine_facts(env.report(probe_libraries=False)), "libraries": env.library_versions()}


COLUMNS = (
    "backend device workload clip threads status exact check agree_db fps rate_spread_pct call_median_s "
    "call_spread_pct frames_per_call calls cpu_pct rss_mb nvdec_pct sm_pct gpu_mem_mb error"
).split()


def write_table(rows: list[dict], env_stamp: dict, output) -> tuple[Path, Path]:
    """Write rows as bench.csv, `env_stamp` (`machine()`) as bench_stamp.json and both as bench.json: (CSV, JSON)."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    js = output / "bench.json"
    js.write_text(json.dumps({"stamp": env_stamp, "rows": rows}, indent=1))
    (output / "bench_stamp.json").write_text(json.dumps(env_stamp, indent=1))
    cs = output / "bench.csv"
    with cs.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows)
    return cs, js


PROGRESS_FILE = "PLAYBOOK_PROGRESS"  # set by the notebook runner: where its kernel's progress bars go


def progress_bar(total: int, desc: str, enabled: bool = True):
    """A tqdm bar, one step per job: in the cell under Jupyter, in the file PROGRESS_FILE names under the runner,
    else on stderr; a silent stand-in without tqdm or when not `enabled`. Notebooks 20 and 21."""
    try:
        from tqdm import tqdm
    except ImportError:
        enabled = False
    if not enabled:
        return SimpleNamespace(update=lambda n=1: None, set_postfix_str=lambda s="": None, close=lambda: None)

    path = os.environ.get(PROGRESS_FILE)
    where = open(path, "a", buffering=1) if path else sys.stderr  # noqa: SIM115 (tqdm writes until it is closed)
    bar = tqdm(total=total, desc=desc, file=where, mininterval=5.0, maxinterval=30.0, unit="job")
    if path:
        close = bar.close
        bar.close = lambda: (close(), where.close())
    return bar


_kept: dict = {}  # {backend: its child, still running}: left by `run_all(keep=True)` for the next call
_SERVE = child.python("-m", "playbook_utils.bench", "--serve")  # a child serving one backend's jobs (`main`)


def kept() -> dict:
    """{backend: its child, still running}: left by `start_children` or `run_all(keep=True)` for the next call."""
    return _kept


def start_children(jobs: list[Job], timeout: float = 600) -> float:
    """Start `run_all(jobs)`'s children (`kept`) side by side, one per backend, warmed; returns the seconds taken."""
    began = time.perf_counter()
    groups, _ = _by_backend(jobs)
    _serve(jobs, groups, {b: [] for b in groups if b not in _kept}, timeout)
    return time.perf_counter() - began


def _serve(jobs: list[Job], groups: dict, requests: dict, timeout: float, **options) -> dict:
    """`child.serve_all(requests)` in the `kept` children of `groups` (`_by_backend`), each warmed on its first job."""
    warm = {b: {"warm": dataclasses.asdict(jobs[ks[0]])} for b, ks in groups.items()}
    return child.serve_all(_SERVE, requests, warm=warm, timeout=timeout, env=child_env(), kept=_kept, **options)


def _by_backend(jobs: list[Job]) -> tuple[dict, dict]:
    """({backend: indices of the jobs it can run}, {index: why its backend refuses that job}), after import checks."""
    check_libraries(sorted({job.backend for job in jobs}))
    groups: dict = {}
    refused: dict = {}
    for k, job in enumerate(jobs):
        why = why_unavailable(job.backend, job.device, job.clip)
        if why:
            refused[k] = why
        else:
            groups.setdefault(job.backend, []).append(k)
    return groups, refused


def run_all(jobs: list[Job], progress: bool = True, timeout: float = 600, keep: bool = False) -> list[dict]:
    """One row per job, in order (failures are rows too), the jobs run in one warmed child per backend
    (`child.serve_all`), one at a time; `keep`: the children stay for the next call. Notebook 20."""

    def head(job):
        return {**dataclasses.asdict(job), "clip": Path(job.clip).name}

    rows: list = [None] * len(jobs)
    groups, refused = _by_backend(jobs)
    for k, why in refused.items():
        rows[k] = {**head(jobs[k]), "status": "unavailable", "error": why}
    bar = progress_bar(len(jobs), "bench", progress)
    bar.update(len(refused))

    def on_answer(request, answer):
        bar.set_postfix_str(request["backend"])
        bar.update(1)

    requests = {b: [dataclasses.asdict(jobs[k]) for k in ks] for b, ks in groups.items()}
    answers = _serve(jobs, groups, requests, timeout, on_answer=on_answer)
    if not keep:
        child.close_kept(_kept)
    for b, ks in groups.items():
        for k, answer in zip(ks, answers[b]):
            rows[k] = {**head(jobs[k]), "read_forward": reads_forward(b, jobs[k].device, jobs[k].clip), **answer}
    bar.close()
    return rows


def main() -> int:
    """`python -m playbook_utils.bench --serve`: a child of `run_all` or `anchor.library_rates`, serving one
    backend's requests (JSON lines on stdin, answered in order)."""
    if sys.argv[1:] != ["--serve"]:
        raise SystemExit("usage: python -m playbook_utils.bench --serve  (a child of harness.run_all)")
    child.serve_requests(_serve_one, warm=_warm)
    return 0
