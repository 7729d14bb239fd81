"""Every frame of a clip to RGB on the CPU: the FFmpeg command line, each library's bare loop and `read_frames`
side by side, so an adapter's cost and its library's limit are both measured (notebook 20)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time

from playbook_utils import child
from playbook_utils.bench import timing
from playbook_utils.bench.verdicts import percent, spread_pct
from playbook_utils.decoders import by_role, check_libraries, child_env, read_frames, video_info, why_unavailable

LIBRARIES = by_role("cpu_anchor")  # the CPU libraries set against the command line
TARGET_PCT = 90  # an adapter should reach this share of the command line where its library can


def _seconds(fn) -> float:
    """The seconds one call of `fn` takes."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cli_rate(path, frames: int, repeats: int = 3, first: int | None = None) -> dict | None:
    """The FFmpeg command line decoding every frame of `path` (or its `first`) to raw RGB on all cores: {'fps'
    (start-up left out), 'fps_with_startup', 'spread_pct', 'startup_s', 'startup_pct', 'version'}; None without it."""
    exe = shutil.which("ffmpeg")
    if exe is None:
        return None

    def run(*limit):
        cmd = [exe, "-v", "error", "-threads", "0", "-i", str(path), *limit, "-f", "rawvideo", "-pix_fmt", "rgb24"]
        subprocess.run([*cmd, "-y", "/dev/null"], check=True, capture_output=True)

    limit = ("-frames:v", str(first)) if first else ()
    run(*limit)  # untimed
    rates = [frames / _seconds(lambda: run(*limit)) for _ in range(repeats)]
    whole, spread = statistics.median(rates), spread_pct(rates)
    startup = statistics.median(_seconds(lambda: run("-frames:v", "0")) for _ in range(3))
    decoding_s = frames / whole - startup
    head = subprocess.run([exe, "-version"], capture_output=True, text=True).stdout.split("\n", 1)[0]
    return {
        "fps": frames / decoding_s if decoding_s > 0 else whole,
        "fps_with_startup": whole,
        "spread_pct": spread,
        "startup_s": startup,
        "startup_pct": 100 * startup * whole / frames,
        "version": " ".join(head.split()[:3]),
    }


def output_cost(frames: int, height: int, width: int, repeats: int = 3) -> float:
    """Seconds to make and fill a fresh (frames, height, width, 3) uint8 array: returning a clip beyond decoding."""
    import numpy as np

    def make():
        a = np.empty((frames, height, width, 3), dtype=np.uint8)
        a.fill(0)
        del a

    make()
    return statistics.median(_seconds(make) for _ in range(repeats))


def _bare_pyav(path: str, n: int):
    """PyAV as a reader would write it, with the adapter's settings: AUTO threads, one preallocated array."""
    import av
    import numpy as np
    import torch

    out = None
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type, stream.thread_count = "AUTO", 0
        for i, frame in enumerate(container.decode(stream)):
            if i == n:
                break
            rgb = frame.to_ndarray(format="rgb24")
            if out is None:
                out = np.empty((n, *rgb.shape), dtype=np.uint8)
            out[i] = rgb
    return torch.from_numpy(out).permute(0, 3, 1, 2)


def _bare_torchcodec(path: str, n: int):
    from torchcodec.decoders import VideoDecoder

    return VideoDecoder(path, num_ffmpeg_threads=0, seek_mode="exact").get_frames_in_range(0, n).data


def _bare_decord(path: str, n: int):
    import decord
    import torch

    batch = decord.VideoReader(path, ctx=decord.cpu(0)).get_batch(list(range(n)))
    return torch.from_dlpack(batch.to_dlpack()).permute(0, 3, 1, 2)


def _bare_spdl(path: str, n: int):
    import spdl.io

    packets = spdl.io.demux_video(path)
    frames = spdl.io.decode_packets(packets, filter_desc=spdl.io.get_video_filter_desc(pix_fmt="rgb24"), num_frames=n)
    return spdl.io.to_torch(spdl.io.convert_frames(frames)).permute(0, 3, 1, 2)


BARE = {"pyav": _bare_pyav, "torchcodec": _bare_torchcodec, "decord": _bare_decord, "spdl": _bare_spdl}


