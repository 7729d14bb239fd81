"""Choosing a loader for the reader's files from what was measured on this machine (notebook 22): coverage,
the decision tree, candidates from notebooks 20 and 21, the recommendation and the code to hand over."""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from operator import attrgetter
from pathlib import Path

from playbook_utils import child, handover
from playbook_utils.bench import loader_bench, media, verdicts
from playbook_utils.bench.loader_bench import realistic_clips, trusted  # noqa: F401 (22 calls it from here)
from playbook_utils.decoders import adapter, by_role, check_libraries, read_frames, traits, video_info, why_unavailable
from playbook_utils.decoders.base import child_env
from playbook_utils.device import Device

GOP_SPLIT = 60  # frames: a GOP up to this long is "short" (cheap random access), longer is "long"


def gop_class(gop) -> str:
    """'short GOP (<= 60)' or 'long GOP (> 60)'."""
    return f"short GOP (<= {GOP_SPLIT})" if (gop or 0) <= GOP_SPLIT else f"long GOP (> {GOP_SPLIT})"


def describe(info) -> dict:
    """What the decision needs to know of one probed file (a `media.VideoInfo`)."""
    return {
        "codec": info.codec,
        "width": info.width,
        "height": info.height,
        "gop": info.gop_lengths[0] if info.gop_lengths else None,
        "traits": sorted(traits(info)),
    }


def groups(profile: dict) -> Counter:
    """How many files of each (codec, 'WxH', GOP class) there are, from {name: `describe(...)`}."""
    return Counter((p["codec"], f"{p['width']}x{p['height']}", gop_class(p["gop"])) for p in profile.values())


def main_group(profile: dict) -> tuple[tuple | None, str]:
    """(group, line): the reader's most common kind of file (`groups`), the one the decision is made for; on a tie
    the one with the most pixels per frame (the costliest to decode), then the first listed."""
    kinds = groups(profile)
    if not kinds:
        return None, "no readable file"
    top = max(kinds.values())
    tied = [g for g, n in kinds.items() if n == top]

    def pixels(g):
        w, h = g[1].split("x")
        return int(w) * int(h)

    group = max(tied, key=pixels)  # the first listed among those of as many pixels
    said = f"your most common kind of file: {' '.join(group)} ({top} files)"
    if len(tied) > 1:
        others = ", ".join(" ".join(g) for g in tied if g != group)
        same = any(g != group and pixels(g) == pixels(group) for g in tied)
        said += f"; as many are {others}: taken as {'the first listed' if same else 'the most pixels per frame'}"
    return group, said


def coverage(paths: dict, devices, backends) -> dict:
    """{(backend, device): {'accepted': n, 'refusals': {name: why}}}: the files each backend refuses before decoding
    (`decoders.why_unavailable`) and, on a GPU, when it reads them (`refused_when_read`). Notebook 22."""
    check_libraries(backends)  # the libraries' import checks side by side, not one after another
    out = {}
    for d in devices:
        for b in backends:
            refusals = {n: why for n, p in paths.items() if (why := why_unavailable(b, d, p))}
            out[(b, d)] = {"accepted": len(paths) - len(refusals), "refusals": refusals}
    for key, refused in refused_when_read(paths, out).items():
        out[key]["refusals"].update(refused)
        out[key]["accepted"] = len(paths) - len(out[key]["refusals"])
    return out


