"""Measuring whole training loaders: against a simulated training step (`measure_loader`), flat out
(`measure_flat_out`), each GPU-side loader in its own process (`measure_isolated`), the CPU worker sweep, and the
GPU-side loaders against the NVDEC ceiling (notebook 21). The loaders themselves live in `loaders`; this module
only runs and judges them.

    python -m playbook_utils.bench.loader_bench SPEC_JSON   (the child of `measure_isolated`)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from playbook_utils import child
from playbook_utils.device import Device

BUSY_PCT = 90  # NVDEC or the SMs busy this share of the time: that unit is what held a loader back


def accepted(paths, backend: str, device: str = "cpu") -> tuple[list, dict]:
    """(the paths `backend` takes on `device`, {path: why} for the ones it refuses before decoding): a loader
    of one library is measured on the files it would read, not stopped by the first it refuses (decord and
    open-GOP video, say). Introduced in notebook 21."""
    from playbook_utils.decoders import why_unavailable

    why = {str(p): why_unavailable(backend, device, p) for p in dict.fromkeys(paths)}
    return [p for p in paths if not why[str(p)]], {p: w for p, w in why.items() if w}


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
) -> tuple[list, list]:
    """Every backend x worker count as a `loaders.make_loader` of K sampled frames per video, against a simulated
    training step (`measure_loader`). Returns (rows, stuck): a configuration whose workers deliver no
    batch within `timeout_s`, or die, is recorded in `stuck` with its error and the sweep goes on. `log` gets
    one line per configuration."""
    from playbook_utils import loaders

    rows, stuck = [], []
    for b in backends:
        mine, refused = accepted(paths, b)
        if refused:
            log(f"{b}: leaves out the {len(refused)} file(s) it refuses ({next(iter(refused.values()))})")
        if len(mine) < batch:
            log(f"{b}: not measured: it takes fewer than {batch} of the files")
            continue
        for w in workers:
            dl = loaders.make_loader(
                mine, backend=b, batch_size=batch, num_workers=w, k=k, size=size, timeout_s=timeout_s
            )
            try:
                r = measure_loader(dl, step_s, steps, device=device, max_seconds=max_s)
            except RuntimeError as e:  # DataLoader's timeout (a worker that stopped delivering), or a worker that died
                stuck.append({"backend": b, "workers": w, "error": str(e)[:200]})
                log(f"{b:11s} workers={w:2d}: {'STUCK' if 'timed out' in str(e) else 'FAILED'}, {str(e)[:120]}")
                continue
            finally:
                loaders.close_loader(dl)  # its workers exit now, cleanly, not when the loader is collected
            threads = loaders.share_of_cores(w) if w and b != "decord" else 0  # make_loader's default
            rows.append({"backend": b, "workers": w, "decoder_threads": threads, "files_left_out": len(refused), **r})
            cut = f", {r['steps']} steps in the {max_s} s cap" if r["stopped_by_time"] else ""
            log(
                f"{b:11s} workers={w:2d}, threads per decoder {threads or 'all':>3}: {r['samples_per_s']:7.1f} videos/s, "
                f"waits {100 * r['wait_fraction']:5.1f}% of the time ({1e3 * r['wait_s_per_step']:.1f} ms per "
                f"{1e3 * step_s:.0f} ms step{cut})"
            )
    return rows, stuck


def sweep_label(row: dict, total: int, workers: bool = True) -> str:
    """A `sweep_workers` row's name for a table, a plot or a verdict: backend (and workers), and the share of the
    `total` files it read where it refused some (its rate is then over other work than the rest)."""
    name = f"{row['backend']} x{row['workers']} workers" if workers else row["backend"]
    if row.get("files_left_out"):
        name += f" ({total - row['files_left_out']} of {total} files)"
    return name


def gpu_specs(clip, device: str, threads, process_layouts, dali_ok: bool) -> tuple[list[dict], list[str]]:
    """The GPU-side loaders notebook 21 measures on `clip`: a `GpuLoader` per GPU backend and thread count, a
    `GpuProcessLoader` per (processes, threads), and DALI's reader where `dali_ok`. Returns (specs, notes), a
    note for each backend that refuses the clip."""
    from playbook_utils.decoders import why_unavailable

    specs, notes = [], []
    for b in ("pynvvideocodec", "torchcodec"):
        why = why_unavailable(b, device, clip)
        if why:
            notes.append(f"{b}: not measured: {why}")
            continue
        specs += [{"kind": "gpu", "backend": b, "threads": t, "loader": f"{b} x{t} threads"} for t in threads]
        specs += [
            {"kind": "gpu", "backend": b, "processes": p, "threads": t, "loader": f"{b} {p} processes x{t} threads"}
            for p, t in process_layouts
        ]
    if dali_ok and why_unavailable("dali", device, clip) is None:
        specs.append(
            {
                "kind": "dali",
                "backend": "dali",
                "threads": None,
                "loader": "dali experimental reader",
                "device_id": Device.parse(device).index or 0,
            }
        )
    return specs, notes


def measure_gpu_loaders(clip, codec: str, specs, items: list, ceiling_fps, common: dict, log=print) -> list[dict]:
    """Each spec over `items` (distinct names of the clip, or the reader's files) in its own process
    (`measure_isolated`, with `common` arguments: device, batch_size, chunk, warmup_batches), each row
    put against `ceiling_fps` with what NVML saw while its clock ran. Returns the rows; a failure is a line."""
    rows = []
    for spec in specs:
        r = measure_isolated({**spec, "paths": items, **common})
        if r["status"] != "ok":
            log(f"  {spec['loader']}: failed: {r['error'][:140]}")
            continue
        row = {"clip": Path(clip).name, "codec": codec, "path": str(clip), **spec, **r}
        row["pct_of_ceiling"] = 100 * row["frames_per_s"] / ceiling_fps if ceiling_fps else None
        u = row.get("utilization") or {}
        busy = ", ".join(
            f"{label} {u[key]:.0f}%"
            for key, label in (("nvdec_pct", "NVDEC"), ("sm_pct", "SMs"), ("cpu_pct", "CPU"))
            if u.get(key) is not None
        )
        pct = f"{row['pct_of_ceiling']:5.1f}% of the ceiling" if row["pct_of_ceiling"] else ""
        log(
            f"  {row['loader']:38s} {row['frames_per_s']:8,.0f} frames/s model-ready  {pct}  "
            f"(start-up {row['startup_s']:.1f} s; busy: {busy or 'not sampled'})"
        )
        rows.append(row)
    return rows


def more_threads(row: dict, items: list, ceiling_fps, common: dict, steps, log=print) -> tuple[list[dict], str]:
    """Past the thread counts measured: `row` (a one-process `GpuLoader` row of `measure_gpu_loaders`) again with
    each thread count of `steps` above its own, in order, until the rate stops rising, that is until a step gains
    no more than the larger spread of the two rows. Returns (the new rows, a sentence: where it stopped, at what
    rate, and what held it back there (`limit_of`)). Notebook 21."""
    best, rows = row, []
    for t in [t for t in steps if t > row["threads"]]:
        spec = {"kind": "gpu", "backend": row["backend"], "threads": t, "loader": f"{row['backend']} x{t} threads"}
        new = measure_gpu_loaders(row["path"], row["codec"], [spec], items, ceiling_fps, common, log)
        if not new:
            return rows, f"{spec['loader']} failed (the line above says why); the best stays {best['loader']}"
        rows += new
        gain = 100 * (new[0]["frames_per_s"] / best["frames_per_s"] - 1)
        spread = max(best.get("frames_per_s_spread_pct") or 0, new[0].get("frames_per_s_spread_pct") or 0)
        if gain <= spread:
            return rows, (
                f"the rate stopped rising at {t} threads ({gain:+.1f}% against a spread of {spread:.1f}%): "
                f"{best['loader']} stays the best, {best['frames_per_s']:,.0f} frames/s, held back by "
                f"{limit_of(best)[1]}"
            )
        best = new[0]
    return rows, (
        f"still rising at {best['threads']} threads, the last count tried: {best['frames_per_s']:,.0f} frames/s, "
        f"held back by {limit_of(best)[1]}"
    )


def limit_of(row: dict, busy_pct: float = BUSY_PCT) -> tuple[str, str]:
    """(label, sentence): what held a GPU-side loader back. NVDEC busy at least `busy_pct` of the time means the
    engines; else the SMs busy that long mean the GPU work each frame needs beyond decoding; neither means the
    host side (Python scheduling, demuxing, the calls into the decoders)."""
    u = row.get("utilization") or {}
    nvdec, sm, cpu = u.get("nvdec_pct"), u.get("sm_pct"), u.get("cpu_pct")
    if nvdec is None or sm is None:
        return "unknown", "unknown (NVML gave no utilization here)"
    if nvdec >= busy_pct:
        return "NVDEC", f"NVDEC, busy {nvdec:.0f}% of the time"
    if sm >= busy_pct:
        return (
            "SMs",
            f"the SMs, busy {sm:.0f}% of the time (colour conversion, resize, normalization; NVDEC {nvdec:.0f}%)",
        )
    cores = f"; the process used {cpu / 100:.1f} cores" if cpu is not None else ""
    return "host side", f"the host side: neither NVDEC ({nvdec:.0f}%) nor the SMs ({sm:.0f}%) were busy{cores}"


def best_gpu_loaders(rows: list[dict], ceilings: dict) -> dict:
    """Per clip, the best GPU-side loader with its margin over the runner-up (`verdicts.rank`), its share of the
    ceiling, and what held it back (`limit_of`); the headline notebook 21 reports."""
    from playbook_utils.bench import verdicts

    best = {}
    for name in dict.fromkeys(r["clip"] for r in rows):
        rs = [r for r in rows if r["clip"] == name]
        b = max(rs, key=lambda r: r["frames_per_s"])
        v = verdicts.rank((r["loader"], r["frames_per_s"], r.get("frames_per_s_spread_pct")) for r in rs)
        label, why = limit_of(b)
        best[name] = {
            "loader": b["loader"],
            "backend": b["backend"],
            "fps": round(b["frames_per_s"]),
            "pct_of_ceiling": round(b["pct_of_ceiling"], 1) if b["pct_of_ceiling"] else None,
            "ceiling_fps": round(ceilings[name]) if ceilings.get(name) else None,
            "limit": label,
            "why": why,
            "margin": v.sentence(),
            "clip_mbps": _mbps(b.get("path")),
            **{k: (b.get("utilization") or {}).get(k) for k in ("nvdec_pct", "sm_pct")},
        }
    return best


def _mbps(path) -> float | None:
    """The bitrate of the file at `path` in Mbit/s (2 decimals), None when unknown."""
    from playbook_utils import media
    from playbook_utils.errors import DecodeError

    try:
        rate = media.probe(path).bit_rate if path else None
    except DecodeError:  # the loader row stands without it
        return None
    return round(rate / 1e6, 2) if rate else None


def epoch_items(paths, n: int, folder) -> list[Path]:
    """`n` distinct files for an epoch: the first `n` of `paths` where there are that many, else copies of them
    under new names (`distinct_copies`), spread evenly over `paths`."""
    paths = [Path(p) for p in paths]
    if len(paths) >= n:
        return paths[:n]
    per = -(-n // len(paths))
    copies = [distinct_copies(p, per, folder) for p in paths]
    return [copies[i % len(paths)][i // len(paths)] for i in range(n)]


def distinct_copies(clip, n: int, folder) -> list[Path]:
    """`n` copies of `clip` under different names in `folder` (made once, kept): an epoch of distinct files, so
    that no per-file decoder cache and no single cached file flatters a loader the way `[clip] * n` would. The
    copies were just written, so they sit in the page cache: the rates exclude storage (notebook 00 measures it)."""
    import shutil

    clip, folder = Path(clip), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        copy = folder / f"{clip.stem}_{i:04d}{clip.suffix}"
        if not copy.exists() or copy.stat().st_size != clip.stat().st_size:
            shutil.copyfile(clip, copy)
        out.append(copy)
    return out


def measure_loader(
    loader,
    step_s: float,
    steps: int,
    device: str = "cpu",
    warmup: int = 2,
    max_seconds: float | None = None,
    min_steps: int = 3,
) -> dict:
    """Run `steps` simulated training steps of `step_s` seconds, fed by `loader`; return the data wait.

    Each step waits for the next batch (the time counted as data wait), copies it to `device`, then
    'trains' for `step_s` (sleeping, which leaves the CPU to the workers as a GPU step would). Returns
    {'wait_fraction', 'wait_s_per_step', 'step_s', 'samples_per_s', 'steps', 'stopped_by_time'}; batches
    are recycled when the loader runs out before `steps`. `max_seconds` ends the measurement early
    (after at least `min_steps` measured steps): a slow configuration, such as one worker decoding 1080p
    clips, is then measured over fewer steps instead of holding the run for minutes.
    """
    it = iter(loader)
    waits, samples, start, rates = [], 0, None, []
    for s in range(steps + warmup):
        if (
            max_seconds is not None
            and start is not None
            and len(waits) >= min_steps
            and time.perf_counter() - start > max_seconds
        ):
            break
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        batch = batch.to(device, non_blocking=True)
        if Device.parse(device).is_cuda:
            import torch

            torch.cuda.synchronize(device)
        t1 = time.perf_counter()
        if s == warmup:
            start = t0
        time.sleep(step_s)
        if s >= warmup:
            waits.append(t1 - t0)
            samples += batch.shape[0]
            rates.append((batch.shape[0], time.perf_counter() - t0))
    total = time.perf_counter() - start
    wait = sum(waits)
    from playbook_utils.bench.verdicts import block_rates, spread_pct

    return {
        "wait_fraction": wait / total,
        "wait_s_per_step": wait / len(waits),
        "step_s": step_s,
        "samples_per_s": samples / total,
        "samples_per_s_spread_pct": spread_pct(block_rates(*zip(*rates))),
        "steps": len(waits),
        "stopped_by_time": len(waits) < steps,
    }


def measure_flat_out(batches, warmup_batches: int = 0) -> dict:
    """Run an iterable of model-ready batches flat out (no training step): a `GpuLoader`, a `GpuProcessLoader`,
    or a `dali_loader` seen through `_DaliVideos`. Returns {'frames_per_s', 'batches', 'seconds', 'frames',
    'startup_s', 'clock_start'} (notebook 21).

    With `warmup_batches`, the clock starts when that many batches have arrived, and only later frames count:
    the steady rate of a loader whose start (processes, CUDA contexts, decoders) an epoch pays once.
    'startup_s' is the time until then. 'frames_per_s_spread_pct' is the spread of the rates of four runs of
    consecutive batches (`verdicts.block_rates`).
    """
    import torch

    def finished(video):  # the GPU work behind a batch is done, so the clock reads the real time
        if video.is_cuda:
            torch.cuda.synchronize(video.device)

    t0 = time.perf_counter()
    start, count, frames, last, rates = t0, 0, 0, t0, []
    for batch in batches:
        # (B, K, 3, S, S) is B videos of K frames; a GpuLoader batch of videos of unequal length is a list
        videos = batch if isinstance(batch, list) else list(batch)
        count += 1
        now = time.perf_counter()
        if count > warmup_batches:
            frames += sum(v.shape[0] for v in videos)
            rates.append((sum(v.shape[0] for v in videos), now - last))
        elif count == warmup_batches:
            finished(videos[-1])
            start = now = time.perf_counter()
        last = now
    if count <= warmup_batches:
        raise ValueError(f"measure_flat_out: {count} batches, not more than the {warmup_batches} of warm-up")
    finished(videos[-1])
    seconds = time.perf_counter() - start
    from playbook_utils.bench.verdicts import block_rates, spread_pct

    return {
        "frames_per_s": frames / seconds,
        "frames_per_s_spread_pct": spread_pct(block_rates(*zip(*rates))),
        "batches": count - warmup_batches,
        "seconds": seconds,
        "frames": frames,
        "startup_s": start - t0,
        "clock_start": start,
    }


class _DaliVideos:
    """A DALI iterator seen as an iterable of video tensors, for `measure_flat_out` and `measure_loader`."""

    def __init__(self, iterator):
        self.iterator = iterator

    def __iter__(self):
        return (out[0]["video"] for out in self.iterator)


def _run_spec(spec: dict) -> dict:
    """Build the loader `spec` describes and measure it in this process (the child of `measure_isolated`)."""
    from playbook_utils.bench.monitor import UtilizationMonitor
    from playbook_utils.loaders import GpuLoader, GpuProcessLoader, dali_loader

    if spec["kind"] == "dali":

        def make():
            return _DaliVideos(
                dali_loader(
                    spec["paths"],
                    sequence_length=spec.get("sequence_length", 32),
                    batch_size=spec["batch_size"],
                    device_id=spec.get("device_id", 0),
                )
            )
    elif spec.get("processes", 1) > 1:

        def make():
            return GpuProcessLoader(
                spec["paths"],
                processes=spec["processes"],
                threads=spec["threads"],
                batch_size=spec["batch_size"],
                backend=spec["backend"],
                device=spec["device"],
                chunk=spec.get("chunk", 32),
            )
    else:
        sampled = {k: spec[k] for k in ("strategy", "k") if k in spec}  # K sampled frames instead of every frame

        def make():
            return GpuLoader(
                spec["paths"],
                backend=spec["backend"],
                device=spec["device"],
                threads=spec["threads"],
                batch_size=spec["batch_size"],
                chunk=spec.get("chunk", 32),
                **sampled,
            )

    if spec.get("step_s") is not None:  # the data wait against a training step, instead of the flat-out rate
        return {"wait": measure_loader(make(), spec["step_s"], spec["steps"], device=spec["device"])}
    device = Device.parse(spec["device"])
    with UtilizationMonitor(gpu=device.ordinal if device.is_cuda else None) as sampler:
        result = measure_flat_out(make(), warmup_batches=spec.get("warmup_batches", 0))
    # while the clock ran: NVDEC and SM busy (median %), this process's CPU (% of one core; not its workers')
    result["utilization"] = {
        k: v
        for k, v in sampler.summary(since=result.pop("clock_start")).items()
        if k in ("nvdec_pct", "sm_pct", "cpu_pct")
    }
    return result


def measure_isolated(spec: dict, timeout: float = 600) -> dict:
    """Measure a GPU-side loader in a fresh child process; return the child's answer (notebook 21): 'status'
    ('ok', or one of the failures of `child.OUTCOMES`, with 'error'), and for 'ok' the measurement.

    spec: {'kind': 'gpu' (a `loaders.GpuLoader`: 'backend', 'threads', 'chunk', optional 'strategy' and 'k'
    to sample K frames per video instead of reading every frame; with 'processes' > 1 a
    `loaders.GpuProcessLoader`) or 'dali' (a `loaders.dali_loader`), 'paths', 'device', 'batch_size', optional
    'warmup_batches' (see `measure_flat_out`); with 'step_s' and 'steps', the data wait against that
    training step instead of the flat-out rate ({'wait': ...})}.
    The result also says how busy NVDEC, the SMs and the process's CPU were while the clock ran
    ('utilization', sampled every 0.1 s: `monitor.UtilizationMonitor`).
    Each loader gets its own process because PyNvVideoCodec's bundled FFmpeg breaks TorchCodec once
    both are loaded (notebooks 12 and 13), and so that no decoder cache carries over between runs.
    """
    from playbook_utils.decoders import child_env

    spec = {**spec, "paths": [str(p) for p in spec["paths"]]}
    return child.call(
        child.python("-m", "playbook_utils.bench.loader_bench", json.dumps(spec)), timeout=timeout, env=child_env()
    )


if __name__ == "__main__":  # the child of `measure_isolated`: a failure is reported as data
    child.reply(_run_spec, json.loads(sys.argv[1]))