def _child(library: str, path: str, repeats: int, first: int | None = None) -> dict:
    """The bare loop and `read_frames` of one library over every frame (or the `first`), timed alternately, each call
    on another name of the file (`timing.other_names`) so no adapter reuses a cached decoder."""
    info = video_info(path, library)
    n = min(info.num_frames, first) if first else info.num_frames
    idx = list(range(n))
    with tempfile.TemporaryDirectory(prefix="anchor-") as folder:
        names = iter(timing.other_names(path, folder, 2 * repeats + 2, library))
        bare_shape = tuple(BARE[library](next(names), n).shape)
        ours = read_frames(next(names), idx, library)
        # a quarter-turned file: read_frames turns it upright (`frame_size`), the bare loop may not
        upright = (*bare_shape[:2], *bare_shape[:1:-1]) if info.rotation in (90, 270) else bare_shape
        if tuple(ours.shape) not in (bare_shape, upright):
            raise RuntimeError(f"the bare loop gave {bare_shape}, read_frames {tuple(ours.shape)}")
        del ours
        bare, adapter = [], []  # the two calls above were the warm-up
        for _ in range(repeats):  # alternately, so that a drift of the machine falls on both
            one, two = next(names), next(names)
            bare.append(n / _seconds(lambda: BARE[library](one, n)))
            adapter.append(n / _seconds(lambda: read_frames(two, idx, library)))

    return {
        "frames": n,
        "bare_fps": statistics.median(bare),
        "bare_spread_pct": spread_pct(bare),
        "adapter_fps": statistics.median(adapter),
        "adapter_spread_pct": spread_pct(adapter),
    }


def _warm(library: str, path: str) -> dict:
    """A child's warm-up (`child.serve_all`): its library imported and its decoder made, by reading frame 0."""
    return {"shape": list(read_frames(path, [0], library).shape)}


def library_rates(
    path, libraries=LIBRARIES, repeats: int = 3, first: int | None = None, kept: dict | None = None
) -> dict:
    """{library: `_child`'s answer, or 'unavailable' and why}, each library in its own child process
    (`child.serve_all`; `kept`: the harness's warm children). Notebook 20."""
    check_libraries(libraries)  # the import checks side by side
    out = {
        lib: {"status": "unavailable", "error": why} for lib in libraries if (why := why_unavailable(lib, "cpu", path))
    }
    todo = [lib for lib in libraries if lib not in out]
    answers = child.serve_all(
        child.python("-m", "playbook_utils.bench", "--serve"),
        {lib: [{"anchor": [lib, str(path), repeats, first]}] for lib in todo},
        warm={lib: {"warm": {"anchor": [lib, str(path)]}} for lib in todo},
        timeout=600,
        env=child_env(),
        kept=kept,
    )
    return {lib: out[lib] if lib in out else answers[lib][0] for lib in libraries}


STARTUP_MAX_PCT = 25  # a command line spending more of its time starting than this is no anchor for decoding


def is_anchor(cli: dict | None) -> bool:
    """Whether a `cli_rate` result was measured with its start-up at most STARTUP_MAX_PCT of its time."""
    return bool(cli) and cli.get("startup_pct", 0) <= STARTUP_MAX_PCT


def verdicts(rates: dict, cli: dict | None, touch_s: float | None) -> list[str]:
    """Notebook 20's anchor as table lines: per library its `read_frames` and bare-loop rates, the one as a share of
    the other and of the command line, the larger spread, and what holds it back."""
    no_anchor = bool(cli) and not is_anchor(cli)
    lines = []
    if no_anchor:
        lines.append(
            f"the command line spends {cli['startup_pct']:.0f}% of its time starting ({1e3 * cli['startup_s']:.0f} ms): "
            "no anchor on a clip this short, so each library is set against its own bare loop"
        )
    elif cli is None:
        lines.append("no ffmpeg here: each library is set against its own bare loop")
    lines.append(
        f"{'library':12s} {'read_frames':>11s} {'bare loop':>9s} {'of bare':>7s} {'spread':>6s} {'of CLI':>6s}  held back by"
    )
    for lib, r in rates.items():
        if r.get("status") != "ok":
            lines.append(f"{lib:12s} not measured: {r.get('error')}")
            continue
        a, b = r["adapter_fps"], r["bare_fps"]
        spread = max(r.get("adapter_spread_pct") or 0, r.get("bare_spread_pct") or 0)
        pct = None if cli is None or no_anchor else 100 * a / cli["fps"]
        if pct is None:  # against its own bare loop only: a gap inside the spread is none
            gap = 100 * (a / b - 1)
            cause = (
                "nothing measurable" if abs(gap) <= spread else "the adapter" if gap < 0 else "none: read_frames faster"
            )
        elif pct > 100 + max(spread, cli.get("spread_pct") or 0):  # no library decodes faster than FFmpeg itself
            cause = "ABOVE the command line: a measurement is wrong"
        elif pct >= TARGET_PCT:
            cause = "nothing: at the anchor"
        else:
            cause = "the adapter" if 100 * (b / a - 1) > spread else "the library"  # its own loop faster beyond it
            cause += f" (the output array: {100 * touch_s * a / r['frames']:.0f}% of the time)" if touch_s else ""
        of_cli = f"{pct:5.0f}%" if pct is not None else f"{'-':>6s}"
        lines.append(f"{lib:12s} {a:11,.0f} {b:9,.0f} {100 * a / b:6.0f}% {spread:5.1f}% {of_cli}  {cause}")
    return lines