def refused_when_read(paths: dict, cover: dict) -> dict:
    """{(backend, device): {name: why}} on a GPU: frame 0 of one file of each (codec, bit depth), read by each GPU
    backend that accepts it, in child processes side by side. A failure is read again on a second file of that kind:
    where that fails too, or there is none (an AV1 file on an H100's NVDEC), it stands for every file of the kind, here
    and (`learn_refusal`) in every later `why_unavailable`; where it reads, only the first file is refused (a gray
    4:0:0 or a size-changing one among 4:2:0 H.264 files). Notebook 22."""
    kinds = {n: attrgetter("codec", "bit_depth")(video_info(p)) for n, p in paths.items()}
    of_kind = {}  # (backend, device, kind): the names of that kind it accepts beforehand
    for (b, d), c in cover.items():
        if str(d).startswith("cuda"):
            for n in paths:
                if n not in c["refusals"]:
                    of_kind.setdefault((b, d, kinds[n]), []).append(n)

    def read_first(picks: dict) -> dict:  # {(backend, device, kind): name} -> {same key: (name, why or None)}
        jobs = {
            k: child.python("-m", "playbook_utils.bench.choose", str(paths[n]), *map(str, k[:2]))
            for k, n in picks.items()
        }
        answers = child.call_all(jobs, timeout=120, env=child_env()) if jobs else {}
        return {
            k: (picks[k], None if a["status"] == "ok" else a.get("cause") or a["error"]) for k, a in answers.items()
        }

    first = read_first({k: names[0] for k, names in of_kind.items()})
    second = read_first({k: of_kind[k][1] for k, (_, why) in first.items() if why and len(of_kind[k]) > 1})
    out: dict = {}
    for (b, d, kind), (n, why) in first.items():
        if why is None:
            continue
        if (b, d, kind) in second and second[(b, d, kind)][1] is None:  # another file of the kind reads: this one's
            out.setdefault((b, d), {})[n] = f"refused when read on this GPU: {why}"
            continue
        why = f"refused when read ({kind[0]}, {kind[1]}-bit, on this GPU): {why}"
        out.setdefault((b, d), {}).update({m: why for m in paths if kinds[m] == kind})
        adapter(b).learn_refusal(d, *kind, why)  # and so in every later question of this process
    return out


def _read_first(path: str, backend: str, device: str) -> dict:
    """The child of `refused_when_read`: frame 0 of `path` by `backend` on `device`."""
    read_frames(path, [0], backend=backend, device=device)
    return {}


def table_words(measured, kept: dict) -> str:
    """The source line of notebook 22's table: which of notebook 20's `measured` clips the decision rests on
    (`kept`, from `realistic_clips`), and the light synthetic clips left out."""
    measured = set(measured)
    if not measured:
        return "notebook 20's table, which holds no rows"
    used, left = sorted(measured & set(kept)) or sorted(measured), len(measured - set(kept))
    return f"notebook 20's table, on {len(used)} of these files ({', '.join(used)})" + (
        f"; the light synthetic clip{'s' if left > 1 else ''} it also timed left out: light clips decode faster "
        "than filmed video, and not by the same factor for every library"
        if left and set(kept) & measured
        else ""
    )


def media_mismatch(sources: dict) -> str | None:
    """A line where the notebooks in `sources` ({what: its JSON or None}) read clips of another media version than
    `media.MEDIA_VERSION`; None where all agree."""
    seen = {
        what: (doc.get("environment") or {}).get("media_version") for what, doc in sources.items() if doc is not None
    }
    other = {what: v for what, v in seen.items() if v != media.MEDIA_VERSION}
    if not other:
        return None
    listed = " and ".join(f"{what} ({'before 4' if v is None else f'version {v}'})" for what, v in other.items())
    return f"{listed}: clips of another media version than this run's ({media.MEDIA_VERSION}); rerun for one set"


def decision_tree(rows, clip_info: dict) -> dict:
    """{(device, codec, GOP class, workload): verdict dict}: the fastest frame-exact backend of each measured case
    (`verdicts.rank`) on the clips all backends read, named in 'clips'."""
    cases: dict = {}
    for r in rows:
        info = clip_info.get(r["clip"])
        if info and r.get("status") == "ok" and r.get("exact"):
            key = (r["device"], info["codec"], gop_class(info["gop"]), r["workload"])
            cases.setdefault(key, []).append(r)
    out = {}
    for key, rs in sorted(cases.items()):
        by_backend: dict = {}
        for r in rs:
            by_backend.setdefault(r["backend"], []).append(r)
        common = set.intersection(*({r["clip"] for r in mine} for mine in by_backend.values()))
        entries = []
        for b, mine in by_backend.items():
            mine = [r for r in mine if r["clip"] in common] or mine  # no clip in common: each its own
            spreads = [r["rate_spread_pct"] for r in mine if r.get("rate_spread_pct") is not None]
            entries.append((b, sum(r["fps"] for r in mine) / len(mine), max(spreads) if spreads else None))
        clips = sorted(common) or sorted({r["clip"] for r in rs})
        out[key] = {**verdicts.rank(entries).as_dict(), "clips": clips}
    return out


def _candidate(backend: str, device: str, fps: float, spread_pct, how: str, source: str, **more) -> dict:
    """One candidate loader as `recommend` takes it: its rate and spread, the call that builds it, where measured."""
    return dict(backend=backend, device=device, fps=fps, spread_pct=spread_pct, how=how, source=source, **more)


