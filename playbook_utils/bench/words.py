"""The sentences and tables the benchmark notebooks print from measurements (notebooks 20 and 21, and the
smoke-mode caveats of 00, 24 and 30), built once here so a wording fix lands in one place. Nothing here measures."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from pathlib import Path

from playbook_utils.bench.nvdec import SATURATED_PCT
from playbook_utils.bench.sparse import STRATEGIES
from playbook_utils.bench.verdicts import percent, rank
from playbook_utils.bench.media import bitrate_class, default_media_specs

BUSY_PCT = 90  # NVDEC or the SMs busy this share of the time: that unit is what held a loader back


def busy_words(u: dict | None) -> str:
    """The busy units of a `summary` for a table line ('NVDEC 97%, SMs 45%, CPU 350%'), or why none. Notebook 20."""
    u = u or {}
    units = (("nvdec_pct", "NVDEC"), ("sm_pct", "SMs"), ("cpu_pct", "CPU"))
    busy = ", ".join(f"{label} {u[key]:.0f}%" for key, label in units if u.get(key) is not None)
    return busy or u.get("busy_why") or "not sampled"


def limit_of(row: dict) -> tuple[str, str]:
    """(label, line): what held a GPU-side loader back, from its utilization: 'NVDEC' or 'SMs' where busy at least
    BUSY_PCT, else 'host side' (with the cores used, and 'idle' where under half were); 'unknown' unsampled."""
    u = row.get("utilization") or {}
    nvdec, sm, cpu = u.get("nvdec_pct"), u.get("sm_pct"), u.get("cpu_pct")
    if nvdec is None or sm is None:
        return "unknown", f"unknown: utilization {u.get('busy_why') or 'not measured'}"
    if nvdec >= BUSY_PCT:
        return "NVDEC", f"NVDEC busy {nvdec:.0f}%"
    if sm >= BUSY_PCT:
        return "SMs", f"SMs busy {sm:.0f}% (NVDEC {nvdec:.0f}%)"
    have = len(os.sched_getaffinity(0))
    cores = "" if cpu is None else f", {cpu / 100:.1f} of {have} cores busy"
    idle = cpu is not None and cpu / 100 < have / 2
    return "host side", f"host side: NVDEC {nvdec:.0f}%, SMs {sm:.0f}%{cores}" + (", the rest idle" if idle else "")


def format_rows(rows: list[dict]) -> str:
    """A bench table's rows as fixed-width text, refusals grouped one line per reason. Notebook 20."""
    lines = [
        f"{'backend':15s} {'dev':4s} {'workload':11s} {'clip':34s} {'frames/s':>9s} {'spread':>7s} {'% ceil':>6s} "
        f"exact  agree  check"
    ]
    refused = Counter((r["backend"], r["device"], r.get("error") or "") for r in rows if r["status"] == "unavailable")
    at_most = False
    for r in rows:
        if r["status"] == "unavailable":
            continue
        ok = r["status"] == "ok"
        fps = f"{r['fps']:9,.0f}" if ok else f"{'-':>9s}"
        spread = f"{r['rate_spread_pct']:6.0f}%" if r.get("rate_spread_pct") is not None else " " * 7
        pct = f"{r['pct_of_ceiling']:5.0f}%" if r.get("pct_of_ceiling") else " " * 6
        if r.get("pct_of_ceiling") and r.get("at_most"):  # the share of a lower-bound ceiling: an upper bound
            pct, at_most = f"<={r['pct_of_ceiling']:3.0f}%", True
        pct = " ABOVE" if r.get("verdict") == "above" else pct  # no share above the ceiling is a result
        note = r["check"] if ok else f"{r['status']}: {r.get('error') or ''}"
        if r.get("read_forward"):  # its seeks go wrong on this file: read from frame 0, so sparse reads cost more
            note = f"{note}; read forward from frame 0"
        by_ref = ok and str(r.get("check") or "").startswith("reference")
        agree = "" if not by_ref else "same" if r.get("agree_db") is None else f"{r['agree_db']:.0f} dB"
        lines.append(
            f"{r['backend']:15s} {r['device']:4s} {r['workload']:11s} {Path(r['clip']).name[:34]:34s} {fps} "
            f"{spread} {pct} {str(r.get('exact', '')):5s}  {agree:5s}  {note}"
        )
    for (backend, device, why), n in refused.items():
        lines.append(f"{backend:15s} {device:4s} {n} job(s) unavailable: {why}")
    if at_most:
        lines.append("<=: the share of a ceiling measured only as a lower bound, so at most this")
    return "\n".join(lines)


