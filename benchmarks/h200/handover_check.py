"""The modules notebook 22 hands over, checked on a GPU machine (issue 56); each step prints a table and writes JSON
under $OUT. Run from the project root after the install, with the reader's folder and the colour clips carried
(`python -m tests.reader_folder .gpu_media/reader` and `media.colour_clips('.gpu_media/colour', smoke=True)` on a
machine with the ffmpeg tool):

    python benchmarks/h200/handover_check.py which     # the README's which-loader command in smoke mode on the
                                                       # folder (relative --video-dir), then the module it hands
                                                       # over: its usage run as printed, one epoch checked
    python benchmarks/h200/handover_check.py colours   # every path's frames of the colour clips, two by two (dB)
    python benchmarks/h200/handover_check.py rates [full] [BACKEND ...]   # each GPU module beside the playbook's loader
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from playbook_utils.bench import media, pixels  # noqa: E402
from playbook_utils.decoders import why_unavailable  # noqa: E402
from tests import reader_folder  # noqa: E402
from tests.unit import test_handover as th  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/out"))
READER = ROOT / ".gpu_media" / "reader"
COLOUR = ROOT / ".gpu_media" / "colour"


def save(name: str, data) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))


def which() -> None:
    work = Path("/tmp/which")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(READER, work / "videos")  # the references travel with it, in hidden folders the scan skips
    began = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "playbook_utils.tools.run_notebooks", "--mode", "smoke", "--pattern", "2[0-2]*",
         "--video-dir", "videos", "--output", "out"], cwd=work, capture_output=True, text=True,
    )  # fmt: skip
    took = time.perf_counter() - began
    (OUT / "which_console.txt").write_text(run.stdout + run.stderr)
    print(run.stdout[-1500:])
    print(f"which-loader command: exit {run.returncode}, {took:.0f} s")
    r22 = json.loads((work / "out" / "22_choosing_a_loader.json").read_text())
    handed, head = r22.get("handed_over") or {}, r22["headline"]
    print(f"recommended: {head['recommended']} ({head['recommended_fps']} frames/s), runner-up {head['runner_up']}, "
          f"margin {head['margin_pct']}% (spread {head['margin_spread_pct']}%)")  # fmt: skip
    print(handed.get("usage") or handed.get("why"))
    result = {"seconds": took, "exit": run.returncode, "headline": head, "handed_over": handed, "epochs": {}}
    paths = sorted(str(p) for p in (work / "videos").rglob("*") if p.is_file() and ".reference" not in p.parts)
    if handed.get("usage"):  # the usage as printed, beside the module written there, on every file of the folder
        script = (
            f"paths, epochs = {paths!r}, 1\nif __name__ == '__main__':\n{textwrap.indent(handed['usage'], '    ')}\n"
        )
        (work / "out" / "train.py").write_text(script)
        pasted = subprocess.run([sys.executable, "train.py"], cwd=work / "out", capture_output=True, text=True)
        print(f"the usage as printed: exit {pasted.returncode} {pasted.stderr[-500:]}")
        result["usage_exit"] = pasted.returncode
    # each leg's module (written by 22) over the files it is given: the route's list, or every file; every frame
    # checked against the ffmpeg tool's, and every readable file read once across the legs
    route = handed.get("route") or {head["recommended"]: paths}
    seen = []
    for leg, files in route.items():
        backend, device = leg.split(" on ")
        path = [str(work / "out"), str(ROOT), os.environ.get("PYTHONPATH")]  # the libraries' install stays on the path
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
        got = subprocess.run([sys.executable, th.__file__, "epoch", backend, device, *files], env=env,
                             capture_output=True, text=True, cwd=work / "out")  # fmt: skip
        if got.returncode:
            print(f"{leg}: the epoch failed: {got.stderr[-1500:]}")
            continue
        e = json.loads(got.stdout.splitlines()[-1])
        right = [n for n in e["seen"] if e["shown_at"][n] == e["want"][n]]
        print(f"{leg}: {len(e['seen'])} of its {len(files)} files read, {len(right)} right against the ffmpeg tool's "
              f"frames (lowest {min(e['low_db'].values(), default=0):.1f} dB), {len(e['skipped'])} skipped:")  # fmt: skip
        for p, why in sorted(e["skipped"].items()):
            print(f"   {Path(p).relative_to(work / 'videos')}: {why[:150]}")
        result["epochs"][leg] = e
        seen += e["seen"]
    readable = [p for p in paths if Path(p).name not in reader_folder.BROKEN]
    once = sorted(seen) == sorted(readable)
    print(f"every readable file read once across the legs: {once} ({len(seen)} reads, {len(readable)} readable files)")
    result["every_readable_once"] = once
    save("which", result)


def colours() -> None:
    clips = media.colour_clips(COLOUR, smoke=True)
    files = [str(p) for p in clips.values()]
    got, paths = (
        {},
        [(b, d) for b, d in th.REFUSED if why_unavailable(b, d) is None and not (b == "dali" and d == "cpu")],
    )
    for b, d in paths:
        th.child("colours", b, d, OUT / f"colour_{b}_{d}.pt", *files)
        import torch

        got[(b, d)] = torch.load(OUT / f"colour_{b}_{d}.pt")
        (OUT / f"colour_{b}_{d}.pt").unlink()
    table = {}
    for a, b in itertools.combinations(got, 2):
        for name, fa, fb in zip(clips, got[a], got[b]):
            if fa is not None and fb is not None:
                table[f"{a[0]}@{a[1]} | {b[0]}@{b[1]} | {name}"] = pixels.psnr(fa, fb)
    for key, db in sorted(table.items(), key=lambda kv: kv[1])[:12]:
        print(f"{db:6.1f} dB  {key}")
    print(f"{len(table)} pairs, lowest {min(table.values()):.1f} dB, paths: {', '.join(f'{b}@{d}' for b, d in got)}")
    save("colours", table)


def rates(full: bool, only: list[str]) -> None:
    """Each module beside the playbook's loader for its path, K = 16 a video at 224: on a GPU the GPU paths (8
    threads, batches of 8), else the CPU paths (a worker per core, batches of 2); `only`: these backends, if named."""
    import torch

    from playbook_utils.bench import loader_bench

    clips = media.realistic_media(smoke=not full, log=print)
    kinds = {"h264": [p for n, p in clips.items() if n.startswith("h264") and ("gop12" in n or "gop30" in n)],
             "hevc open GOP": [p for n, p in clips.items() if "open" in n]}  # fmt: skip
    gpu = torch.cuda.is_available()
    paths = [(b, "cuda") for b in ("torchcodec", "pynvvideocodec", "dali")] if gpu else [
        (b, "cpu") for b in ("pyav", "torchcodec", "decord", "spdl")]  # fmt: skip
    workers, batch = (8, 8) if gpu else (len(os.sched_getaffinity(0)), 2)
    out = []
    for (backend, device), (kind, files) in itertools.product(paths, kinds.items()):
        if why_unavailable(backend, device) or not files or only and backend not in only:
            continue
        r = loader_bench.module_beside_playbook(backend, device, files, 16, workers, batch, "/tmp/epochs", rounds=2)
        r.pop("runs", None)
        out.append({"backend": backend, "device": device, "clips": kind, "files": [Path(f).name for f in files], **r})
        save("rates_gpu" if gpu else "rates_cpu", out)  # after each row: a run stopped by its limit keeps the rest
        if r["status"] != "ok":
            print(f"{backend} on {device}, {kind}: {r}")
            continue
        print(f"{backend:15s} {device:4s} {kind:14s} module {r['module']:7,.0f} frames/s "
              f"(spread {r['module_spread_pct'] or 0:.0f}%)  playbook {r['playbook']:7,.0f} "
              f"({r['playbook_spread_pct'] or 0:.0f}%)  {r['apart_pct']:+.0f}%")  # fmt: skip


if __name__ == "__main__":
    step = sys.argv[1]
    if shutil.which("nvidia-smi"):
        subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    {
        "which": which,
        "colours": colours,
        "rates": lambda: rates("full" in sys.argv[2:], [a for a in sys.argv[2:] if a != "full"]),
    }[step]()