def one_caller_candidates(
    rows, clip_info: dict, group: tuple, workload: str, devices, nb21: dict | None = None
) -> list[dict]:
    """Candidates from notebook 20's one-caller table for `group` and `workload`: one per (backend, device) from
    the nearest measured case; its call takes the CPU workers notebook 21's sweep found best, else 8 GPU threads."""
    codec, _, gopc = group
    ok = [r for r in rows if r.get("status") == "ok" and r.get("exact") and r["clip"] in clip_info]
    ok = [r for r in ok if r["workload"] == workload and r["device"] in devices]
    for match in (
        lambda i: i["codec"] == codec and gop_class(i["gop"]) == gopc,
        lambda i: i["codec"] == codec,
        lambda i: True,
    ):
        near = [r for r in ok if match(clip_info[r["clip"]])]
        if near:
            break
    best: dict = {}
    for r in near:
        key = (r["backend"], r["device"])
        if key not in best or r["fps"] > best[key]["fps"]:
            best[key] = r
    sweep = (nb21 or {}).get("sweep", [])
    out = []
    for (b, d), r in best.items():
        if d == "cpu":
            mine = [x for x in sweep if x["backend"] == b]
            workers = max(mine, key=lambda x: x["samples_per_s"])["workers"] if mine else "<free cores>"
            how = f"loaders.make_loader(paths, backend={b!r}, num_workers={workers})"
        else:
            how = "loaders.dali_loader(paths)" if b == "dali" else f"loaders.GpuLoader(paths, backend={b!r}, threads=8)"
        info = clip_info[r["clip"]]
        source = f"one caller, notebook 20's harness, on {r['clip']} ({info['codec']}, {gop_class(info['gop'])})"
        out.append(_candidate(b, d, r["fps"], r.get("rate_spread_pct"), how, source))
    return out


def _sampled_k(nb21: dict, workload: str) -> int | None:
    """Notebook 21's K where `workload` is its 'uniformK' (K sampled frames per video), else None."""
    k = nb21.get("k")
    return k if k and workload == f"uniform{k}" else None


def unmeasured(nb21: dict, workload: str) -> list[str]:
    """The CPU libraries notebook 21's worker sweep left unmeasured for `workload` (its time budget spent first).
    Notebook 22."""
    if not _sampled_k(nb21, workload):
        return []
    measured = {x["backend"] for x in nb21.get("sweep", [])}
    return sorted({u["backend"] for u in nb21.get("unmeasured", [])} - measured)


def loader_candidates(nb21: dict, workload: str, codec: str, devices) -> list[dict]:
    """Candidates from notebook 21's whole loaders on this machine for `workload`: the CPU worker sweep and the
    GPU threads for 'uniformK' (21's K), or the GPU-side loaders for 'sequential'; [] where 21 measured neither."""
    k, out, gpu = _sampled_k(nb21, workload), [], []  # gpu: (21's row, its call, where measured)
    who = "a short run here" if nb21.get("short") else "notebook 21"  # `loader_bench.short_whole_loaders`
    if k:
        batch = f", batch_size={nb21['batch']}" if nb21.get("batch") else ""
        for b in sorted({x["backend"] for x in nb21.get("sweep", [])}):
            w = max((x for x in nb21["sweep"] if x["backend"] == b), key=lambda x: x["samples_per_s"])
            how = f"loaders.make_loader(paths, backend={b!r}, num_workers={w['workers']}, k={k}{batch})"
            source = f"{who}, a DataLoader with {w['workers']} workers"
            more = {key: w.get(key) for key in ("decoder_threads", "wait_fraction", "step_s")}
            out.append(
                _candidate(b, "cpu", k * w["samples_per_s"], w.get("samples_per_s_spread_pct"), how, source, **more)
            )
        for g in nb21.get("gpu_sampled", []):
            how = (
                f"loaders.GpuLoader(paths, backend={g['backend']!r}, threads={g['threads']}, strategy='uniform', k={k})"
            )
            gpu.append((g, how, f"{who}, a GpuLoader with {g['threads']} threads"))
    elif workload == "sequential":
        rows = [g for g in nb21.get("gpu_loaders", []) if trusted(g)]  # steady rates, none above the ceiling
        for g in [g for g in rows if g.get("codec", g["clip"].split("_")[0]) == codec] or rows:
            if g["kind"] == "dali":
                how = "loaders.dali_loader(paths)"
            elif g.get("processes", 1) > 1:
                how = (
                    f"loaders.GpuProcessLoader(paths, processes={g['processes']}, threads={g['threads']}, "
                    f"backend={g['backend']!r})"
                )
            else:
                how = f"loaders.GpuLoader(paths, backend={g['backend']!r}, threads={g['threads']})"
            gpu.append((g, how, f"notebook 21, {g['loader']}"))
    for g, how, source in gpu:
        out.append(_candidate(g["backend"], "cuda", g["frames_per_s"], g.get("frames_per_s_spread_pct"), how, source))
    return [c for c in out if c["device"] in devices]