def ceiling_state(c: dict) -> str:
    """'saturated', or why an `nvdec.ceiling` is only a lower bound: the engines were not kept busy, or the rate was
    still rising with more decoders at once."""
    if c["saturated"]:
        return "saturated"
    if c.get("levelled") is False and (c["best"]["nvdec_util_median"] or 0) >= SATURATED_PCT:
        return "LOWER BOUND (still rising with more decoders)"
    return "LOWER BOUND"


def format_ceilings(found: dict, infos: dict) -> str:
    """{clip: `nvdec.ceiling`} as a table, each saturated or a lower bound (`ceiling_state`). Notebooks 20, 21."""
    lines = [
        f"{'clip':34s} {'size':>9s} {'Mbit/s':>6s} {'ceiling f/s':>11s} {'spread':>6s} {'decoder':>14s} {'layout':>7s} "
        f"{'NVDEC util':>10s} {'at 100%':>8s}  saturated ({SATURATED_PCT}%), or a lower bound"
    ]
    for name, c in found.items():
        i = infos[name]
        head = f"{name[:34]:34s} {i.width:4d}x{i.height:<4d} {(i.bit_rate or 0) / 1e6:6.1f}"
        if c["fps"]:
            b = c["best"]
            util = "n/a" if b["nvdec_util_median"] is None else f"{b['nvdec_util_median']}%"
            spread = percent(c["spread_pct"]) if c.get("spread_pct") is not None else "n/a"
            lines.append(
                f"{head} {c['fps']:11,.0f} {spread:>6s} {b.get('decoder', 'pynvvideocodec'):>14s} {b['processes']:>3d}x"
                f"{b['threads']:<3d} {util:>10s} "
                + (f"{c['implied_fps']:8,.0f}  " if c["implied_fps"] else f"{'n/a':>8s}  ")
                + ceiling_state(c)
                + (f", measured by {c['measured_by']}" if c.get("measured_by") else "")
            )
        else:
            lines.append(f"{head} failed: {c['rows'][0]['error'] if c['rows'] else 'no rows'}")
    return "\n".join(lines)


def format_run(result: dict) -> str:
    """A `sparse.run` result as a table, one row per strategy, its legend below. Notebook 20."""
    base = result["decode everything"]["seconds"]
    lines = [f"  {'strategy':22s} {'ms':>8s} {'decoded':>8s} {'vs all':>7s} {'frames':>7s} {'offset':>7s}"]
    for label in STRATEGIES:
        x = result[label]
        frames = "WRONG" if not x["exact"] else "exact" if x["mean_offset"] == 0 else "snapped"
        lines.append(
            f"  {label:22s} {1e3 * x['seconds']:8.1f} {x['frames_decoded']:8d} {base / x['seconds']:6.1f}x "
            f"{frames:>7s} {x['mean_offset']:6.1f}f"
        )
    lines.append(
        "  (vs all: the speed-up over decoding everything; frames: the targets, or the keyframes a snapping strategy "
        "returns instead; offset: their mean distance from the targets, in frames)"
    )
    return "\n".join(lines)


def sweep_sentence(ended: str, best: dict, rows: list[dict], tried: str | None = None, stopped=None) -> str:
    """The line `loader_bench.more_threads` returns. `ended`: 'failed', 'no rate' or 'done'; `best`: the best row
    so far; `stopped`: (threads, gain %, spread %) of the first step that gained no more than the spread."""
    rate = f"{best['loader']}, {best['frames_per_s']:,.0f} frames/s"
    if ended == "failed":
        return f"best {rate}; {tried} failed"
    if ended == "no rate":
        last = rows[-1]
        return f"{tried}: no rate ({last['words'] if last['steady'] else last['why']}); best {rate}"
    rate += f", limit: {limit_of(best)[1]}"
    if stopped is None:
        return f"still rising at {best['threads']} threads; best {rate}"
    t, gain, spread = stopped
    after = [r["frames_per_s"] / best["frames_per_s"] - 1 for r in rows if r["threads"] > best["threads"]]
    again = ", then rose again" if best["threads"] > t else ""
    moved = ""
    if len(after) > 1:
        moved = f"; to {rows[-1]['threads']} threads: {100 * min(after):+.1f}% to {100 * max(after):+.1f}%"
    # more threads tie with it, and 21's verdict names the fastest of those: this one is the fewest that get there
    head = f"levelled at {t} threads ({gain:+.1f}% against a spread of {spread:.1f}%){again}"
    return f"{head}; the fewest threads for that rate: {rate}{moved}"


