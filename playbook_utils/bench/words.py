"""The sentences and tables the benchmark notebooks print from measurements (notebooks 20 and 21, and the
smoke-mode caveats of 00, 24 and 30), built once here so a wording fix lands in one place. Nothing here measures."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from pathlib import Path

from playbook_utils.bench.nvdec import SATURATED_PCT
from playbook_utils.bench.sparse import STRATEGIES, gop_pass
from playbook_utils.bench.verdicts import percent, rank
from playbook_utils.media import bitrate_class, default_media_specs
from playbook_utils.sampling import uniform

BUSY_PCT = 90  # NVDEC or the SMs busy this share of the time: that unit is what held a loader back


def busy_words(u: dict | None) -> str:
    """What a `summary` says of the busy units, for a table line: 'NVDEC 97%, SMs 45%, CPU 350%', or why nothing
    was measured. Notebooks 20, 21."""
    u = u or {}
    busy = ", ".join(
        f"{label} {u[key]:.0f}%"
        for key, label in (("nvdec_pct", "NVDEC"), ("sm_pct", "SMs"), ("cpu_pct", "CPU"))
        if u.get(key) is not None
    )
    return busy or u.get("busy_why") or "not sampled"


def limit_of(row: dict, busy_pct: float = BUSY_PCT) -> tuple[str, str]:
    """(label, sentence): what held a GPU-side loader back, from its utilization: 'NVDEC' or 'SMs' where busy at
    least `busy_pct`, else 'host side'; 'unknown' where the window was too short to sample."""
    u = row.get("utilization") or {}
    nvdec, sm, cpu = u.get("nvdec_pct"), u.get("sm_pct"), u.get("cpu_pct")
    if nvdec is None or sm is None:
        return "unknown", f"unknown: utilization {u.get('busy_why') or 'not measured (NVML gave none here)'}"
    if nvdec >= busy_pct:
        return "NVDEC", f"NVDEC, busy {nvdec:.0f}% of the time"
    if sm >= busy_pct:
        return (
            "SMs",
            f"the SMs, busy {sm:.0f}% of the time (colour conversion, resize, normalization; NVDEC {nvdec:.0f}%)",
        )
    have = len(os.sched_getaffinity(0))
    cores = f"; the process and its children used {cpu / 100:.1f} of {have} cores" if cpu is not None else ""
    if cpu is not None and cpu / 100 < have / 2:  # nothing busy: the decodes in flight were too few
        cores += ", the others idle: too few decodes in flight to keep any of them busy"
    return "host side", (
        f"the host side (its threads and their calls into the decoder): neither NVDEC ({nvdec:.0f}%) nor the SMs "
        f"({sm:.0f}%) were busy{cores}"
    )


def format_rows(rows: list[dict]) -> str:
    """A bench table's rows as fixed-width text: rate, spread, share of the NVDEC ceiling, exactness, agreement
    with the reference decode and the check that ran; refusals grouped one line per reason. Notebook 20."""
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


def ceiling_line(c: dict) -> str:
    """One `nvdec.ceiling` as notebook 21 prints it under its clip: the rate, the decoder library and layout that
    reached it, NVML's median decoder utilization, and `ceiling_state`."""
    if not c["fps"]:
        return "NVDEC ceiling: not measured"
    b = c["best"]
    util = "utilization not measured" if b.get("nvdec_util_median") is None else f"{b['nvdec_util_median']}% busy"
    spread = f" ± {percent(c['spread_pct'])}" if c.get("spread_pct") is not None else ""
    return (
        f"NVDEC ceiling: {c['fps']:,.0f} frames/s{spread} ({b['decoder']}, {b['processes']} x {b['threads']}, NVDEC "
        f"{util}, {ceiling_state(c)})"
    )


def format_ceilings(found: dict, infos: dict) -> str:
    """`ceilings` as a table: clip, size, bitrate, rate and its spread inside the window, the decoder library and
    layout that reached it, NVML's median decoder utilization, saturated or not (a lower bound)."""
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
            )
        else:
            lines.append(f"{head} failed: {c['rows'][0]['error'] if c['rows'] else 'no rows'}")
    return "\n".join(lines)


