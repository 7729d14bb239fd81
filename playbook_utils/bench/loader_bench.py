"""Measuring whole training loaders (notebook 21): against a simulated training step, flat out, each GPU-side
loader in its own process, the CPU worker sweep, and against the NVDEC ceiling. The loaders live in `loaders`.

    python -m playbook_utils.bench.loader_bench SPEC_JSON   (the child of `measure_isolated`)
    python -m playbook_utils.bench.loader_bench --serve     (a child of `warm_children`: specs on stdin)"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from functools import partial
from itertools import accumulate
from pathlib import Path

from playbook_utils import child, env, handover, loaders
from playbook_utils.bench import media, nvdec, verdicts, words
from playbook_utils.bench.monitor import UtilizationMonitor
from playbook_utils.bench.verdicts import block_rates, spread_pct
from playbook_utils.decoders import available, by_role, child_env, frame_size, read_frames, video_info, why_unavailable
from playbook_utils.device import Device
from playbook_utils.errors import BackendUnavailable, DecodeError
from playbook_utils.loaders import GpuLoader, GpuProcessLoader, dali_loader


def accepted(paths, backend: str, device: str = "cpu") -> tuple[list, dict]:
    """(paths `backend` takes on `device`, {path: why} for those refused or in `FAILED_READING`). Notebook 21."""
    why = {
        str(p): why_unavailable(backend, device, p)
        or FAILED_READING.get((backend, device, COPIED_FROM.get(str(p), str(p))))
        for p in dict.fromkeys(paths)
    }
    return [p for p in paths if not why[str(p)]], {p: w for p, w in why.items() if w}


FAILED_READING: dict[tuple[str, str, str], str] = {}  # (backend, device, reader's file) -> why a sweep skipped it


def sweep_workers(
    paths,
    backends,
    workers,
    k: int,
    batch: int,
    step_s: float,
    steps: int,
    max_s: float,
    size=None,
    timeout_s: float = 120,
    device: str = "cpu",
    log=print,
    budget_s: float | None = None,
    prefetch: int | None = None,
    first_of: int | None = None,
    curve: bool = True,
) -> tuple[list, list, list]:
    """Every backend x worker count as a `loaders.make_loader` of K sampled frames against a simulated step
    (`measure_loader`), most workers first; `budget_s` caps the sweep (each backend's first always runs, or the first
    `first_of`), `curve` runs the leader's other counts. Returns (rows, stuck, unmeasured). Notebook 21."""
    if budget_s is not None:
        max_s = min(max_s, budget_s / max(1, len(set(workers)) * len(backends)))
    rows, stuck, unmeasured, start = [], [], [], time.perf_counter()
    files, told = {}, set()
    for b in backends:
        mine, refused = accepted(paths, b)
        if refused:
            log(f"{b}: leaves out the {len(refused)} file(s) it refuses ({next(iter(refused.values()))})")
        if len(mine) < batch:
            log(f"{b}: not measured: it takes fewer than {batch} of the files")
        else:
            files[b] = (mine, refused)
    most, fewer = max(workers), sorted(set(workers) - {max(workers)}, reverse=True)

    def order():  # each backend's first, with the most workers; then the fastest's curve; then the rest
        yield from ((b, most, False) for b in backends)
        firsts = [r for r in rows if r["workers"] == most]
        lead = max(firsts, key=lambda r: r["samples_per_s"])["backend"] if curve and firsts and fewer else None
        if lead:
            counts = " and ".join(map(str, fewer))
            log(f"{lead} delivered the most with {most} workers: it runs with {counts} too, for the figure below")
            yield from ((lead, w, True) for w in fewer)
        yield from ((b, w, False) for w in fewer for b in backends if b != lead)

    for b, w, always in order():
        if b not in files:
            continue
        first = not any(x["backend"] == b for x in rows + stuck)
        first = always or (first and (first_of is None or list(files).index(b) < first_of))
        if budget_s is not None and time.perf_counter() - start > budget_s and not first:
            unmeasured.append({"backend": b, "workers": w})
            continue
        mine, refused = files[b]
        began = time.perf_counter()
        dl = loaders.make_loader(
            mine,
            backend=b,
            batch_size=batch,
            num_workers=w,
            k=k,
            size=size,
            timeout_s=timeout_s,
            prefetch_factor=prefetch,
            on_error="skip",  # a file that fails mid-read is skipped and named, as a training loader goes on
        )
        try:
            r = measure_loader(dl, step_s, steps, device=device, max_seconds=max_s)
        except RuntimeError as e:  # DataLoader's timeout (a worker that stopped delivering), or a worker that died
            stuck.append({"backend": b, "workers": w, "error": str(e)[:200]})
            log(f"{b:11s} workers={w:2d}: {'STUCK' if 'timed out' in str(e) else 'FAILED'}, {str(e)[:120]}")
            continue
        finally:
            closing = time.perf_counter()
            loaders.close_loader(dl, now=True)  # its workers end now, their batches in hand dropped: it is measured
            closing = time.perf_counter() - closing
        threads = loaders.share_of_cores(w) if w and b != "decord" else 0  # make_loader's default
        took = time.perf_counter() - began  # the workers' start, the prefetched batches, the steps, the stop
        # by the reader's file, not its epoch copy: for the run's summary, and for `accepted` to leave every copy out
        skipped = {COPIED_FROM.get(p, p): cause for p, cause in r.get("files_skipped", {}).items()}
        rows.append(
            {
                "backend": b,
                "workers": w,
                "decoder_threads": threads,
                "files_left_out": len(refused),
                "config_s": took,
                "close_s": closing,
                **r,
                "files_skipped": skipped,
            }
        )
        for path, cause in skipped.items():
            FAILED_READING[(b, "cpu", path)] = f"it failed as it was read: {cause}"
            if (b, path) not in told:  # once per library and file: not at every worker count, nor for each copy
                told.add((b, path))
                log(f"{b}: skipped {path}, which failed as it was read: {cause[:240]}")
        cut = f", {r['steps']} steps to the {max_s:.3g} s cap" if r["stopped_by_time"] else ""
        cut += f"; {_secs(took)} in all, {_secs(closing)} to stop" + ("" if r["steady"] else f"; unsteady: {r['why']}")
        log(
            f"{b:11s} workers={w:2d}, threads per decoder {threads or 'all':>3}: {r['samples_per_s']:7.1f} videos/s, "
            f"waits {100 * r['wait_fraction']:5.1f}% of the time ({1e3 * r['wait_s_per_step']:.1f} ms per "
            f"{1e3 * step_s:.0f} ms step{cut})"
        )
    if unmeasured:
        left = ", ".join(f"{u['backend']} x{u['workers']}" for u in unmeasured)
        log(f"not measured, the {budget_s:.0f} s budget spent: {left}")
    rows.sort(key=lambda r: (backends.index(r["backend"]), r["workers"]))
    return rows, stuck, unmeasured