def gpu_loader_line(row: dict) -> str:
    """The line of one `loader_bench.measure_gpu_loaders` row: rate, verdict or why no steady rate, what was busy
    (notebook 21)."""
    rate = f"{row['frames_per_s']:8,.0f} frames/s" if row["frames_per_s"] else f"{'-':>8s} frames/s"
    how = f"look-ahead {row['lookahead_items']}, {row['epoch_items']} items, {row['seconds']:.0f} s window"
    judged = row["words"] if row["steady"] else f"NOT A STEADY RATE: {row['why']}"
    return (
        f"  {row['loader']:34s} {rate} ±{row.get('frames_per_s_spread_pct') or 0:.0f}%  {judged}  "
        f"({how}; busy: {busy_words(row.get('utilization'))})"
    )


def _smoke_clips() -> str:
    """'256x144 generated clips': the sizes of the clips `media.default_media` builds in smoke mode."""
    sizes = sorted({(s.width, s.height) for s in default_media_specs(True)}, key=lambda wh: wh[0] * wh[1])
    return " and ".join(f"{w}x{h}" for w, h in sizes) + " generated clips"


def smoke_caveat(smoke: bool, video_dir=None, media: str | None = None) -> str | None:
    """The line a measured section prints first in smoke mode on the generated media (rates not comparable with
    full mode); None in full mode or with `video_dir`. Notebooks 00, 24, 30."""
    if not smoke or video_dir:
        return None
    return f"smoke mode: {media or _smoke_clips()}, so rates and timings are not comparable with full mode"


def say_smoke(smoke: bool, video_dir=None, media: str | None = None, after: str = "") -> str | None:
    """Prints `smoke_caveat(...)` followed by `after` where there is a caveat, and returns it. Notebooks 00-30."""
    caveat = smoke_caveat(smoke, video_dir, media)
    if caveat:
        print(caveat + after)
    return caveat


def smoke_skip_reason(reader_files: bool = True, media: str | None = None) -> str:
    """Why smoke mode leaves out what it would extrapolate from its rates, and how to get it. Notebooks 00, 24, 30."""
    how = "SMOKE = False, or VIDEO_DIR = a folder of your videos" if reader_files else "SMOKE = False"
    return f"not extrapolated from smoke mode's {media or _smoke_clips()}, far smaller than real video; run with {how}"


def processor_line(view: dict, height: int, width: int) -> str:
    """What a Qwen2-VL-style processor makes of one video (`train_step.processor_view`), in one line (notebook 21)."""
    h, w = view["size"]
    how = "enlarged (the processor's least pixels per frame)" if h * w > height * width else "resized"
    return (
        f"one video, {view['frames']} frames of {width}x{height}: {how} to {w}x{h}, {view['patches']:,} patches of "
        f"{view['values_per_patch']} values each, {view['tokens']:,} tokens after the 2x2 merge; "
        f"{view['uint8_mb']:.1f} MB as uint8, {4 * view['uint8_mb']:.1f} MB as float32"
    )


def tied_with(v) -> str:
    """' (tied with X: either)' or ' (tied with X and Y: any of them)' after a `verdicts.rank` winner; '' where none
    is tied with it. Notebook 24."""
    others = [v.runner_up, *(t[0] for t in v.also_tied)] if v.tied else []
    if not others:
        return ""
    return f" (tied with {' and '.join(others)}: {'either' if len(others) == 1 else 'any of them'})"


def gop_lesson(short: dict, long: dict, k: int, short_info, long_info) -> str:
    """One line: K sampled frames on the long-GOP clip against the short-GOP one (two `rate_table` rows, the clips'
    `VideoInfo`s): 'tied', 'N.Nx slower' or 'N.Nx faster'. Notebooks 10-13."""
    # the keyframe interval: the median GOP but the last, which the clip's end cuts
    gops = [round(statistics.median(i.gop_lengths[:-1] or i.gop_lengths)) for i in (short_info, long_info)]
    v = rank([("long", long["fps"], long["spread_pct"]), ("short", short["fps"], short["spread_pct"])])
    ratio = short["fps"] / long["fps"]
    verdict = "tied" if v.tied else f"{ratio:.1f}x slower" if ratio > 1 else f"{1 / ratio:.1f}x faster"
    return (
        f"K={k} on the long GOP (a keyframe every {gops[1]} frames): {long['fps']:,.0f} frames/s against "
        f"{short['fps']:,.0f} on the short one (every {gops[0]}): {verdict} (spread {percent(v.spread_pct)})"
    )


