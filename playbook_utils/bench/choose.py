"""Choosing a loader for the reader's files from what was measured on this machine (notebook 22): coverage,
the decision tree, candidates from notebooks 20 and 21, the recommendation and the code to hand over."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

from playbook_utils import handover, media
from playbook_utils.bench import loader_bench, verdicts
from playbook_utils.bench.loader_bench import realistic_clips, trusted  # noqa: F401 (22 calls it from here)
from playbook_utils.decoders import by_role, check_libraries, traits, why_unavailable

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
    """(group, sentence): the reader's most common kind of file (`groups`), the one the decision is made for. Where
    several kinds are as common, the one with the most pixels per frame is taken (it costs the most to decode,
    so it decides what the loader must keep up with), and the sentence says so."""
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
        same = [g for g in tied if g != group and pixels(g) == pixels(group)]
        why = (
            "the first listed of those with as many pixels per frame (nothing else tells them apart; a folder "
            "of the others alone gets its own answer)"
            if same
            else "the most pixels per frame (the costliest to decode)"
        )
        said += f"; as many are {others}: this one is taken, {why}"
    return group, said


def coverage(paths: dict, devices, backends) -> dict:
    """{(backend, device): {'accepted': n, 'refusals': {name: why}}}: which files each backend would refuse before
    decoding (`decoders.why_unavailable`: library and device here, traits it is known to get wrong, NVDEC's
    limits)."""
    check_libraries(backends)  # the libraries' import checks side by side, not one after another
    out = {}
    for d in devices:
        for b in backends:
            refusals = {n: why for n, p in paths.items() if (why := why_unavailable(b, d, p))}
            out[(b, d)] = {"accepted": len(paths) - len(refusals), "refusals": refusals}
    return out


def table_words(measured, kept: dict) -> str:
    """The source line of notebook 22's table: which of notebook 20's measured clips (`measured`) the decision
    rests on (`kept`, from `realistic_clips`), and how many light synthetic clips were left out."""
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
    """A line where the notebooks in `sources` ({what: its JSON or None}) read clips of another media version
    than `media.MEDIA_VERSION`, so their rates do not quite compare; None where all agree."""
    seen = {
        what: (doc.get("environment") or {}).get("media_version") for what, doc in sources.items() if doc is not None
    }
    other = {what: v for what, v in seen.items() if v != media.MEDIA_VERSION}
    if not other:
        return None
    listed = " and ".join(f"{what} ({'before 4' if v is None else f'version {v}'})" for what, v in other.items())
    return (
        f"{listed} read the generated clips of another media version than this run's ({media.MEDIA_VERSION}): the "
        "same names over other bytes, so the rates set side by side here do not quite compare. Run "
        + ("that notebook" if len(other) == 1 else "those notebooks")
        + " again into this folder for one set"
    )


def decision_tree(rows, clip_info: dict) -> dict:
    """{(device, codec, GOP class, workload): verdict dict}: the fastest frame-exact backend of each measured
    case (`verdicts.rank`), comparing backends on the clips all of them read; 'clips' names them."""
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


def _how_cpu(backend: str, sweep, k: int | None) -> str:
    mine = [x for x in sweep if x["backend"] == backend]
    workers = max(mine, key=lambda x: x["samples_per_s"])["workers"] if mine else "<free cores>"
    return f"loaders.make_loader(paths, backend={backend!r}, num_workers={workers}" + (f", k={k})" if k else ")")


def one_caller_candidates(
    rows, clip_info: dict, group: tuple, workload: str, devices, nb21: dict | None = None
) -> list[dict]:
    """Candidates from notebook 20's one-caller table for `group` and `workload`: one per (backend, device) from
    the nearest measured case, each with rate, spread and the call that builds its loader."""
    codec, _, gopc = group
    ok = [
        r
        for r in rows
        if r.get("status") == "ok"
        and r.get("exact")
        and r["workload"] == workload
        and r["device"] in devices
        and r["clip"] in clip_info
    ]
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
        how = (
            _how_cpu(b, sweep, None)
            if d == "cpu"
            else "loaders.dali_loader(paths)"
            if b == "dali"
            else f"loaders.GpuLoader(paths, backend={b!r}, threads=8)"
        )
        info = clip_info[r["clip"]]
        out.append(
            {
                "backend": b,
                "device": d,
                "fps": r["fps"],
                "spread_pct": r.get("rate_spread_pct"),
                "how": how,
                "source": f"one caller, notebook 20's harness, on {r['clip']} ({info['codec']}, "
                f"{gop_class(info['gop'])})",
            }
        )
    return out


def _sampled_k(nb21: dict, workload: str) -> int | None:
    """Notebook 21's K where `workload` is its 'uniformK' (K sampled frames per video), else None."""
    k = nb21.get("k")
    return k if k and workload == f"uniform{k}" else None