def tree_leaf(rec: dict | None, tree: dict, group: tuple | None, workload: str) -> dict | None:
    """`decision_tree`'s leaf for the recommendation's device, the main group's codec and GOP, and `workload`, or
    None. Notebook 22."""
    if rec is None or group is None:
        return None
    return tree.get((Device.parse(rec["device"]).kind, group[0], group[2], workload))


def recommend(candidates: list[dict], cover: dict, n_files: int) -> dict | None:
    """The best of `candidates` by `verdicts.rank` (ties broken by `tie_break`); one that refuses some files wins
    only beyond the spread, with a `fallback` that takes every file. Returns the winner with 'verdict', 'runner_up',
    'fallback' and 'sentence', or None. Notebook 22."""
    pool: dict = {}
    for c in candidates:
        c["accepted"] = cover[(c["backend"], c["device"])]["accepted"]
        c["accepts_all"] = c["accepted"] == n_files
        key = f"{c['backend']} on {c['device']}"
        if key not in pool or c["fps"] > pool[key]["fps"]:
            pool[key] = c
    if not pool:
        return None
    full = {k: c for k, c in pool.items() if c["accepts_all"]}
    # a margin whose spread was not measured (one run each, as in smoke mode) wins nothing: the tie rule decides
    rank = functools.partial(verdicts.rank, unknown_spread_ties=True)
    v = rank((key, c["fps"], c["spread_pct"]) for key, c in pool.items())
    fallback = None
    if not pool[v.best]["accepts_all"] and full:
        f = rank((key, c["fps"], c["spread_pct"]) for key, c in full.items())
        vs = rank(
            [(v.best, v.best_value, pool[v.best]["spread_pct"]), (f.best, f.best_value, full[f.best]["spread_pct"])]
        )
        if vs.tied:  # not clearly faster than a loader that takes every file: the tie rule takes that one
            v = vs
        else:
            fallback = full[f.best]
    sentence, chosen = v.sentence(what="the best choice"), v.best
    tied = [k for k in (v.runner_up, *(t[0] for t in v.also_tied)) if k in pool] if v.tied else []
    why = None
    for k in tied:  # the tie rule over every candidate tied with the fastest, not the first two alone
        winner, reason = tie_break(pool[chosen], pool[k])
        if winner != chosen or why is None:
            why = reason
        chosen = winner
    if tied:
        sentence += f"; {chosen} is taken by the tie rule: {why}"
    # the runner-up: the fastest of the others (the fastest of all, where the tie rule took another)
    other = v.best if chosen != v.best else v.runner_up
    verdict = v.as_dict()
    if chosen not in (v.best, v.runner_up):  # the tie rule took one further down: the margin is the fastest's over it
        margin = 100 * (v.best_value / pool[chosen]["fps"] - 1)
        verdict.update(runner_up=chosen, runner_up_value=pool[chosen]["fps"], margin_pct=margin)
    return {
        **pool[chosen],
        "verdict": verdict,
        "runner_up": pool.get(other),
        "fallback": fallback,
        "sentence": sentence,
    }


# Tied loaders (the margin inside the spread) are told apart by this rule, in order: the one that takes more of the
# reader's files; then the one that decodes on the GPU (it leaves the host's cores to the rest of the pipeline); then
# the simpler dependency, in this order (PyAV: one wheel with its FFmpeg; decord: unmaintained since 2021, last).
SIMPLER_FIRST = by_role("simpler")