def notebook20_table(out, video_dir) -> tuple[dict, list] | None:
    """(notebook 20's results, its table's rows) in `out` where 20 measured `video_dir` there, else None."""
    out = Path(out)
    try:
        n20 = json.loads((out / "20_decode_benchmarks.json").read_text())
        rows = json.loads((out / "20_bench" / "bench.json").read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return None
    return (n20, rows) if n20.get("video_dir") == video_dir else None


def clip_ceiling(path, out, video_dir, gpu: int, layouts, seconds: float, more=()) -> dict:
    """The NVDEC ceiling of the clip at `path` for notebook 21: notebook 20's in `out` where it saturated this GPU
    model on the same files and media version ('measured_by' names it), else `nvdec.ceiling` measured now."""
    found = notebook20_table(out, video_dir)
    n20 = found[0] if found else {}
    env20, c = n20.get("environment") or {}, (n20.get("nvdec_ceiling") or {}).get(Path(path).name)
    names = [d.get("name") for d in (env20.get("gpu") or {}).get("devices", [])]
    here = [d.get("name") for d in env.gpus().get("devices", [])]
    if c and c.get("saturated") and names == here and env20.get("media_version") == media.MEDIA_VERSION:
        return {**c, "measured_by": f"notebook 20 ({env20.get('date_utc')})"}
    return nvdec.ceiling(path, layouts, seconds, gpu, if_unsaturated=more)


def realistic_clips(clip_info: dict) -> dict:
    """The realistic clips of notebook 20's `clips` record where there are any, else all. Notebooks 21 and 22."""
    return {n: i for n, i in clip_info.items() if not i.get("light")} or clip_info


def ranked_by_table(backends, out, video_dir) -> tuple[list, str | None]:
    """(`backends` fastest first by notebook 20's table of `video_dir`, its line) or (`reference_order`, None)."""
    found = notebook20_table(out, video_dir)
    if found is None:
        return reference_order(backends), None
    kept = realistic_clips(found[0].get("clips", {}))  # as 22's tree: its light synthetic clips left out
    rows = [r for r in found[1] if not kept or r.get("clip") in kept]
    some = len(kept) < len(found[0].get("clips", {}))
    ordered, said = ranked_by_rows(backends, rows, "notebook 20's table" + (" (its realistic clips)" if some else ""))
    if said is None and some:  # the realistic clips' rows rate none of them: the whole table, said so
        return ranked_by_rows(backends, found[1], "notebook 20's table (its light clips too: the realistic rated none)")
    return ordered, said


def reference_order(backends) -> list:
    """`backends` in the order of `CPU_SWEPT`, any other library after them: the sweep's order without a table."""
    return sorted(backends, key=lambda b: CPU_SWEPT.index(b) if b in CPU_SWEPT else len(CPU_SWEPT))


def order_line(backends, said: str | None, missing: str) -> str:
    """The line naming the CPU sweep's order of `backends`: `said`, else the adapters' order and `missing` (why)."""
    if said:
        return "the CPU libraries in the order of " + said
    return f"the CPU libraries: {', '.join(backends)} ({missing}: in the adapters' order)"


def ranked_by_rows(backends, rows, source: str) -> tuple[list, str | None]:
    """(`backends` by their mean exact CPU rate of K = 16 sampled frames in `rows`, fastest first, unmeasured last,
    and a line naming `source`); (`reference_order`, None) where the rows rate none of them."""
    rates: dict = {}
    for r in rows:
        if (r.get("status"), r.get("device"), r.get("workload"), r.get("exact")) == ("ok", "cpu", "uniform16", True):
            rates.setdefault(r["backend"], []).append(r["fps"])
    mean = {b: sum(v) / len(v) for b, v in rates.items() if b in backends}
    if not mean:
        return reference_order(backends), None
    ordered = sorted(backends, key=lambda b: -mean.get(b, -1.0))
    clips = max(len(v) for v in rates.values())
    over = f" (each library's mean over the {clips} clips it read)" if clips > 1 else ""
    said = f"{source}, K = 16 sampled frames on the CPU, one caller{over}: " + ", ".join(
        f"{b} {mean[b]:,.0f} frames/s" if b in mean else f"{b} not measured there" for b in ordered
    )
    return ordered, said


# The short run of notebook 21's whole loaders that notebook 22 makes when 21 did not measure the reader's files
SHORT = {"step_s": 0.02, "steps_videos": 24, "max_s": 5, "budget_s": 30, "libraries": 2, "gpu_threads": 4, "videos": 8}
# the CPU libraries notebook 21's worker sweep takes, in the reference order used where no notebook 20 table ranks them
CPU_SWEPT = by_role("cpu_sweep")


def _short_batch() -> int:
    """Videos per batch of the short run: notebook 21's in smoke mode (1 on 8 cores or more, else 2)."""
    return 1 if len(os.sched_getaffinity(0)) >= 8 else 2


def _short_epoch(base, batch: int, workers: int, folder) -> tuple[int, list]:
    """(steps, paths) of the short run of a CPU loader of `workers` workers: its steps in whole worker rounds,
    the warm-up, prefetch and look-ahead (`measure_loader`) in distinct copies of `base`."""
    steps = SHORT["steps_videos"] // batch
    return steps, epoch_items(base, batch * (whole_rounds(steps, workers) + 2 + workers + 2), folder)


def _short_sampled(backend, files, k: int, device: str, folder, threads: int, batch: int) -> tuple[dict, int]:
    """`measure_until_steady` of a K-frame `GpuLoader` (`backend`: a library or a route) over copies of `files`."""
    spec = {"kind": "gpu", "backend": backend, "threads": threads, "device": device, "batch_size": batch,
            "strategy": "uniform", "k": k, "warmup_batches": 1, "on_error": "skip"}  # fmt: skip
    n = max(SHORT["videos"], steady_epoch(2 * threads, batch, batch_size=batch))
    return measure_until_steady(spec, lambda n: epoch_items(files, n, folder), n, 0.0)


def short_whole_loaders(base, k: int, device: str, folder, rows=(), log=print) -> dict:
    """Notebook 21's CPU worker sweep and (on a GPU) sampled-frames `GpuLoader`s of K frames, measured short
    (`SHORT`) on `base` for notebook 22. Returns {'k', 'sweep', 'stuck', 'unmeasured', 'gpu_sampled', 'short': True}."""
    cores = len(os.sched_getaffinity(0))
    batch, size = _short_batch(), one_size(base)
    backends = [b for b in available("cpu") if b in CPU_SWEPT]
    backends, said = ranked_by_rows(backends, rows, "the table above")
    log(order_line(backends, said, "no one-caller rate of them above"))
    steps, paths = _short_epoch(base, batch, cores, folder)
    loaders.start_worker_server()
    sweep, stuck, unmeasured = sweep_workers(
        paths, backends, [cores], k, batch, SHORT["step_s"], steps, SHORT["max_s"], size, 120, device, log=log,
        budget_s=SHORT["budget_s"], prefetch=1, first_of=SHORT["libraries"],
    )  # fmt: skip
    gpu = []
    for b in by_role("gpu_loader") if device.startswith("cuda") else ():
        takes = [p for p in base if why_unavailable(b, device, p) is None]
        if not takes:
            log(f"{b}: not measured: it takes none of the files ({why_unavailable(b, device, base[0])})")
            continue
        t = SHORT["gpu_threads"]
        r, n = _short_sampled(b, takes, k, device, folder, t, batch)
        name = f"{b} x{t} threads"
        if r["status"] != "ok" or not r["steady"]:
            why = f"failed: {r['error'][:140]}" if r["status"] != "ok" else f"no steady rate: {r['why']}"
            log(f"{name}, K={k}: {why}")
            continue
        gpu.append({"loader": name, "backend": b, "threads": t, "videos_per_s": r["frames_per_s"] / k, **r})
        log(f"{name}, K={k}: {r['frames_per_s'] / k:6.1f} videos/s ({r['frames_per_s']:,.0f} frames/s, {n} videos)")
    return {"k": k, "sweep": sweep, "stuck": stuck, "unmeasured": unmeasured, "gpu_sampled": gpu, "short": True}


def one_size(paths) -> tuple | None:
    """(H, W): the commonest picture size of `paths`, which short CPU loaders resize to; None where all sizes agree."""
    sizes = Counter(frame_size(video_info(p)) for p in paths)  # as displayed, as the loaders resize
    return sizes.most_common(1)[0][0] if len(sizes) > 1 else None


def short_route(route, base, k: int, device: str, folder, workers: int = 2, threads: int = 4) -> dict:
    """A route (`loaders.parse_route`) measured short as one loader of K sampled frames over `base`. Returns
    {'status', 'frames_per_s', 'spread_pct', 'read_by', 'why'}. Notebook 22."""
    entries = loaders.parse_route(list(route), device)
    route = [f"{b}@{d}" for b, d in entries]
    read_by: dict = {}
    for p in base:  # the entry that reads each file, as the route's dataset chooses it (`backend_for`)
        entry = next((f"{b}@{d}" for b, d in entries if why_unavailable(b, d, p) is None), "none")
        read_by[entry] = read_by.get(entry, 0) + 1
    if "none" in read_by:
        return {"status": "failed", "why": "no entry of the route takes some of the files", "read_by": read_by}
    batch = _short_batch()
    try:
        if route[0].endswith("@cpu"):
            steps, paths = _short_epoch(base, batch, workers, folder)
            dl = loaders.make_loader(
                paths,
                backend=route,
                batch_size=batch,
                num_workers=workers,
                k=k,
                size=one_size(base),
                prefetch_factor=1,
                on_error="skip",
            )
            try:
                r = measure_loader(dl, SHORT["step_s"], steps, device="cpu", max_seconds=SHORT["max_s"])
            finally:
                loaders.close_loader(dl, now=True)
            rate, spread = k * r["samples_per_s"], r.get("samples_per_s_spread_pct")
        else:
            r, _ = _short_sampled(route, base, k, device, folder, threads, batch)
            if r.get("status") != "ok" or not r.get("steady"):
                return {"status": "failed", "why": r.get("error") or r.get("why"), "read_by": read_by}
            rate, spread = r["frames_per_s"], r.get("frames_per_s_spread_pct")
    except (RuntimeError, ValueError, DecodeError, BackendUnavailable) as e:  # a loader that stopped delivering,
        # delivered nothing to measure, or met a file it cannot read
        lines = str(e).strip().splitlines() or [""]  # a worker's error: DataLoader's header, its traceback, its line
        why = lines[-1] if len(lines) > 1 else f"{type(e).__name__}: {lines[0]}"
        return {"status": "failed", "why": why[:200], "read_by": read_by}
    return {"status": "ok", "frames_per_s": rate, "spread_pct": spread, "read_by": read_by, "why": None}


def wait_curves(rows: list[dict], total: int) -> dict:
    """{backend's `sweep_label`: (worker counts, % of the time waiting)} of `sweep_workers` rows. Notebook 21."""
    return {
        sweep_label(next(r for r in rows if r["backend"] == b), total, workers=False): (
            [r["workers"] for r in rows if r["backend"] == b],
            [100 * r["wait_fraction"] for r in rows if r["backend"] == b],
        )
        for b in dict.fromkeys(r["backend"] for r in rows)
    }


def _secs(s: float) -> str:
    """A duration for a line: whole seconds from 10 s, tenths from 1 s, milliseconds below (0.4 s is not '0 s')."""
    return f"{s:.0f} s" if s >= 9.5 else f"{s:.1f} s" if s >= 0.95 else f"{1e3 * s:.0f} ms"


def sweep_label(row: dict, total: int, workers: bool = True) -> str:
    """A `sweep_workers` row's name: backend (and workers), and the share of `total` files read where it refused any."""
    name = f"{row['backend']} x{row['workers']} workers" if workers else row["backend"]
    if row.get("files_left_out"):
        name += f" ({total - row['files_left_out']} of {total} files)"
    return name


def gpu_specs(
    clip, device: str, threads, process_layouts, dali_skip: str | None = None
) -> tuple[list[dict], list[str]]:
    """The GPU-side loaders notebook 21 measures on `clip`: `GpuLoader`s per backend and thread count,
    `GpuProcessLoader`s per layout, and DALI's reader unless `dali_skip`. Returns (specs, notes on refusals)."""
    specs, notes = [], []
    for b in by_role("gpu_loader"):
        why = why_unavailable(b, device, clip)
        if why:
            notes.append(f"{b}: not measured: {why}")
            continue
        specs += [{"kind": "gpu", "backend": b, "threads": t, "loader": f"{b} x{t} threads"} for t in threads]
        specs += [
            {"kind": "gpu", "backend": b, "processes": p, "threads": t, "loader": f"{b} {p} processes x{t} threads"}
            for p, t in process_layouts
        ]
    if dali_skip:
        notes.append(f"dali experimental reader: {dali_skip}")
    elif why_unavailable("dali", device, clip) is None:
        dali = {"kind": "dali", "backend": "dali", "threads": None, "loader": "dali experimental reader"}
        specs.append({**dali, "device_id": Device.parse(device).index or 0})
    return specs, notes


def spec_lookahead(spec: dict) -> int:
    """The look-ahead, in videos, of the loader a `measure_isolated` spec builds; 0 for DALI's reader (sequences)."""
    if spec["kind"] == "dali":
        return 0
    if spec.get("processes", 1) > 1:
        return spec["processes"] * 2 * spec["threads"] + 2 * spec["processes"]
    return 2 * spec["threads"]


def measure_gpu_loaders(
    clip, codec: str, specs, items_for, ceiling: dict | None, common: dict, log=print
) -> list[dict]:
    """Measure each spec in its own warmed process (`measure_isolated`) over a steady-sized epoch of `items_for(n)`,
    judged against `ceiling` (`nvdec.against_ceiling`); a failure is logged. Returns the rows. Notebook 21."""
    frames_per_item = max(1, video_info(clip).num_frames)
    items_per_s = ceiling["fps"] / frames_per_item if ceiling and ceiling.get("fps") else None
    rows = []
    if specs:  # their children (and any left for later runs) start side by side, then measure one at a time
        warm_s = warm_children(specs, common["device"], clip)
        if len(specs) > 1:
            log(f"  {len(specs)} children, one per loader below, warmed side by side in {warm_s:.1f} s")
    for spec in specs:
        warm = common.get("warmup_batches", 0) * common.get("batch_size", 1)
        n = steady_epoch(spec_lookahead(spec), warm, common.get("min_window_s", 0.0), items_per_s)
        r = measure_isolated({**spec, "paths": items_for(n), **common})
        if r["status"] != "ok":
            log(f"  {spec['loader']}: failed: {r['error'][:140]}")
            continue
        row = {"clip": Path(clip).name, "codec": codec, "path": str(clip), **spec, **r}
        row.update(nvdec.against_ceiling(row["frames_per_s"], row.get("frames_per_s_spread_pct"), ceiling))
        log(words.gpu_loader_line(row))
        rows.append(row)
    return rows


WAIT_LOOKAHEADS = 10  # the data-wait run measures at least this many look-aheads of videos (full mode)


def wait_steps_for(row: dict, batch_size: int, smoke: bool) -> int:
    """Steps of the GPU data-wait run of `row`'s loader: 4 in smoke mode, else WAIT_LOOKAHEADS look-aheads (12+)."""
    return 4 if smoke else max(12, -(-WAIT_LOOKAHEADS * spec_lookahead(row) // batch_size))


def wait_epoch(row: dict, batch_size: int, steps: int) -> int:
    """Videos for `row`'s data-wait run of `steps` steps: their batches, 3 more (warm-up, spare), two look-aheads."""
    return batch_size * (steps + 3) + 2 * spec_lookahead(row)


def wait_against_rate(wait: dict, row: dict, frames_per_item: int) -> dict:
    """Whether a data wait (`measure_loader`'s answer) is a result: its steps may not draw faster than the
    loader's steady rate (`row`) beyond the spread, except by what its look-ahead explains. Returns {'drawn_fps',
    'steady_fps', 'result', 'why', 'quoted_wait_fraction', 'note'}."""
    drawn = wait["samples_per_s"] * frames_per_item
    steady, spread = row.get("frames_per_s"), row.get("frames_per_s_spread_pct") or 0.0
    out = {"drawn_fps": round(drawn), "steady_fps": round(steady) if steady else None, "why": None, "note": None}
    if not steady:
        return {**out, "result": False, "why": "no steady rate to check it by", "quoted_wait_fraction": None}
    measured, allowed = wait.get("wait_fraction"), steady * (1 + spread / 100)
    if measured is None:
        return {**out, "result": False, "why": "no wait was measured", "quoted_wait_fraction": None}
    at_steady = 1 - (1 - measured) * min(1.0, steady / drawn) if drawn > 0 else measured
    if drawn <= allowed:
        if drawn > steady:
            out["note"] = (
                f"measured {100 * measured:.1f}%, its steps having drawn {drawn:,.0f} frames/s, within the spread of "
                f"the loader's steady {steady:,.0f} ({spread:.1f}%): given at the steady rate"
            )
        return {**out, "result": True, "quoted_wait_fraction": at_steady}
    drawn_n, ahead = wait.get("samples") or 0, spec_lookahead(row) if row.get("kind") else 0
    above = (
        f"its steps drew {drawn:,.0f} frames/s, {100 * (drawn / steady - 1):.0f}% above the loader's own steady "
        f"{steady:,.0f} (spread {spread:.1f}%)"
    )
    if ahead and drawn_n and ahead * WAIT_LOOKAHEADS <= drawn_n and drawn <= allowed * drawn_n / (drawn_n - ahead):
        out["note"] = (
            f"{above}, which the {ahead} videos in flight when its clock started ({100 * ahead / drawn_n:.0f}% of the "
            f"{drawn_n:,} drawn) explain: at the steady rate it would wait {100 * at_steady:.1f}% of the time, "
            f"the figure given"
        )
        return {**out, "result": True, "quoted_wait_fraction": at_steady}
    why = f"{above}: they drew on videos decoded before the clock started"
    return {**out, "result": False, "quoted_wait_fraction": None, "why": why}


def trusted(row: dict) -> bool:
    """A GPU loader row whose rate is a result: measured in steady state and not above a saturated ceiling."""
    return bool(row.get("steady")) and row.get("frames_per_s") is not None and row.get("verdict") != "above"


def bars_of(rows: list[dict], ceilings: dict) -> dict:
    """`plots.grouped_bars` arguments of GPU-side loader rows: each clip's ceilings, rows not `trusted` marked."""
    names = list(dict.fromkeys(r["clip"] for r in rows))
    loaders_ = list(dict.fromkeys(r["loader"] for r in rows))
    cell = {(r["clip"], r["loader"]): r for r in reversed(rows)}  # the first row of each, as the table lists them

    def ceiling_of(name, saturated):
        c = ceilings.get(name) or {}
        return c.get("fps") if bool(c.get("saturated")) == saturated else None

    return {
        "values": {lo: [cell.get((n, lo), {}).get("frames_per_s") for n in names] for lo in loaders_},
        "categories": names,
        "per_category": {
            "NVDEC ceiling of the clip (saturated)": [ceiling_of(n, True) for n in names],
            "NVDEC ceiling, a lower bound (the engines may give more)": [ceiling_of(n, False) for n in names],
        },
        "not_results": {lo: [(n, lo) in cell and not trusted(cell[(n, lo)]) for n in names] for lo in loaders_},
    }


def sweep_starts(rows: list[dict]) -> list[dict]:
    """Where `more_threads` starts: each backend's fastest `trusted` one-process `GpuLoader` tied with the fastest."""
    per: dict[str, dict] = {}
    for r in (x for x in rows if _one_process(x) and trusted(x)):
        if r["backend"] not in per or r["frames_per_s"] > per[r["backend"]]["frames_per_s"]:
            per[r["backend"]] = r
    ranked = sorted(per.values(), key=lambda r: -r["frames_per_s"])
    return [r for r in ranked if _tied_with(ranked[0], r)]


def _one_process(row: dict) -> bool:
    """Whether a GPU loader row is a one-process `GpuLoader`."""
    return row.get("kind") == "gpu" and not row.get("processes")


def _tied_with(best: dict, r: dict) -> bool:
    """Whether GPU loader row `r` is `best` or tied with it by `verdicts.rank` (frames/s and spreads)."""
    pair = [(k, x["frames_per_s"], x.get("frames_per_s_spread_pct") or 0) for k, x in (("a", best), ("b", r))]
    return r is best or verdicts.rank(pair).tied


def wait_loader(rows: list[dict]) -> tuple[dict | None, str]:
    """(row, why): the loader the GPU data wait runs, of the first clip's `trusted` rows: the same library's
    one-process loader tied with the fastest with the smallest look-ahead; (None, '') without any. Notebook 21."""
    results = [r for r in rows if trusted(r)]
    if not results:
        return None, ""
    first = [r for r in results if r["clip"] == results[0]["clip"]]
    best = max(first, key=lambda r: r["frames_per_s"])
    # the same library's one-process GpuLoader at another thread count: DALI's reader (a look-ahead of 0 by
    # convention, rates in sequences) and the multi-process loader measure something else
    same = _one_process(best)
    first = [r for r in first if r is best or (same and _one_process(r) and r["backend"] == best["backend"])]
    pick = min((r for r in first if _tied_with(best, r)), key=lambda r: (spec_lookahead(r), -r["frames_per_s"]))
    if pick is best:
        return best, ""
    return pick, (
        f"tied with the fastest, {best['loader']}, at {pick['frames_per_s']:,.0f} vs {best['frames_per_s']:,.0f} "
        f"frames/s, and {spec_lookahead(pick)} videos ahead, not {spec_lookahead(best)}"
    )


def more_threads(
    row: dict, items_for, ceiling, common: dict, steps, log=print, to_the_end: bool = False
) -> tuple[list[dict], str]:
    """Measure `row`'s `GpuLoader` again at each larger thread count of `steps` until the rate stops rising beyond
    the spread (every step with `to_the_end`). Returns (new rows, `words.sweep_sentence`'s sentence). Notebook 21."""
    best, rows, stopped = row, [], None
    for t in [t for t in steps if t > row["threads"]]:
        spec = {"kind": "gpu", "backend": row["backend"], "threads": t, "loader": f"{row['backend']} x{t} threads"}
        new = measure_gpu_loaders(row["path"], row["codec"], [spec], items_for, ceiling, common, log)
        if not new:
            return rows, words.sweep_sentence("failed", best, rows, tried=spec["loader"])
        rows += new
        if not trusted(new[0]):
            return rows, words.sweep_sentence("no rate", best, rows, tried=spec["loader"])
        gain = 100 * (new[0]["frames_per_s"] / best["frames_per_s"] - 1)
        spread = max(best.get("frames_per_s_spread_pct") or 0, new[0].get("frames_per_s_spread_pct") or 0)
        if gain > spread:
            best = new[0]
            continue
        stopped = stopped or (t, gain, spread)
        if not to_the_end:
            break
    return rows, words.sweep_sentence("done", best, rows, stopped=stopped)


def best_gpu_loaders(rows: list[dict], ceilings: dict) -> dict:
    """{clip: its best `trusted` GPU-side loader, margin, share of `ceilings[clip]`, limit, bitrate}. Notebook 21."""
    best = {}
    for name in dict.fromkeys(r["clip"] for r in rows):
        rs = [r for r in rows if r["clip"] == name and trusted(r)]
        if not rs:
            continue
        b = max(rs, key=lambda r: r["frames_per_s"])
        v = verdicts.rank((r["loader"], r["frames_per_s"], r.get("frames_per_s_spread_pct")) for r in rs)
        label, why = words.limit_of(b)
        c = ceilings.get(name) or {}
        best[name] = {
            "loader": b["loader"],
            "backend": b["backend"],
            "fps": round(b["frames_per_s"]),
            "spread_pct": verdicts.rounded(b.get("frames_per_s_spread_pct")),
            "pct_of_ceiling": round(b["pct_of_ceiling"], 1) if b.get("pct_of_ceiling") else None,
            "share": b.get("words"),
            "ceiling_fps": round(c["fps"]) if c.get("fps") else None,
            "ceiling_saturated": c.get("saturated"),
            "lookahead_items": b.get("lookahead_items"),
            "limit": label,
            "why": why,
            "margin": v.sentence(),
            "rows_not_results": sum(1 for r in rows if r["clip"] == name and not trusted(r)),
            "clip_mbps": _mbps(b.get("path")),
            **{k: (b.get("utilization") or {}).get(k) for k in ("nvdec_pct", "sm_pct")},
        }
    return best


def _mbps(path) -> float | None:
    """The bitrate of the file at `path` in Mbit/s (2 decimals), None when unknown."""
    try:
        rate = media.probe(path).bit_rate if path else None
    except DecodeError:  # the loader row stands without it
        return None
    return round(rate / 1e6, 2) if rate else None


def epoch_items(paths, n: int, folder) -> list[Path]:
    """`n` distinct files for an epoch: the first `n` of `paths`, else `distinct_copies` spread evenly over them."""
    paths = [Path(p) for p in paths]
    if len(paths) >= n:
        return paths[:n]
    per = -(-n // len(paths))
    copies = [distinct_copies(p, per, folder) for p in paths]
    return [copies[i % len(paths)][i // len(paths)] for i in range(n)]


def distinct_copies(clip, n: int, folder) -> list[Path]:
    """Paths of `n` names of `clip` in `folder` (kept), so no per-file cache flatters: hard links, else symbolic links
    (`--output` on another file system than the videos), else copies where they take at most half the free space;
    OSError naming the file where they would take more."""
    clip, folder = Path(clip), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = clip.resolve()  # a link to a symlink would be the symlink, dangling where its target is relative
    tag = hashlib.sha1(str(target).encode()).hexdigest()[:8]  # two folders' clip.mp4: copies of each, apart
    out = []
    for i in range(n):
        copy = folder / f"{clip.stem}_{tag}_{i:04d}{clip.suffix}"
        kept = copy.exists() and (
            copy.samefile(target) or not copy.is_symlink() and copy.stat().st_size == target.stat().st_size
        )
        if not kept:
            copy.unlink(missing_ok=True)
            try:
                os.link(target, copy)
            except OSError:  # another file system, or one without hard links
                try:
                    copy.symlink_to(target)
                except OSError:  # nor symbolic ones
                    need, free = (n - i) * target.stat().st_size, shutil.disk_usage(folder).free
                    if need > free / 2:
                        raise OSError(
                            f"{clip}: {n - i} copies of it for an epoch would take {need / 1e9:.1f} GB of the "
                            f"{free / 1e9:.1f} GB free in {folder}, which takes no links: give OUTPUT_DIR (--output) a file system with room"
                        ) from None
                    shutil.copyfile(target, copy)
        COPIED_FROM[str(copy)] = str(clip)
        out.append(copy)
    return out


COPIED_FROM: dict[str, str] = {}  # the file each `distinct_copies` copy is of, to name the reader's file


def lookahead_of(loader) -> int:
    """How many items ahead of the consumer `loader` works (a `GpuLoader`'s `lookahead`, a DataLoader's prefetch)."""
    items = getattr(loader, "lookahead", None)
    if items is not None:
        return int(items)
    workers = getattr(loader, "num_workers", None)
    if workers is not None:  # a torch DataLoader: batches
        return workers * (getattr(loader, "prefetch_factor", None) or 2) * (loader.batch_size or 1)
    return 0


# The steady window spans at least this many look-aheads of items. Where every video in flight shares one engine
# (NVDEC), they finish in waves of one look-ahead or so; a window that cuts a wave at each end reads low, by up to
# 4% over 2 look-aheads and 1.2% over 4 with perfectly synchronised waves (tests/unit/test_steady_rate.py).
STEADY_LOOKAHEADS = 4


def steady_rate(
    deliveries, warmup_items: int, lookahead_items: int, min_window_s: float = 0.0, tail_items: int | None = None
) -> dict:
    """The steady rate of a loader's `deliveries` [(time, items, frames), ...]: the least-squares slope over a
    window past the warm-up and look-ahead, before the drain. Returns {'frames_per_s', 'frames_per_s_spread_pct',
    'frames', 'items', 'seconds', 'window_start', 'steady', 'why'}. Notebook 21."""
    total = sum(d[1] for d in deliveries)
    lo, hi = warmup_items + lookahead_items, total - (lookahead_items if tail_items is None else tail_items)
    done, first, last = 0, None, None
    for k, (_, items, _) in enumerate(deliveries):
        done += items
        if first is None and done >= lo:
            first = k
        if done <= hi:
            last = k
    batch = deliveries[0][1] if deliveries else 1
    need = f"an epoch of at least {steady_epoch(lookahead_items, warmup_items, batch_size=batch)} items"
    if first is None or last is None or last - first < 2:
        why = f"{total} items leave no steady window with a look-ahead of {lookahead_items}: {need}"
        return {
            "frames_per_s": None,
            "frames_per_s_spread_pct": None,
            "frames": 0,
            "items": 0,
            "seconds": 0.0,
            "window_start": None,
            "steady": False,
            "why": why,
        }
    win = deliveries[first : last + 1]
    ts = [d[0] for d in win]
    cum = list(accumulate(d[2] for d in win))
    mt, mf = sum(ts) / len(ts), sum(cum) / len(cum)
    var = sum((t - mt) ** 2 for t in ts)
    slope = sum((t - mt) * (f - mf) for t, f in zip(ts, cum)) / var if var > 0 else None
    seconds = ts[-1] - ts[0]
    items = sum(d[1] for d in win[1:])
    gaps = [(d[2], d[0] - p[0]) for p, d in zip(win, win[1:])]
    why = None
    if items < STEADY_LOOKAHEADS * lookahead_items:
        why = f"the window holds {items} items, fewer than {STEADY_LOOKAHEADS} look-aheads ({need})"
    elif seconds < min_window_s:
        why = f"the window lasted {seconds:.1f} s, less than {min_window_s:g} s"
    return {
        "frames_per_s": slope,
        "frames_per_s_spread_pct": spread_pct(block_rates(*zip(*gaps))) if gaps else None,
        "frames": sum(d[2] for d in win[1:]),
        "items": items,
        "seconds": seconds,
        "window_start": ts[0],
        "steady": why is None,
        "why": why,
    }


# a step whose batch took over this share of a step (at least 1 ms) found the look-ahead empty: a ready batch can
# still take a few ms to hand over, its thread waiting for the GIL among 64 decoding threads
DRAINED_WAIT = 0.1


def found_empty(wait_s: float, step_s: float) -> bool:
    """Whether a step that waited `wait_s` for its batch after a step of `step_s` found the look-ahead empty."""
    return wait_s > max(1e-3, DRAINED_WAIT * step_s)


def measure_loader(
    loader,
    step_s: float,
    steps: int,
    device: str = "cpu",
    warmup: int = 2,
    max_seconds: float | None = None,
    min_steps: int = 3,
    clock=time.perf_counter,
    sleep=time.sleep,
    drain: bool = True,
) -> dict:
    """Run `steps` simulated training steps of `step_s` fed by `loader` and measure the data wait, after the
    warm-up and prefetched batches (and, with `drain`, the look-ahead drained); steps count in whole worker rounds,
    capped by `max_seconds`. Returns {'wait_fraction', 'samples_per_s', 'steady', 'why', ...}. Notebook 21."""
    batch = getattr(loader, "batch_size", None) or 1
    ahead = -(-lookahead_of(loader) // batch)
    skip = warmup + ahead
    drained_by = skip + ahead if drain and getattr(loader, "lookahead", None) is not None else skip
    # a DataLoader's workers deliver in turn, one batch each, in bursts of up to one per worker: a window of part
    # of a round times a burst, not a rate, so steps are counted in whole rounds
    burst = max(1, getattr(loader, "num_workers", 0) or 1)
    steps, min_steps = whole_rounds(steps, burst), whole_rounds(min_steps, burst)
    began = clock()
    it = iter(loader)
    waits, start, rates, s, capped, first = [], None, [], 0, False, None
    skipped: dict = {}  # {file: cause} of the items skipped (on_error='skip')
    while len(waits) < steps:
        if max_seconds is not None and start is not None and len(waits) >= min_steps and len(waits) % burst == 0:
            if clock() - start > max_seconds:
                capped = True
                break
        t0 = clock()
        try:
            got = next(it)
        except StopIteration:
            break
        waited = found_empty(clock() - t0, step_s)
        if isinstance(got, tuple):  # on_error='skip': (the good videos or None, the `Skipped` ones)
            got, failed = got
            skipped.update((f.path, f.cause) for f in failed)
        got = got.to(device, non_blocking=True) if got is not None else got
        if got is not None and Device.parse(device).is_cuda:
            import torch

            torch.cuda.synchronize(device)
        t1 = clock()
        first = t1 if first is None else first
        if start is None and s >= skip and (waited or s >= drained_by):
            start = t0
        sleep(step_s)
        if start is not None:
            waits.append(t1 - t0)
            rates.append((0 if got is None else got.shape[0], clock() - t0))
        s += 1
    if not waits:
        raise RuntimeError(
            f"measure_loader: the epoch ended after {s} batches, before the {skip} of warm-up and prefetch "
            f"(and, where the loader decodes ahead, its look-ahead drained: up to {drained_by})"
        )
    total = clock() - start
    wait, samples = sum(waits), sum(n for n, _ in rates)
    why = None if len(waits) >= min_steps else f"the epoch ended after {len(waits)} measured steps"
    # its spread is taken over blocks of at least a round of steps, and not at all from fewer than two such blocks
    blocks = min(4, len(rates) // burst)
    return {
        "wait_fraction": wait / total,
        "wait_s_per_step": wait / len(waits),
        "step_s": step_s,
        "samples_per_s": samples / total,
        "samples": samples,
        "samples_per_s_spread_pct": spread_pct(block_rates(*zip(*rates), blocks=blocks)) if blocks >= 2 else None,
        "steps": len(waits),
        "stopped_by_time": capped,
        "lookahead_batches": ahead,
        "skipped_batches": s - len(waits),
        "files_skipped": skipped,
        "steady": why is None,
        "why": why,
        # where the run's time went: the workers' start and the first batch, the warm-up and prefetched batches
        "first_batch_s": first - began,
        "prefetched_s": start - first,
    }


def whole_rounds(steps: int, workers: int) -> int:
    """`steps` rounded up to whole rounds of `workers`, as `measure_loader` counts them. Notebook 21."""
    w = max(1, workers)
    return -(-max(1, steps) // w) * w


def dali_sequences(paths, sequence_length: int) -> int:
    """The sequences `loaders.dali_loader` makes of `paths`: each file's frames // `sequence_length`."""
    return sum(video_info(p).num_frames // sequence_length for p in paths)


def _epoch_length(loader) -> int | None:
    """How many items `loader` holds in an epoch where it says (its dataset, paths or sequences), else None."""
    for attr in ("ds", "paths", "sequences"):
        held = getattr(loader, attr, None)
        if held is not None:
            try:
                return len(held)
            except TypeError:
                continue
    return None


def measure_flat_out(
    batches, warmup_batches: int = 0, min_window_s: float = 0.0, stop_when_steady: bool = True, clock=time.perf_counter
) -> dict:
    """Run batches (`GpuLoader`, `GpuProcessLoader`, `_DaliVideos`) flat out, no training step. Returns
    `steady_rate`'s record plus 'batches', 'startup_s', 'lookahead_items', 'epoch_items', 'stopped_early' and the
    window's clock; stops once steady with `stop_when_steady`. Raises ValueError when no batch follows the warm-up."""
    import torch

    lookahead_items = lookahead_of(batches)
    total = _epoch_length(batches) if stop_when_steady else None
    t0 = clock()
    deliveries, warm, count, startup, done, opened, stopped = [], 0, 0, 0.0, 0, None, False
    it = iter(batches)
    try:
        for batch in it:
            # (B, K, 3, S, S) is B videos of K frames; a GpuLoader batch of videos of unequal length is a list
            videos = batch if isinstance(batch, list) else list(batch)
            if videos[-1].is_cuda:  # the GPU work behind the batch (its stack) done, so the clock reads the real time
                torch.cuda.current_stream(videos[-1].device).synchronize()
            now = clock()
            count += 1
            done += len(videos)
            if count <= warmup_batches:
                warm += len(videos)
                startup = now - t0
            deliveries.append((now, len(videos), sum(v.shape[0] for v in videos)))
            if count > warmup_batches and opened is None and done >= warm + lookahead_items:
                opened = (now, done)  # the window's first delivery
            if (
                total is not None
                and opened is not None
                and now - opened[0] >= min_window_s
                and done - opened[1] >= max(STEADY_LOOKAHEADS * lookahead_items, 2 * len(videos))
                and total - done >= lookahead_items
            ):
                stopped = True
                break
    finally:
        getattr(it, "close", lambda: None)()  # its decoders stop now (an early stop), not when the loader is collected
    if count <= warmup_batches:
        raise ValueError(f"measure_flat_out: {count} batches, not more than the {warmup_batches} of warm-up")
    r = steady_rate(deliveries, warm, lookahead_items, min_window_s, tail_items=0 if stopped else None)
    start = r.pop("window_start")
    return {
        **r,
        "batches": count - warmup_batches,
        "startup_s": startup,
        "lookahead_items": lookahead_items,
        "epoch_items": sum(d[1] for d in deliveries),
        "epoch_frames": sum(d[2] for d in deliveries),
        "stopped_early": stopped,
        "clock_start": start,
        "clock_end": None if start is None else start + r["seconds"],
    }


def steady_epoch(
    lookahead_items: int, warmup_items: int, min_window_s: float = 0.0, items_per_s=None, batch_size: int = 4
) -> int:
    """How many items an epoch needs for `steady_rate` to find a steady window: warm-up, look-ahead at both
    ends, and a window of STEADY_LOOKAHEADS look-aheads or `min_window_s` at `items_per_s`. Notebook 21."""
    window = max(STEADY_LOOKAHEADS * lookahead_items, 3 * batch_size)
    if items_per_s and min_window_s:
        window = max(window, int(min_window_s * items_per_s) + 1)
    return warmup_items + 2 * lookahead_items + window + 2 * batch_size


class _DaliVideos:
    """A DALI iterator as video tensors; look-ahead: 2 queued batches, the one being built and the reader's own."""

    def __init__(self, iterator, batch_size: int, sequences: int | None = None):
        self.iterator, self.batch_size, self.lookahead = iterator, batch_size, 4 * batch_size
        # the epoch's sequences, where known (`_epoch_length`): measure_flat_out then stops once steady, not at the end
        self.sequences = range(sequences) if sequences else None

    def __iter__(self):
        return (out[0]["video"] for out in self.iterator)


class _Batches:
    """The frames of each batch of a handed-over module's loader or `make_loader`, with its look-ahead and length."""

    def __init__(self, loader, items: int, lookahead: int, module: bool):
        self.loader, self.paths, self.lookahead, self.module = loader, range(items), lookahead, module

    def __iter__(self):
        for batch in self.loader:
            frames = batch[0] if self.module or isinstance(batch, tuple) else batch  # on_error='skip': (frames, ...)
            if frames is not None and len(frames):
                yield frames


def _side_by_side_loader(spec: dict):
    """As `_Batches`, the loader of a 'module' spec (`handover`'s, from its file) or of a 'cpu' spec (`make_loader`)."""
    k, size, batch, workers = spec["k"], spec["size"], spec["batch_size"], spec["workers"]
    if spec["kind"] == "cpu":
        made = loaders.make_loader(
            spec["paths"], spec["backend"], batch, workers, k=k, size=(size, size), on_error="skip"
        )
        return _Batches(made, len(spec["paths"]), lookahead_of(made), module=False)
    import importlib.util
    import inspect

    # as a reader's script has it: the file beside it, on the path, so that DataLoader workers import it by name
    sys.path.insert(0, str(handover.FOLDER))
    name = handover.module(spec["backend"], spec["device"])
    found = importlib.util.spec_from_file_location(name, handover.path(spec["backend"], spec["device"]))
    mod = sys.modules[name] = importlib.util.module_from_spec(found)
    found.loader.exec_module(mod)
    takes = inspect.signature(mod.VideoClips).parameters
    clips = mod.VideoClips(spec["paths"], k=k, size=size, **({"device": spec["device"]} if "device" in takes else {}))
    made = mod.loader(clips, batch_size=batch, workers=workers)
    ahead = lookahead_of(made) if hasattr(made, "num_workers") else 2 * workers  # DataLoader, or threads
    return _Batches(made, len(spec["paths"]), ahead, module=True)


def _run_spec(spec: dict) -> dict:
    """Build the loader `spec` describes and measure it in this process (the child of `measure_isolated`)."""
    paths, batch = spec["paths"], spec["batch_size"]
    if spec["kind"] in ("module", "cpu"):
        make = partial(_side_by_side_loader, spec)
    elif spec["kind"] == "dali":

        def make():
            length = spec.get("sequence_length", 32)
            reader = dali_loader(paths, sequence_length=length, batch_size=batch, device_id=spec.get("device_id", 0))
            # whole batches: the loader drops the last partial one
            return _DaliVideos(reader, batch, sequences=dali_sequences(paths, length) // batch * batch)
    else:
        common = {k: spec[k] for k in ("backend", "device", "threads")}
        common.update(batch_size=batch, chunk=spec.get("chunk", 32))
        if spec.get("processes", 1) > 1:
            make = partial(GpuProcessLoader, paths, processes=spec["processes"], **common)
        else:
            sampled = {k: spec[k] for k in ("strategy", "k", "size", "on_error") if k in spec}  # K sampled frames
            make = partial(GpuLoader, paths, **common, **sampled)
    if spec.get("step_s") is not None:  # the data wait against a training step, instead of the flat-out rate
        return {"wait": measure_loader(make(), spec["step_s"], spec["steps"], device=spec["device"])}
    device = Device.parse(spec["device"])
    with UtilizationMonitor(gpu=device.ordinal if device.is_cuda else None) as sampler:
        result = measure_flat_out(
            make(), warmup_batches=spec.get("warmup_batches", 0), min_window_s=spec.get("min_window_s", 0.0)
        )
    # inside the steady window: NVDEC and SM busy (median %), the CPU of this process and its workers (% of one core)
    start, end = result.pop("clock_start"), result.pop("clock_end")
    u = sampler.summary(since=start, until=end) if start is not None else {"busy_why": "no steady window"}
    result["utilization"] = {k: u.get(k) for k in ("nvdec_pct", "sm_pct", "cpu_pct", "samples", "busy_why")}
    return result


def _warm_child(w: dict) -> dict:
    """A `warm_children` child's warm-up: PyTorch and the loader's library imported, the CUDA context made, and
    (but for DALI's reader, whose pipeline is built per epoch) a decoder made by reading frame 0 of `w['clip']`."""
    import torch

    t = time.perf_counter()
    device = Device.parse(w["device"])
    if w["kind"] == "dali":
        import nvidia.dali  # noqa: F401

        torch.zeros(1, device=w["device"])
    else:
        read_frames(w["clip"], [0], w["backend"], w["device"])
    if device.is_cuda:
        torch.cuda.synchronize(w["device"])
    return {"seconds": time.perf_counter() - t}


_spares: child.Spares | None = None  # the warmed children `measure_isolated` takes first (`warm_children`)
_deferred: list = []  # (key, warm-up) of the children `warm_children(later=True)` left for the next call


def _child_key(spec: dict) -> str:
    return f"{spec['kind']}:{spec['backend']}"


def warm_children(specs, device: str, clips, later: bool = False, timeout: float = 300) -> float:
    """Start a warmed child (`_warm_child`) per spec side by side (`later`: with the next call's); returns seconds."""
    global _spares
    if _spares is None:
        _spares = child.Spares(child.python("-m", "playbook_utils.bench.loader_bench", "--serve"), child_env(), timeout)
    one = isinstance(clips, (str, Path))
    for spec in specs:
        clip = clips if one else next((p for p in clips if why_unavailable(spec["backend"], device, p) is None), None)
        if clip is not None:
            _deferred.append((_child_key(spec), {**spec, "device": device, "clip": str(clip)}))
    if later:
        return 0.0
    began = time.perf_counter()
    while _deferred:
        _spares.start(*_deferred.pop(0))
    _spares.ready()
    return time.perf_counter() - began


# the kinds of clip (codec, open GOP) notebook 21 measures its GPU-side loaders on, the commonest first: H.264 as
# most cameras and phones write it, then HEVC as x265 writes it by default (open GOP), then the others
GPU_CLIP_KINDS = (("h264", False), ("hevc", True), ("hevc", False), ("h264", True))


def gpu_clips(paths, count: int) -> list[tuple[str, str]]:
    """(codec, path) of the first `count` kinds of GPU_CLIP_KINDS present, each its clip with the shortest first GOP."""
    kinds: dict = {}
    for p in paths:
        i = video_info(p)
        if i.codec in ("h264", "hevc"):
            kinds.setdefault((i.codec, bool(i.open_gop)), []).append((i.gop_lengths[0], str(p)))
    order = [k for k in GPU_CLIP_KINDS if k in kinds]
    return [(codec, min(kinds[(codec, o)])[1]) for codec, o in order[:count]]


def end_children() -> None:
    """End the children `warm_children` started that no measurement took (and forget those left for later)."""
    global _spares
    _deferred.clear()
    if _spares is not None:
        _spares.close()
        _spares = None


def measure_isolated(spec: dict, timeout: float = 600) -> dict:
    """Measure the GPU-side loader `spec` describes in a fresh (or `warm_children`-warmed) child process. Returns its
    answer: 'status', the flat-out measurement and 'utilization' ({'wait'} with 'step_s'), or 'error'. Notebook 21."""
    spec = {**spec, "paths": [str(p) for p in spec["paths"]]}
    warmed = _spares.call(_child_key(spec), spec, timeout) if _spares is not None else None
    if warmed is not None:  # a child `warm_children` started and warmed beforehand
        return warmed
    return child.call(
        child.python("-m", "playbook_utils.bench.loader_bench", json.dumps(spec)), timeout=timeout, env=child_env()
    )


# how far a handed-over module's rate may stand from the playbook's loader's for the same path
APART_WITHIN_PCT = 10.0


def module_beside_playbook(backend: str, device: str, files, k: int, workers: int, batch_size: int, folder,
                           size: int = 224, rounds: int = 2, items: int | None = None) -> dict:  # fmt: skip
    """The module `handover` hands over for `backend` on `device` beside the playbook's own loader, each flat
    out in its own process over the same epoch, alternating `rounds` times. Returns {'module', 'playbook', 'apart_pct',
    'within' (the gap not above `APART_WITHIN_PCT` or the larger spread), ...} or {'status', 'error'}. Notebook 22."""
    gpu = str(device).startswith("cuda")
    ahead = 2 * workers if gpu else workers * 2 * batch_size
    n = items or steady_epoch(ahead, batch_size, batch_size=batch_size)
    paths = [str(p) for p in epoch_items(files, n, folder)]
    common = {"backend": backend, "device": device, "paths": paths, "k": k, "size": size, "batch_size": batch_size}
    # files the backend refuses only when it reads them (NVDEC without AV1) skipped, as the module skips them
    on_gpu = {"kind": "gpu", "threads": workers, "strategy": "uniform", "warmup_batches": 1, "on_error": "skip"}
    specs = {
        "module": {**common, "kind": "module", "workers": workers},
        "playbook": {**common, **on_gpu} if gpu else {**common, "kind": "cpu", "workers": workers},
    }
    runs = {name: [] for name in specs}
    for _ in range(rounds):
        for name, spec in specs.items():
            r = measure_isolated(spec)
            if r.get("status") != "ok" or not r.get("frames_per_s"):
                return {"status": r.get("status", "no rate"), "error": r.get("error") or r.get("why"), "loader": name}
            runs[name].append(r)
    rates = {name: [r["frames_per_s"] for r in rs] for name, rs in runs.items()}
    median = {name: statistics.median(rs) for name, rs in rates.items()}
    spread = {name: spread_pct(rs) if len(rs) > 1 else runs[name][0].get("frames_per_s_spread_pct")
              for name, rs in rates.items()}  # fmt: skip
    apart = 100.0 * (median["module"] / median["playbook"] - 1)
    noise = max([APART_WITHIN_PCT, *(s for s in spread.values() if s is not None)])
    return {
        "status": "ok", "module": median["module"], "playbook": median["playbook"],
        "module_spread_pct": spread["module"], "playbook_spread_pct": spread["playbook"],
        "apart_pct": apart, "within": abs(apart) <= noise, "items": n, "runs": runs,
    }  # fmt: skip


def measure_until_steady(spec: dict, items_for, n: int, min_window_s: float) -> tuple[dict, int]:
    """`measure_isolated(spec)` over `items_for(n)`, retried once on a grown epoch where the steady window fell
    short of `min_window_s`. Returns (the last result, its epoch's size). Notebook 21."""
    r = measure_isolated({**spec, "paths": items_for(n), "min_window_s": min_window_s})
    if r.get("status") == "ok" and not r.get("steady") and 0 < (r.get("seconds") or 0) < min_window_s:
        n = int(n * 1.5 * min_window_s / r["seconds"]) + 1
        r = measure_isolated({**spec, "paths": items_for(n), "min_window_s": min_window_s})
    return r, n


if __name__ == "__main__":  # the child of `measure_isolated`: a failure is reported as data
    if sys.argv[1:] == ["--serve"]:  # a child of `warm_children`: its warm-up, then one spec, on stdin
        child.serve_requests(_run_spec, warm=_warm_child)
    else:
        child.reply(_run_spec, json.loads(sys.argv[1]))