def not_measured(nb21: dict, workload: str) -> str | None:
    """A line naming the CPU libraries notebook 21's worker sweep left unmeasured for `workload`, which
    `loader_candidates` cannot rank; None where none were left or the workload is not its 'uniformK'."""
    measured = {x["backend"] for x in nb21.get("sweep", [])}
    if not _sampled_k(nb21, workload):
        return None
    left = sorted({u["backend"] for u in nb21.get("unmeasured", [])} - measured)
    if not left:
        return None
    gpu = sorted({g["backend"] for g in nb21.get("gpu_sampled", [])})
    who = "the short run's" if nb21.get("short") else "notebook 21's"
    on_gpu = (
        f"; on the GPU only {' and '.join(gpu)} {'are' if len(gpu) > 1 else 'is'} measured as a whole loader (a "
        "GpuLoader of sampled frames)"
        if gpu
        else ""
    )
    return (
        f"not ranked here: {' and '.join(left)} on the CPU, which {who} worker sweep did not measure (its time "
        f"budget was spent first){on_gpu}; section 3's one-caller table shows how the others compare there"
    )


def one_thread_count(nb21: dict, workload: str) -> str | None:
    """A line saying that the GPU loaders of K sampled frames were measured at one thread count only (21 in smoke
    mode, and 22's short run, take 4), so a rate there is no loader's best; None where they were measured at
    several, or at none."""
    counts = sorted({g["threads"] for g in nb21.get("gpu_sampled", [])})
    if not _sampled_k(nb21, workload) or len(counts) != 1:
        return None
    return (
        f"the GPU loaders were measured with {counts[0]} decoding threads only: more threads may deliver more "
        "(notebook 21 in full mode measures several)"
    )


def loader_candidates(nb21: dict, workload: str, codec: str, devices) -> list[dict]:
    """Candidates from notebook 21's whole loaders on this machine for `workload`: the CPU worker sweep and the
    GPU threads for K sampled frames ('uniformK' with 21's K), or the GPU-side loaders of every frame
    ('sequential'); [] where 21 measured nothing for this workload."""
    k, out = _sampled_k(nb21, workload), []
    who = "a short run here" if nb21.get("short") else "notebook 21"  # `loader_bench.short_whole_loaders`
    if k:
        for b in sorted({x["backend"] for x in nb21.get("sweep", [])}):
            w = max((x for x in nb21["sweep"] if x["backend"] == b), key=lambda x: x["samples_per_s"])
            batch = f", batch_size={nb21['batch']}" if nb21.get("batch") else ""
            out.append(
                {
                    "backend": b,
                    "device": "cpu",
                    "fps": k * w["samples_per_s"],
                    "spread_pct": w.get("samples_per_s_spread_pct"),
                    "how": f"loaders.make_loader(paths, backend={b!r}, num_workers={w['workers']}, k={k}{batch})",
                    "source": f"{who}, a DataLoader with {w['workers']} workers",
                    "decoder_threads": w.get("decoder_threads"),
                    "wait_fraction": w.get("wait_fraction"),
                    "step_s": w.get("step_s"),
                }
            )
        for g in nb21.get("gpu_sampled", []):
            out.append(
                {
                    "backend": g["backend"],
                    "device": "cuda",
                    "fps": g["frames_per_s"],
                    "spread_pct": g.get("frames_per_s_spread_pct"),
                    "how": f"loaders.GpuLoader(paths, backend={g['backend']!r}, threads={g['threads']}, "
                    f"strategy='uniform', k={k})",
                    "source": f"{who}, a GpuLoader with {g['threads']} threads",
                }
            )
    elif workload == "sequential":
        gpu = [g for g in nb21.get("gpu_loaders", []) if trusted(g)]  # steady rates, none above the ceiling
        for g in [g for g in gpu if g.get("codec", g["clip"].split("_")[0]) == codec] or gpu:
            if g["kind"] == "dali":
                how = "loaders.dali_loader(paths)"
            elif g.get("processes", 1) > 1:
                how = (
                    f"loaders.GpuProcessLoader(paths, processes={g['processes']}, threads={g['threads']}, "
                    f"backend={g['backend']!r})"
                )
            else:
                how = f"loaders.GpuLoader(paths, backend={g['backend']!r}, threads={g['threads']})"
            out.append(
                {
                    "backend": g["backend"],
                    "device": "cuda",
                    "fps": g["frames_per_s"],
                    "spread_pct": g.get("frames_per_s_spread_pct"),
                    "how": how,
                    "source": f"notebook 21, {g['loader']}",
                }
            )
    return [c for c in out if c["device"] in devices]