def tie_break(a: dict, b: dict) -> tuple[str, str]:
    """('backend on device', why) of the candidate the tie rule (`SIMPLER_FIRST`'s comment) takes between two tied
    ones; by rate where the rule cannot tell them apart."""

    def label(c):
        return f"{c['backend']} on {c['device']}"

    def simple(c):
        return SIMPLER_FIRST.index(c["backend"]) if c["backend"] in SIMPLER_FIRST else len(SIMPLER_FIRST)

    if a.get("accepted") != b.get("accepted"):
        win, lose = (a, b) if (a.get("accepted") or 0) > (b.get("accepted") or 0) else (b, a)
        return label(win), f"it takes more of your files ({win['accepted']} against {lose['accepted']})"
    if (a["device"] == "cpu") != (b["device"] == "cpu"):
        win = a if a["device"] != "cpu" else b
        return label(win), "it decodes on the GPU, leaving the CPU cores to the rest of the pipeline"
    if simple(a) != simple(b):
        win = a if simple(a) < simple(b) else b
        return label(win), f"the simpler dependency (in the order {', '.join(SIMPLER_FIRST)})"
    win = a if a["fps"] >= b["fps"] else b
    return label(win), "nothing else tells them apart: the higher rate"


def hand_over(rec: dict | None, workload: str, folder, files=()) -> dict:
    """Write the recommended path's module (`handover`) into `folder` (both legs and `22_route.json` for a route).
    Returns {'modules', 'usage', 'k', 'workers', 'batch_size', 'route', 'why'}. Notebook 22."""
    out = {"modules": [], "usage": None, "k": None, "workers": None, "batch_size": None, "route": None, "why": None}
    if rec is None:
        return {**out, "why": "no recommendation"}
    m = re.fullmatch(r"uniform(\d+)", workload)
    k = int(m.group(1)) if m else 16
    workers, threads = settings(rec)
    batch = batch_of(rec) or 8
    legs = [(rec["backend"], rec["device"])]
    if rec.get("fallback"):
        legs.append((rec["fallback"]["backend"], rec["fallback"]["device"]))
    missing = [f"{b} on {d}" for b, d in legs if handover.module(b, d) is None]
    if missing:
        return {**out, "why": f"no module for {', '.join(missing)}: use the playbook's call above"}
    modules = list(dict.fromkeys(handover.write(b, d, folder).name for b, d in legs))  # one file may serve both legs
    use = [(b, d, threads if str(d).startswith("cuda") else workers) for b, d in legs]
    usage = handover.usage(*use[0][:2], k=k, workers=use[0][2], batch_size=batch)
    route = None
    if len(legs) > 1:
        first, rest = [], []
        for f in map(str, files):
            (first if why_unavailable(rec["backend"], rec["device"], f) is None else rest).append(f)
        route = {f"{b} on {d}": fs for (b, d), fs in zip(legs, (first, rest))}
        Path(folder, "22_route.json").write_text(json.dumps(route, indent=1))
        usage = handover.route_usage(use, k=k, batch_size=batch)
    if not m:  # said in the code itself, which is what a reader copies
        usage = (
            f"# the module reads K evenly spaced frames of each video, not {workload}: k=16 here, set yours\n{usage}"
        )
    return {**out, "modules": modules, "usage": usage, "k": k, "workers": use[0][2],
            "batch_size": batch, "route": route, "why": None if m else f"K = 16: {workload} samples no K frames"}  # fmt: skip


def settings(rec: dict) -> tuple[int, int]:
    """(DataLoader workers, GPU decoding threads) of a recommended call (`rec['how']`), else every core and 4."""
    w = re.search(r"num_workers=(\d+)", rec["how"])
    t = re.search(r"\bthreads=(\d+)", rec["how"])
    return (int(w.group(1)) if w else len(os.sched_getaffinity(0))), (int(t.group(1)) if t else 4)


def batch_of(rec: dict) -> int | None:
    """The batch_size of a recommended call (`rec['how']`), or None where it names none."""
    b = re.search(r"batch_size=(\d+)", rec["how"])
    return int(b.group(1)) if b else None


def route_of(rec: dict | None) -> tuple | None:
    """('backend@device' of the recommendation, then of its fallback) where it has a fallback, else None."""
    fb = (rec or {}).get("fallback")
    return (f"{rec['backend']}@{rec['device']}", f"{fb['backend']}@{fb['device']}") if fb else None