def format_run(result: dict) -> str:
    """A `run` result as a table: per strategy the time, the frames decoded, the speed-up over decoding
    everything, the frames returned ('exact': the targets; 'snapped': the keyframes it claims, `mean_offset` away;
    'WRONG': not what it claims) and the mean offset from the targets (notebook 20)."""
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
    """The sentence `loader_bench.more_threads` returns. `ended`: 'failed', 'no rate' or 'done'; `best`: the
    best row so far; `stopped`: (threads, gain %, spread %) of the first step that gained no more than the spread."""
    if ended == "failed":
        return f"{tried} failed (the line above says why); the best stays {best['loader']}"
    if ended == "no rate":
        last = rows[-1]
        return (
            f"{tried} gave no rate to compare ({last['words'] if last['steady'] else last['why']}); "
            f"the best measured stays {best['loader']}, {best['frames_per_s']:,.0f} frames/s"
        )
    held = f"{best['frames_per_s']:,.0f} frames/s, held back by {limit_of(best)[1]}"
    if stopped is None:
        return f"still rising at {best['threads']} threads, the last count tried: {held}"
    t, gain, spread = stopped
    head = f"the rate stopped rising at {t} threads ({gain:+.1f}% against a spread of {spread:.1f}%)"
    if best["threads"] > t:
        return f"{head}, then rose again: {best['loader']} is the best, {held}"
    after = [r for r in rows if r["threads"] > best["threads"]]
    moved = ""
    if len(after) > 1:
        lo = 100 * (min(r["frames_per_s"] for r in after) / best["frames_per_s"] - 1)
        hi = 100 * (max(r["frames_per_s"] for r in after) / best["frames_per_s"] - 1)
        moved = f"; from there to {after[-1]['threads']} threads it stayed within {lo:+.1f}% to {hi:+.1f}% of it"
    return f"{head}: it levels off from {best['loader']}, {held}{moved}"


def gpu_loader_line(row: dict) -> str:
    """One line per `loader_bench.measure_gpu_loaders` row: its rate and spread, its verdict against the ceiling
    (or why it is not a steady rate), its look-ahead, epoch and window, and what NVML saw (notebook 21)."""
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


def smoke_skip_reason(reader_files: bool = True, media: str | None = None) -> str:
    """Why a notebook in smoke mode leaves out what it would extrapolate from that run's rates, and how to get it
    (full mode, or the reader's own videos where `reader_files`). Notebooks 00, 24, 30."""
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


def training_step_lines(r: dict, loader: str, device: str, k: int | None = None) -> list[str]:
    """The lines of `train_step.with_and_without_decoding`: the step and wait with the loader, the step on held
    batches, decoding's cost against the spread, and peak GPU memory; `k` is named beside each rate. Notebook 21."""
    live, held = r["with_loader"], r["held"]

    def step(x):  # one decimal: the cost below is computed from these times, and reads from them
        return (
            f"median step {1e3 * x['step_s']:.1f} ms ± {percent(x['step_spread_pct'])}, {x['samples_per_s']:.1f} "
            + (f"videos/s of {k} frames" if k else "videos/s")
            + " over all the steps"
        )

    drawn, ahead = live.get("skipped_batches") or 0, live.get("lookahead_batches") or 0
    warm = live.get("warmup_batches", drawn - ahead)
    more = drawn - warm - ahead
    clock = (
        f"; its clock started after the first {drawn} batches: {warm} of warm-up, the {ahead} it had decoded ahead"
        + (f" and {more} more until a step waited for it" if more > 0 else "")
        if ahead
        else ""
    )
    lines = [
        f"with {loader} decoding beside it: {step(live)}, waiting for data {100 * live['wait_fraction']:.0f}% of "
        f"the time (over {live['steps']} steps: a step waited {1e3 * live['wait_mean_s']:.1f} ms on average, the "
        f"median one {1e3 * live['wait_s']:.1f} ms{clock})" + (f"; {live['why']}" if live.get("why") else ""),
        f"the same batches decoded beforehand, held on {device}: {step(held)}",
        f"decoding beside the step changes the step's own time by {r['step_cost_pct']:+.1f}%: "
        + (
            f"within the spread of {percent(r['spread_pct'])}, so no cost is measurable here"
            if r["within_spread"]
            else f"more than the spread of {percent(r['spread_pct'])}"
            + (
                ", but faster with the loader, which decoding cannot cause: the two runs differ by more than either's "
                "spread (noise from one run to the next), so no cost of decoding is measurable here"
                if r["step_cost_pct"] < 0
                else ""
            )
        ),
    ]
    if live["peak_mem_mb"] is not None:
        lines.append(
            f"peak GPU memory of a step, above what was held before it: {live['peak_mem_mb']:,.0f} MB with the "
            f"loader, {held['peak_mem_mb']:,.0f} MB on held batches; the model's input is {live['batch_mb']:.1f} MB "
            f"a batch"
            + (f" ({live['batch_videos']} videos as {live['batch_dtype']})" if live.get("batch_dtype") else "")
        )
    return lines