def _tied(v: dict) -> set:
    """The labels a verdict (`Verdict.as_dict`) has tied for first: the best, the runner-up and any also tied; none
    where it is not tied."""
    return {v["best"], v["runner_up"], *(t[0] for t in v.get("also_tied") or ())} if v.get("tied") else set()


def against_tree(
    rec: dict | None, tree: dict, group: tuple | None, workload: str, codecs: list | None = None
) -> str | None:
    """The line setting the recommendation beside `decision_tree`'s leaf for the same case: agreement, a tie, or
    by how much each ranking put its winner ahead. None without a recommendation or group, or when it came from the
    tree. Notebook 22."""
    if rec is None or group is None or rec.get("source", "").startswith("one caller"):
        return None
    device = "cuda" if str(rec["device"]).startswith("cuda") else "cpu"
    where = f"{group[0]}, {group[2]}, {workload}, on {'the CPU' if device == 'cpu' else 'the GPU'}"
    leaf = tree.get((device, group[0], group[2], workload))
    if leaf is None:
        return f"the tree above has no leaf for {where}: the whole loaders alone decide"
    tied = _tied(leaf)
    if leaf["best"] == rec["backend"]:
        also = f", tied with {leaf['runner_up']}" if leaf["tied"] else ""
        return f"the tree above agrees: for {where}, {rec['backend']} leads one caller too{also}"
    if rec["backend"] in tied:
        return f"the tree above agrees: for {where}, it has {rec['backend']} tied with {leaf['best']} for one caller"
    v, mine = rec["verdict"], f"{rec['backend']} on {rec['device']}"
    one_caller = (
        f"the tree above puts {leaf['best']} first for {where}, one caller ({leaf['margin_pct']:.0f}% ahead, spread "
        f"{leaf['spread_pct'] or 0:.0f}%)"
    )
    why = (
        "The whole loaders decide: they are what training runs (workers sharing the cores, batches handed over "
        f"between processes), which one caller's rate leaves out ({rec.get('source', 'notebook 21')})"
    )
    if codecs and set(codecs) != {group[0]}:
        why += (
            f"; they read {' and '.join(codecs)} files, this leaf {group[0]} files only, so the two rankings differ "
            "in their files as well"
        )
    if f"{leaf['best']} on {rec['device']}" in _tied(v):
        return f"{one_caller}; as whole loaders it is tied with {rec['backend']}, which the tie rule took. {why}"
    other = v["runner_up"] if v["best"] == mine else v["best"]
    return f"{one_caller}; as whole loaders, {rec['backend']} comes out {v['margin_pct']:.0f}% ahead of {other}. {why}"


def step_bound(candidates: list[dict]) -> str | None:
    """A line saying which CPU candidates waited for data less than half of notebook 21's simulated step, so
    their rates rank how well they keep the step fed, not decoding speed; None otherwise."""
    fed = [c for c in candidates if c.get("wait_fraction") is not None and c["wait_fraction"] < 0.5]
    if not fed:
        return None
    step = fed[0]["step_s"]
    waits = sorted(100 * c["wait_fraction"] for c in fed)
    span = f"{waits[0]:.0f}%" if len(waits) == 1 else f"{waits[0]:.0f}-{waits[-1]:.0f}%"
    return (
        f"the CPU rates were taken at notebook 21's simulated {1e3 * step:.0f} ms training step, and "
        f"{', '.join(c['backend'] for c in fed)} waited for data only {span} of the time: most of each step's time "
        "was the step's own, so these rates rank how long each made the step wait, not how fast each decodes flat "
        "out (21's flat-out line measures that for its best)"
    )