def mix_rate(rec: dict | None, n_files: int) -> float | None:
    """A route's rate over `n_files` computed from the two rates measured alone; None without a fallback."""
    fb = (rec or {}).get("fallback")
    if not fb or not rec.get("fps") or not fb.get("fps") or n_files <= 0:
        return None
    fast, rest = rec["accepted"], n_files - rec["accepted"]
    return n_files / (fast / rec["fps"] + rest / fb["fps"])


def route_report(rec: dict, files: list, workload: str, device: str, folder, measure: bool = True):
    """(lines notebook 22 prints for a route, its measurement or None): the call, its rate measured as one loader
    (`loader_bench.short_route`) or else computed (`mix_rate`). ([], None) without a route."""
    call = route_call(rec)
    if call is None:
        return [], None
    lines = ["  or both in one loader, each file read by the first that takes it (a route):", f"    {call}"]
    m, ran = re.fullmatch(r"uniform(\d+)", workload), None
    if measure and m:  # the mix measured as one loader, short
        workers, threads = settings(rec)
        ran = loader_bench.short_route(route_of(rec), files, int(m.group(1)), device, folder, workers, threads)
    if ran and ran["status"] == "ok":
        spread = "" if ran["spread_pct"] is None else f" (spread {ran['spread_pct']:.0f}%)"
        lines.append(
            f"  measured here as one loader, short: {ran['frames_per_s']:,.0f} frames/s{spread}, files read by "
            + ", ".join(f"{e} {n}" for e, n in ran["read_by"].items())
        )
        return lines, ran
    mix, rest = mix_rate(rec, len(files)), len(files) - rec["accepted"]
    computed = f"; computed from the two rates and files read ({rec['accepted']} and {rest}): ~{mix:,.0f} frames/s"
    lines.append("  not measured as one loader here" + (f" ({ran['why']})" if ran else "") + (computed if mix else ""))
    return lines, ran


def route_call(rec: dict | None) -> str | None:
    """The recommended call with the route's backends (`route_of`); None without one, or for DALI's call."""
    route = route_of(rec)
    if route is None or "backend=" not in rec["how"]:
        return None
    return re.sub(r"backend='[^']+'", f"backend={route!r}", rec["how"], count=1)


def candidates_for(out, video_dir, videos: dict, workload: str, group, devices, device, ok, clip_info, short_run=True,
                   log=print) -> dict:  # fmt: skip
    """Notebook 22's candidates for `workload`: notebook 21's whole loaders where it measured these files into `out`,
    else a short run of them here (`short_run`, 'uniformK'), else the one-caller table `ok`. Returns {'candidates',
    'source', 'when' (21's run date), 'nb21' (the record read or made), 'unmeasured' (`unmeasured`)}."""
    path = Path(out) / "21_training_loader_benchmarks.json"
    nb21 = json.loads(path.read_text()) if path.exists() else {}
    same = nb21.get("video_dir", "not recorded") == video_dir
    if group and same and (found := loader_candidates(nb21, workload, group[0], devices)):
        where = "these files" if video_dir else "the media set's realistic clips"
        when = (nb21.get("environment") or {}).get("date_utc", "at a time not recorded")
        return {"candidates": found, "source": f"notebook 21: whole loaders on {where}", "when": when, "nb21": nb21,
                "unmeasured": unmeasured(nb21, workload)}  # fmt: skip
    if nb21 and not same:
        log("notebook 21 measured other files than these: its loaders are left out")
    if group and short_run and workload.startswith("uniform"):
        k = int(workload[len("uniform") :])
        log(f"a short run of notebook 21's whole loaders here, K = {k} (21's smoke settings: indicative rates)")
        nb21 = loader_bench.short_whole_loaders(list(videos.values()), k, device, Path(out) / "22_epoch", ok)
        same = True
        if found := loader_candidates(nb21, workload, group[0], devices):
            source = "a short run of notebook 21's whole loaders here, on these files"
            return {"candidates": found, "source": source, "when": None, "nb21": nb21,
                    "unmeasured": unmeasured(nb21, workload)}  # fmt: skip
    found = one_caller_candidates(ok, clip_info, group, workload, devices, nb21 if same else None) if group else []
    return {"candidates": found, "source": "the one-caller table of section 3", "when": None, "nb21": nb21,
            "unmeasured": []}  # fmt: skip


if __name__ == "__main__":  # the child of `refused_when_read`: its failure is reported as data
    import sys

    child.reply(_read_first, *sys.argv[1:4])