def setting_takeaway(v, setting: str, cores: int, size: str, where: str) -> str:
    """What to do about a decoder setting, from this run's `verdicts.rank` of it against the default (`v`, labels
    starting with the setting's text): set it where it won; where it tied or lost, say so, and where it is known
    to pay (`where`). Notebooks 10 and 12."""
    won = v.best.startswith(setting)
    if v.runner_up is None:
        return f"{setting}: measured alone here, nothing to compare it with"
    if v.tied:
        return (
            f"here ({cores} cores, {size} frames) {setting} bought nothing: tied with the default within the spread. "
            f"It pays {where}; measure it on your frames and cores"
        )
    if won:
        return f"here ({cores} cores, {size} frames) {setting} won by {v.margin_pct:.0f}%, more than the spread: set it"
    return (
        f"here ({cores} cores, {size} frames) {setting} LOST by {v.margin_pct:.0f}%, more than the spread: leave it "
        f"at the default on frames like these. It pays {where}"
    )


def tied_with(v) -> str:
    """' (tied with X: either)' or ' (tied with X and Y: any of them)' after the name of a `verdicts.rank` winner
    that others are tied with by its rule; '' where none is. Notebook 24."""
    others = [v.runner_up, *(t[0] for t in v.also_tied)] if v.tied else []
    if not others:
        return ""
    return f" (tied with {' and '.join(others)}: {'either' if len(others) == 1 else 'any of them'})"


def gop_lesson(short: dict, long: dict, k: int, short_info, long_info, seeks_each: bool | None = None) -> str:
    """What K sampled frames cost on the long-GOP clip against the short-GOP one (two rate-table rows and their
    `VideoInfo`s), and why; `seeks_each`: the recipe seeks to every sample (True), decodes forward (False), or unknown
    (None). Notebooks 10-13."""
    n = long_info.num_frames
    # the keyframe interval: the median GOP but the last, which the clip's end cuts; the median, as a reader's file
    # may have keyframes at scene cuts
    gops = [round(statistics.median(i.gop_lengths[:-1] or i.gop_lengths)) for i in (short_info, long_info)]
    v = rank([("long", long["fps"], long["spread_pct"]), ("short", short["fps"], short["spread_pct"])])
    ratio = short["fps"] / long["fps"]
    verdict = "tied" if v.tied else f"{ratio:.1f}x slower" if ratio > 1 else f"{1 / ratio:.1f}x faster"
    said = (
        f"K={k} on the long GOP (a keyframe every {gops[1]} frames): {long['fps']:,.0f} frames/s against "
        f"{short['fps']:,.0f} on the short one (every {gops[0]}), spread {percent(v.spread_pct)}: {verdict}"
    )
    dense = n / k < gops[1]  # samples closer together than the long GOP's keyframes
    if seeks_each and not (v.tied or ratio < 1):
        return (
            said
            + ", as notebook 01 predicts: this recipe seeks to each sample, which decodes from the keyframe before it"
        )
    if seeks_each is False and dense:  # a forward decoder reads nearly every frame either way
        said += (
            f". This library decodes forward from one sample to the next inside a GOP rather than seeking to each, "
            f"and {k} samples of {n} frames fall every {n / k:.0f} frames, closer than the long GOP's keyframes: "
            "nearly every frame is decoded either way"
        )
        if v.tied or ratio < 1:
            return (
                said
                + (
                    ""
                    if v.tied
                    else " (what made the long GOP faster, fewer keyframes or fewer seeks, is not measured here)"
                )
                + ". The GOP's length costs where samples fall further apart than keyframes (long videos: notebook 20's "
                "sparse section), or with a recipe that seeks to each (notebook 10's)"
            )
        return (
            said + ", so notebook 01's lesson does not explain this; what does (a seek to each sample on this path, a "
            "decoder's cost per GOP) is not measured here"
        )
    if v.tied or ratio < 1:
        return said + ", which notebook 01's lesson (each sample decodes from the keyframe before it) does not predict"
    return said + ", as notebook 01 predicts"