def recommend(candidates: list[dict], cover: dict, n_files: int) -> dict | None:
    """The best of `candidates` by `verdicts.rank` (ties broken by `tie_break`); one that refuses some files wins
    only beyond the spread, with a `fallback` that takes every file. Returns the winner with 'verdict', 'runner_up',
    'fallback' and 'sentence', or None. Notebook 22."""
    for c in candidates:
        c["accepted"] = cover[(c["backend"], c["device"])]["accepted"]
        c["accepts_all"] = c["accepted"] == n_files
    pool: dict = {}
    for c in candidates:
        key = f"{c['backend']} on {c['device']}"
        if key not in pool or c["fps"] > pool[key]["fps"]:
            pool[key] = c
    if not pool:
        return None
    full = {k: c for k, c in pool.items() if c["accepts_all"]}

    # a margin whose spread was not measured (one run each, as in smoke mode) wins nothing: the tie rule decides
    def rank(entries):
        return verdicts.rank(entries, unknown_spread_ties=True)

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
    return {
        **pool[chosen],
        "verdict": v.as_dict(),
        "runner_up": pool.get(other),
        "fallback": fallback,
        "sentence": sentence,
    }


# Tied loaders (the margin inside the spread) are told apart by this rule, in order: the one that takes more of the
# reader's files; then the one that decodes on the GPU (it leaves the host's cores to the rest of the pipeline); then
# the simpler dependency, in this order (PyAV: one wheel with its FFmpeg; decord: unmaintained since 2021, last).
SIMPLER_FIRST = by_role("simpler")


def tie_break(a: dict, b: dict) -> tuple[str, str]:
    """('backend on device', why) of the candidate the tie rule (`SIMPLER_FIRST`'s comment) takes between two
    tied ones (their 'accepted' counts, 'device' and 'backend'); by rate where the rule cannot tell them apart."""

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
    modules = [handover.write(b, d, folder).name for b, d in dict.fromkeys(legs)]
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
    return {**out, "modules": modules, "usage": usage, "k": k, "workers": use[0][2],
            "batch_size": batch, "route": route, "why": None if m else f"K = 16: {workload} samples no K frames"}  # fmt: skip


def settings(rec: dict) -> tuple[int, int]:
    """(DataLoader workers, GPU decoding threads) of a recommended call (`rec['how']`): what it was measured with,
    else every core and 4 threads."""
    w = re.search(r"num_workers=(\d+)", rec["how"])
    t = re.search(r"\bthreads=(\d+)", rec["how"])
    return (int(w.group(1)) if w else len(os.sched_getaffinity(0))), (int(t.group(1)) if t else 4)


def batch_of(rec: dict) -> int | None:
    """The videos per batch of a recommended call (`rec['how']`'s batch_size, as `loader_candidates` writes it
    from notebook 21), or None where it names none."""
    b = re.search(r"batch_size=(\d+)", rec["how"])
    return int(b.group(1)) if b else None


def route_of(rec: dict | None) -> tuple | None:
    """The route ('backend@device' of the recommendation, then of its fallback) where the recommendation refuses
    some files and has a fallback (`route_call`'s backends); None otherwise."""
    fb = (rec or {}).get("fallback")
    return (f"{rec['backend']}@{rec['device']}", f"{fb['backend']}@{fb['device']}") if fb else None


def mix_rate(rec: dict | None, n_files: int) -> float | None:
    """The rate a route would deliver over `n_files`, computed from the two rates measured alone
    (n / (n_fast / fast + n_rest / rest)); None without a fallback."""
    fb = (rec or {}).get("fallback")
    if not fb or not rec.get("fps") or not fb.get("fps") or n_files <= 0:
        return None
    fast, rest = rec["accepted"], n_files - rec["accepted"]
    return n_files / (fast / rec["fps"] + rest / fb["fps"])


def route_report(rec: dict, files: list, workload: str, device: str, folder, measure: bool = True):
    """(lines notebook 22 prints for a route, the route's measurement or None): the call, and its rate measured as
    one loader (`loader_bench.short_route`) or else computed (`mix_rate`). ([], None) without a route."""
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
    lines.append(
        "  that mix is not measured as one loader here"
        + (f" ({ran['why']})" if ran else "")
        + (
            f"; from the two rates measured alone and the share of files each reads ({rec['accepted']} and {rest}), "
            f"it would deliver about {mix:,.0f} frames/s (files of similar length)"
            if mix
            else ""
        )
    )
    return lines, ran


def route_call(rec: dict | None) -> str | None:
    """The recommended call with a backend sequence (recommended path, then fallback) for a route; None without
    a fallback or for a call that takes no backend (DALI)."""
    route = route_of(rec)
    if route is None or "backend=" not in rec["how"]:
        return None
    return re.sub(r"backend='[^']+'", f"backend={route!r}", rec["how"], count=1)