def harness_readable(overhead_pct: float, spread_pct: float | None) -> bool:
    """Whether a harness cost can be read: no row faster than the bare loop beyond the spread (a harness adds work)."""
    return overhead_pct >= -(spread_pct or 0)


def harness_cost(bare: dict, row: dict) -> tuple[dict, str]:
    """(record, sentence): notebook 20's PyAV row (`row`) against PyAV's bare loop (`bare`, from `library_rates`);
    'readable' is False where the row beats the bare loop beyond the spread."""
    overhead = 100 * (bare["bare_fps"] / row["fps"] - 1)
    spread = max(bare.get("bare_spread_pct") or 0, row.get("rate_spread_pct") or 0)
    head = f"the harness: PyAV's bare loop {bare['bare_fps']:,.0f} frames/s, its row here {row['fps']:,.0f}: "
    if abs(overhead) <= spread:
        judged = f"{overhead:+.1f}%, inside the {percent(spread)} spread: no measurable cost"
    elif overhead > 0:
        judged = f"{overhead:+.1f}%, beyond the {percent(spread)} spread: the harness costs that much"
    else:
        faster = 100 * (row["fps"] / bare["bare_fps"] - 1)
        judged = f"the row {faster:.0f}% faster, beyond the {percent(spread)} spread: not readable (conditions moved)"
    record = {
        "bare_fps": bare["bare_fps"],
        "harness_fps": row["fps"],
        "overhead_pct": overhead,
        "spread_pct": spread,
        "readable": harness_readable(overhead, spread),
    }
    return record, head + judged


def table_row(rows: list[dict], library: str, clip: str) -> dict | None:
    """The table's ok row of `library` reading every frame of `clip` on the CPU, or None. Notebook 20."""
    want = (library, "cpu", "sequential", clip)
    ok = (r for r in rows if r.get("status") == "ok")
    return next((r for r in ok if (r["backend"], r["device"], r["workload"], r["clip"]) == want), None)


def harness_costs(rates: dict, rows: list[dict], clip: str) -> tuple[dict, str | None]:
    """Every CPU library's table row against its own bare loop: ({library: {'overhead_pct', 'spread_pct'}},
    sentence or None under two libraries). Notebook 20."""
    costs = {}
    for lib, bare in rates.items():
        row = table_row(rows, lib, clip)
        if bare.get("status") == "ok" and row and row.get("fps"):
            record, _ = harness_cost(bare, row)  # the same cost and spread as PyAV's line
            costs[lib] = {k: record[k] for k in ("overhead_pct", "spread_pct")}
    if len(costs) < 2:
        return costs, None
    apart, widest = _apart(costs)
    listed = ", ".join(
        f"{lib} {c['overhead_pct']:+.0f}%" for lib, c in sorted(costs.items(), key=lambda x: -x[1]["overhead_pct"])
    )
    head = f"each library's row against its own bare loop: {listed}"
    faster = sorted(lib for lib, c in costs.items() if not harness_readable(c["overhead_pct"], c["spread_pct"]))
    if apart > widest:
        return costs, f"{head}: {apart:.0f} points apart, beyond the two widest spreads ({percent(widest)})"
    if faster:
        return costs, f"{head}: {' and '.join(faster)} faster than the bare loop beyond the spread: no cost read"
    return costs, f"{head}: within the two widest spreads ({percent(widest)}) of one another"


def costs_apart(costs: dict) -> float | None:
    """How many points the libraries' harness costs lie apart where beyond the two widest spreads, else None."""
    if len(costs) < 2:
        return None
    apart, widest = _apart(costs)
    return apart if apart > widest else None


def _apart(costs: dict) -> tuple[float, float]:
    """(how many points the costs lie apart, the sum of the two widest spreads): two costs, each as uncertain as
    its spread, can differ by the sum of their spreads from noise alone."""
    values = [c["overhead_pct"] for c in costs.values()]
    return max(values) - min(values), sum(sorted(c["spread_pct"] for c in costs.values())[-2:])


def order_caveat(verdict, costs: dict) -> str | None:
    """The words saying `verdict`'s order of two libraries is not settled (margin under `costs_apart`), else None."""
    apart = costs_apart(costs)
    if apart is None or verdict is None or verdict.tied or verdict.margin_pct is None or verdict.margin_pct >= apart:
        return None
    best, other = verdict.best.split()[0], verdict.runner_up.split()[0]
    if best not in costs or other not in costs:
        return None
    margin = verdict.margin_pct
    return f"order of {best} and {other} not settled: harness costs {apart:.0f} points apart, margin {margin:.0f}%"