def storage_line(folder, storage: dict) -> str:
    """The line of a `bandwidth.storage_read_bandwidth` result: 'FOLDER: cold 1,366 MB/s by O_DIRECT (page cache
    bypassed), warm 8,478 MB/s; 64 MiB read from a scratch file (removed afterwards)'. Notebooks 00 and 30."""
    return (
        f"{folder}: cold {storage['cold_mb_s']:,.0f} MB/s by {storage['cold_method']}, warm "
        f"{storage['warm_mb_s']:,.0f} MB/s; {storage['read_mib']:,.0f} MiB read from {storage['source']}"
    )


def one_rank_context(fps: float, backend: str, threads: int, k: int, nb21: dict | None, video_dir=None) -> str:
    """Notebook 30: one rank's rate beside notebook 21's one-GPU loader (`nb21`, its JSON), naming what differs
    between the two; a ratio only where nothing does."""
    here = f"one rank here: {backend} x{threads} threads, {fps:,.0f} frames/s of K={k} sampled frames a video"
    rows = (nb21 or {}).get("gpu_sampled") or []
    if not rows:
        why = "did not run into this folder" if nb21 is None else "measured no loader on the GPU (its section 4)"
        return f"{here}; notebook 21 {why}, so nothing on this machine sets it against one GPU's loader alone"
    r = max([r for r in rows if r["backend"] == backend] or rows, key=lambda r: r["frames_per_s"])
    spread = f" ± {percent(r['frames_per_s_spread_pct'])}" if r.get("frames_per_s_spread_pct") is not None else ""
    theirs = nb21.get("video_dir")
    same_files = bool(video_dir and theirs) and os.path.realpath(theirs) == os.path.realpath(video_dir)
    differs = [f"library ({r['backend']})"] if r["backend"] != backend else []
    differs += [f"K ({nb21.get('k')})"] if nb21.get("k") != k else []
    differs += [f"threads ({r['threads']})"] if r["threads"] != threads else []
    if not same_files:
        differs.append(
            f"files (21: {theirs or 'the realistic H.264 and HEVC clips'}; here: {video_dir or 'the H.264 clips'})"
        )
    return (
        f"{here}; notebook 21's section 4, one loader alone on this GPU: {r['loader']}, {r['frames_per_s']:,.0f} "
        f"frames/s{spread}"
        + (
            f"; it differs in {', '.join(differs)}, so read the two side by side, not as a ratio"
            if differs
            else f", the same work: this rank delivers {100 * fps / r['frames_per_s']:.0f}% of it"
        )
    )


MATRIX_OF = {"pynvvideocodec": "notebook 13", "pyav_hwaccel": "notebook 10 (section 6)"}  # where each one's matrix is


def codec_probe_notes(gpu_results: dict, clips: dict) -> list[str]:
    """Notebook 00: a line for each library that did not decode a probe clip exactly on NVDEC
    (`nvdec.codec_matrix`'s result; `clips`: {codec: path}), with its reason or wrong frames."""
    lines = []
    for name, libs in gpu_results.items():
        for lib, r in libs.items():
            if r.get("ok"):
                continue
            if r.get("error") is not None:
                lines.append(f"{name} through {lib}: {str(r['error'])[:240]}")
            else:
                lines.append(
                    f"{name} through {lib}: {r.get('wrong_frames')} of {r.get('frames')} frames were other than asked "
                    f"(a {Path(clips[name]).suffix} file); the correctness matrix of {MATRIX_OF.get(lib, 'its notebook')} "
                    "shows which files this library is trusted with (read_frames refuses the rest)"
                )
    return lines


