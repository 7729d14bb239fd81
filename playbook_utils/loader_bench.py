"""Measuring whole training loaders: the CPU worker sweep and the GPU-side loaders against the NVDEC ceiling
(notebook 21). The loaders themselves live in `loaders`; this module only runs and judges them.
"""

from __future__ import annotations

from pathlib import Path

BUSY_PCT = 90   # NVDEC or the SMs busy this share of the time: that unit is what held a loader back


def accepted(paths, backend: str, device: str = "cpu") -> tuple[list, dict]:
    """(the paths `backend` takes on `device`, {path: why} for the ones it refuses before decoding): a loader
    of one library is measured on the files it would read, not stopped by the first it refuses (decord and
    open-GOP video, say). Introduced in notebook 21."""
    from playbook_utils.decoders import refusal

    why = {str(p): refusal(p, backend, device) for p in dict.fromkeys(paths)}
    return [p for p in paths if not why[str(p)]], {p: w for p, w in why.items() if w}


def sweep_workers(paths, backends, workers, k: int, batch: int, step_s: float, steps: int, max_s: float,
                  size=None, timeout_s: float = 120, device: str = "cpu", log=print) -> tuple[list, list]:
    """Every backend x worker count as a `loaders.make_loader` of K sampled frames per video, against a simulated
    training step (`loaders.measure_loader`). Returns (rows, stuck): a configuration whose workers deliver no
    batch within `timeout_s`, or die, is recorded in `stuck` with its error and the sweep goes on. `log` gets
    one line per configuration."""
    from playbook_utils import loaders

    rows, stuck = [], []
    for b in backends:
        mine, refused = accepted(paths, b)
        if refused:
            log(f"{b}: leaves out the {len(refused)} file(s) it refuses ({next(iter(refused.values()))[:100]})")
        if len(mine) < batch:
            log(f"{b}: not measured: it takes fewer than {batch} of the files")
            continue
        for w in workers:
            dl = loaders.make_loader(mine, backend=b, batch_size=batch, num_workers=w, k=k, size=size,
                                     timeout_s=timeout_s)
            try:
                r = loaders.measure_loader(dl, step_s, steps, device=device, max_seconds=max_s)
            except RuntimeError as e:   # DataLoader's timeout (a worker that stopped delivering), or a worker that died
                stuck.append({"backend": b, "workers": w, "error": str(e)[:200]})
                log(f"{b:11s} workers={w:2d}: {'STUCK' if 'timed out' in str(e) else 'FAILED'}, {str(e)[:120]}")
                continue
            finally:
                loaders.close_loader(dl)   # its workers exit now, cleanly, not when the loader is collected
            threads = loaders.share_of_cores(w) if w and b != "decord" else 0   # make_loader's default
            rows.append({"backend": b, "workers": w, "decoder_threads": threads, "files_left_out": len(refused), **r})
            cut = f", {r['steps']} steps in the {max_s} s cap" if r["stopped_by_time"] else ""
            log(f"{b:11s} workers={w:2d}, threads per decoder {threads or 'all':>3}: {r['samples_per_s']:7.1f} videos/s, "
                f"waits {100 * r['wait_fraction']:5.1f}% of the time ({1e3 * r['wait_s_per_step']:.1f} ms per "
                f"{1e3 * step_s:.0f} ms step{cut})")
    return rows, stuck


def gpu_specs(clip, device: str, threads, process_layouts, dali_ok: bool) -> tuple[list[dict], list[str]]:
    """The GPU-side loaders notebook 21 measures on `clip`: a `GpuLoader` per GPU backend and thread count, a
    `GpuProcessLoader` per (processes, threads), and DALI's reader where `dali_ok`. Returns (specs, notes), a
    note for each backend that refuses the clip."""
    from playbook_utils.decoders import device_index, refusal

    specs, notes = [], []
    for b in ("pynvvideocodec", "torchcodec"):
        why = refusal(clip, b, device)
        if why:
            notes.append(f"{b}: not measured: {why}")
            continue
        specs += [{"kind": "gpu", "backend": b, "threads": t, "loader": f"{b} x{t} threads"} for t in threads]
        specs += [{"kind": "gpu", "backend": b, "processes": p, "threads": t, "loader": f"{b} {p} processes x{t} threads"}
                  for p, t in process_layouts]
    if dali_ok and refusal(clip, "dali", device) is None:
        specs.append({"kind": "dali", "backend": "dali", "threads": None, "loader": "dali experimental reader",
                      "device_id": device_index(device)})
    return specs, notes


def measure_gpu_loaders(clip, codec: str, specs, items: list, ceiling_fps, common: dict, log=print) -> list[dict]:
    """Each spec over `items` (distinct names of the clip, or the reader's files) in its own process
    (`loaders.measure_isolated`, with `common` arguments: device, batch_size, chunk, warmup_batches), each row
    put against `ceiling_fps` with what NVML saw while its clock ran. Returns the rows; a failure is a line."""
    from playbook_utils import loaders

    rows = []
    for spec in specs:
        r = loaders.measure_isolated({**spec, "paths": items, **common})
        if "error" in r:
            log(f"  {spec['loader']}: failed: {r['error'][:140]}")
            continue
        row = {"clip": Path(clip).name, "codec": codec, "path": str(clip), **spec, **r}
        row["pct_of_ceiling"] = 100 * row["frames_per_s"] / ceiling_fps if ceiling_fps else None
        u = row.get("utilization") or {}
        busy = ", ".join(f"{label} {u[key]:.0f}%" for key, label in (("nvdec_pct", "NVDEC"), ("sm_pct", "SMs"),
                                                                      ("cpu_pct", "CPU")) if u.get(key) is not None)
        pct = f"{row['pct_of_ceiling']:5.1f}% of the ceiling" if row["pct_of_ceiling"] else ""
        log(f"  {row['loader']:38s} {row['frames_per_s']:8,.0f} frames/s model-ready  {pct}  "
            f"(start-up {row['startup_s']:.1f} s; busy: {busy or 'not sampled'})")
        rows.append(row)
    return rows


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
        return "SMs", f"the SMs, busy {sm:.0f}% of the time (colour conversion, resize, normalization; NVDEC {nvdec:.0f}%)"
    cores = f"; the process used {cpu / 100:.1f} cores" if cpu is not None else ""
    return "host side", f"the host side: neither NVDEC ({nvdec:.0f}%) nor the SMs ({sm:.0f}%) were busy{cores}"


def best_gpu_loaders(rows: list[dict], ceilings: dict) -> dict:
    """Per clip, the best GPU-side loader with its margin over the runner-up (`verdicts.rank`), its share of the
    ceiling, and what held it back (`limit_of`); the headline notebook 21 reports."""
    from playbook_utils import verdicts

    best = {}
    for name in dict.fromkeys(r["clip"] for r in rows):
        rs = [r for r in rows if r["clip"] == name]
        b = max(rs, key=lambda r: r["frames_per_s"])
        v = verdicts.rank((r["loader"], r["frames_per_s"], r.get("frames_per_s_spread_pct")) for r in rs)
        label, why = limit_of(b)
        best[name] = {"loader": b["loader"], "backend": b["backend"], "fps": round(b["frames_per_s"]),
                      "pct_of_ceiling": round(b["pct_of_ceiling"], 1) if b["pct_of_ceiling"] else None,
                      "ceiling_fps": round(ceilings[name]) if ceilings.get(name) else None, "limit": label,
                      "why": why, "margin": v.sentence(),
                      **{k: (b.get("utilization") or {}).get(k) for k in ("nvdec_pct", "sm_pct")}}
    return best


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