def storage_line(folder, storage: dict) -> str:
    """The line of a `bandwidth.storage_read_bandwidth` result. Notebooks 00 and 30."""
    return (
        f"{folder}: cold {storage['cold_mb_s']:,.0f} MB/s by {storage['cold_method']}, warm "
        f"{storage['warm_mb_s']:,.0f} MB/s; {storage['read_mib']:,.0f} MiB read from {storage['source']}"
    )


def one_rank_context(fps: float, backend: str, threads: int, k: int, nb21: dict | None, video_dir=None) -> str:
    """Notebook 30: one rank's rate as a table beside one GPU's fastest sampled loader in notebook 21 (`nb21`, its
    JSON, where 21 ran into the same output folder)."""
    head = f"{'':28s} {'library':14s} {'K':>3s} {'threads':>7s} {'frames/s':>9s}  files"
    lines = [head, f"{'one rank here':28s} {backend:14s} {k:3d} {threads:7d} {fps:9,.0f}  {video_dir or 'H.264 clips'}"]
    rows = (nb21 or {}).get("gpu_sampled") or []
    if rows:
        r = max([r for r in rows if r["backend"] == backend] or rows, key=lambda r: r["frames_per_s"])
        files = nb21.get("video_dir") or "realistic H.264 and HEVC clips"
        lines.append(
            f"{'notebook 21, one GPU alone':28s} {r['backend']:14s} {nb21.get('k') or 0:3d} {r['threads']:7d} "
            f"{r['frames_per_s']:9,.0f}  {files}"
        )
    else:
        lines.append("notebook 21 measured no GPU loader into this folder: nothing to set beside it")
    return "\n".join(lines)


def codec_probe_notes(gpu_results: dict, clips: dict) -> list[str]:
    """Notebook 00: a line per library that did not decode a probe clip ({codec: path}) exactly on NVDEC."""
    lines = []
    for name, libs in gpu_results.items():
        for lib, r in libs.items():
            if r.get("ok"):
                continue
            if r.get("error") is not None:
                lines.append(f"{name} through {lib}: {str(r['error'])[:240]}")
            else:
                lines.append(
                    f"{name} through {lib}: {r.get('wrong_frames')} of {r.get('frames')} frames wrong "
                    f"(a {Path(clips[name]).suffix} file; its library notebook's matrix says which files to trust)"
                )
    return lines


def gpu_slower_lines(table: list[dict]) -> list[str]:
    """A line per row of `kit.Notebook.rate_table` where the GPU read slower than the CPU beyond the spread, with the
    cause the table shows (a faster variant keeping frames on the GPU: the trip through host memory). Notebook 10."""
    cpu = {(r["workload"], r["clip"]): r for r in table if r["device"] == "cpu" and r["fps"]}
    lines = []
    for r in table:
        c = cpu.get((r["workload"], r["clip"]))
        if not r["device"].startswith("cuda") or not r["fps"] or c is None or not (r["exact"] and c["exact"]):
            continue
        v = rank([("gpu", r["fps"], r["spread_pct"]), ("cpu", c["fps"], c["spread_pct"])])
        if v.best == "cpu" and not v.tied:
            kept = [k for k in table if k["device"] == r["device"] and k["clip"] == r["clip"] and k["exact"]
                    and k["workload"].startswith(r["workload"] + ",") and (k["fps"] or 0) > c["fps"]]  # fmt: skip
            why = "one call opens one decoder (many at once: notebooks 20, 21)"
            if kept:
                why = f"each frame's trip through host memory ({kept[0]['workload']}: {kept[0]['fps']:,.0f})"
            lines.append(
                f"{r['workload']} on {r['clip']}: the GPU {r['fps']:,.0f} frames/s, the CPU {c['fps']:,.0f}, beyond the "
                f"spread of {percent(v.spread_pct)}: {why}"
            )
    return lines


def light_clip_note(info) -> str:
    """The note on a light clip (`media.is_light`): its bitrate against filmed video's range. Notebook 00."""
    where = bitrate_class(info)
    head = " (light: a smooth synthetic picture that notebook 01 makes"
    if where == "unknown":
        return f"{head}; no typical bitrate to set it against)"
    return f"{head}; its bitrate {where} filmed video's range at this size)"