def gpu_slower_lines(table: list[dict]) -> list[str]:
    """The rows of a library notebook's rate table (`kit.Notebook.rate_table`) where the GPU read slower than the
    CPU beyond the spread, each with what a single caller measures."""
    cpu = {(r["workload"], r["clip"]): r for r in table if r["device"] == "cpu" and r["fps"]}
    lines = []
    for r in table:
        c = cpu.get((r["workload"], r["clip"]))
        if not r["device"].startswith("cuda") or not r["fps"] or c is None or not (r["exact"] and c["exact"]):
            continue
        v = rank([("gpu", r["fps"], r["spread_pct"]), ("cpu", c["fps"], c["spread_pct"])])
        if v.best == "cpu" and not v.tied:
            lines.append(
                f"{r['workload']} on {r['clip']}: the GPU {r['fps']:,.0f} frames/s against the CPU's {c['fps']:,.0f}, "
                f"beyond the spread of {percent(v.spread_pct)}. Each call here opens one decoder for one file: its "
                "time includes opening it and copying the frames out (and, for PyAV's hwaccel, each frame's trip "
                "through host memory), which this table does not separate from decoding; what NVDEC delivers with "
                "many decoders at once is measured in notebooks 20 and 21"
            )
    return lines


def clash_line(outcomes: dict[str, bool]) -> str:
    """What to do about two libraries that load their own FFmpeg into one process, from `outcomes` ({import order:
    every decode worked}). Notebook 12."""
    failed = [o for o, ok in outcomes.items() if not ok]
    apart = "keep them apart: one library per DataLoader worker, or `read_frames_isolated` (a child process)"
    if not outcomes:
        return "no order was tried"
    if not failed:
        return (
            f"every order tried worked here ({len(outcomes)}): the clash did not show with these builds; where the "
            f"two must share a process, try it with yours, or {apart}"
        )
    if len(failed) == len(outcomes):
        return f"every order tried failed here: {apart}"
    return (
        f"{' and '.join(failed)} failed here while {' and '.join(o for o in outcomes if o not in failed)} worked: the "
        f"outcome follows which library loaded its FFmpeg first, which a training script's imports do not pin "
        f"down (any module may import either first), so {apart}"
    )


def light_clip_note(info) -> str:
    """What marks one of the media set's light clips (`media.is_light`): its bitrate against filmed video's
    range at its size (`media.bitrate_class`). Notebook 00."""
    where = bitrate_class(info)
    head = " (light: a smooth synthetic picture that notebook 01 makes"
    if where == "unknown":
        return f"{head}; no typical bitrate to set it against)"
    return f"{head}; its bitrate {where} filmed video's range at this size)"


def sparse_speedup_line(speedups: list[dict], infos: dict, max_frames: int | None = None) -> str | None:
    """Notebook 20's sentence on the speed-ups of asking for 16 frames against decoding every frame (`speedups`
    rows, `infos`: {clip: VideoInfo}), naming where decoding everything was measurably quicker and why; None without
    rows."""
    if not speedups:
        return None
    lo, hi = min(s["speedup"] for s in speedups), max(s["speedup"] for s in speedups)
    slower = [s for s in speedups if s["speedup"] * (1 + s["spread_pct"] / 100) < 1]
    level = [s for s in speedups if s["speedup"] < 1 and s not in slower]
    line = f"asking for 16 ran at {lo:.2f}x to {hi:.2f}x the speed of decoding every frame of these clips"
    if max_frames and any(infos[s["clip"]].num_frames > max_frames for s in speedups):
        line += f" (their first {max_frames} frames)"
    if slower:
        clip = min(s["clip"] for s in slower)
        n = min(infos[clip].num_frames, max_frames or 10**9)
        decoded, gops = gop_pass(uniform(n, 16), infos[clip].keyframes)
        line += (
            f"; below 1x by more than the two rates' spreads, decoding everything was the quicker way for {_on_clips(slower)}: "
            f"in {clip} the 16 frames lie in {gops} GOPs, so asking still decodes {decoded} of the {n} frames, one "
            "seek per GOP besides"
        )
    if level:
        line += f"; below 1x within the spread, no saving and no loss: {_on_clips(level)}"
    return line


def _on_clips(rows: list[dict]) -> str:
    """'decord on a.mp4; torchcodec on a.mp4, b.mp4': each backend of `rows` with its rows' clips, both sorted."""
    clips: dict[str, list[str]] = {}
    for r in rows:
        clips.setdefault(r["backend"], []).append(r["clip"])
    return "; ".join(f"{b} on {', '.join(sorted(clips[b]))}" for b in sorted(clips))
