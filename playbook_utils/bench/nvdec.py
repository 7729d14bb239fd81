"""Which codecs this GPU's NVDEC engines decode, found by decoding stamped clips in a child process (notebook 00),
and the engines' ceiling in frames per second (notebook 20).

    python -m playbook_utils.bench.nvdec LIBRARY PATH   (the child of `decode_check`)"""

from __future__ import annotations

import queue
import sys
import time

from playbook_utils import child, env
from playbook_utils.bench.monitor import MIN_SAMPLES
from playbook_utils.bench.verdicts import spread_pct
from playbook_utils.decoders import by_role, why_unavailable
from playbook_utils.errors import describe
from playbook_utils.bench.media import read_stamps
from playbook_utils.probe import video_info

CHECK_LIBRARIES = ("pynvvideocodec", "pyav_hwaccel")


def _decode_pynvvideocodec(path: str):
    import PyNvVideoCodec as nvc
    import torch

    dec = nvc.SimpleDecoder(path, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGBP)
    tensors = []
    # Decoded frames borrow the decoder's surfaces: copy each one out before asking for more.
    for start in range(0, len(dec), 8):
        batch = dec.get_batch_frames_by_index(list(range(start, min(start + 8, len(dec)))))
        tensors += [torch.from_dlpack(f).clone() for f in batch]
    if tensors and not tensors[0].is_cuda:
        raise RuntimeError(f"frames came back on {tensors[0].device}, not on the GPU")
    return tensors, "decoded by NVDEC through PyNvVideoCodec"


def _decode_pyav_hwaccel(path: str):
    import av
    from av.codec.hwaccel import HWAccel

    hw = HWAccel(device_type="cuda", allow_software_fallback=False)
    with av.open(path, hwaccel=hw) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        if not stream.codec_context.is_hwaccel:
            raise RuntimeError("PyAV decoded in software: the hardware path was not used")
    return frames, "decoded through FFmpeg's CUDA hwaccel (NVDEC), frames copied to the host"


def _child(library: str, path: str) -> dict:
    start = time.perf_counter()
    decode = {"pynvvideocodec": _decode_pynvvideocodec, "pyav_hwaccel": _decode_pyav_hwaccel}[library]
    frames, how = decode(path)
    seconds = time.perf_counter() - start
    wrong = sum(stamp != i for i, stamp in enumerate(read_stamps(frames)))  # None: no valid stamp
    return {
        "ok": len(frames) > 0 and wrong == 0,
        "frames": len(frames),
        "wrong_frames": wrong,
        "seconds": round(seconds, 3),
        "how": how,
    }


def decode_check(library: str, path, timeout: float = 120) -> dict:
    """Decode `path` on the GPU with `library` in a child process. Returns {'ok' (every stamp right), 'frames',
    'wrong_frames', 'seconds' (with start-up), 'how', 'error', 'status' (`child.OUTCOMES`)}. Notebook 00."""
    found = child.call(child.python("-m", "playbook_utils.bench.nvdec", library, str(path)), timeout=timeout)
    return {"ok": False, **found} if found["status"] != "ok" else found


def codec_matrix(clips: dict, libraries=CHECK_LIBRARIES, timeout: float = 120) -> dict:
    """{codec: {library: `decode_check` result}} for clips given as {codec: path}."""
    return {codec: {lib: decode_check(lib, path, timeout) for lib in libraries} for codec, path in clips.items()}


# --------------------------------------------------------------------------- the engines' ceiling


DECODERS = by_role("raw_nvdec")  # the libraries whose raw NVDEC decode the ceiling takes the best of


WINDOW_BINS = 6  # equal parts of a saturation window, each counted apart: the spread of the rate within the window


def _spread_into(bins: tuple, a: float, b: float, n: float) -> None:
    """Add `n` frames decoded evenly over [a, b] to `bins` ((t0, width, counts): counts[i] covers
    [t0 + i * width, t0 + (i + 1) * width]), each part by its overlap."""
    if b <= a:
        return
    t0, width, counts = bins
    for i in range(len(counts)):
        lo, hi = max(a, t0 + i * width), min(b, t0 + (i + 1) * width)
        if hi > lo:
            counts[i] += n * (hi - lo) / (b - a)


def _frames_before(t_end: float, chunks, spans: list | None = None) -> float:
    """The frames of `chunks` (one chunk decoded per step, yielding its frame count) decoded before `t_end`; the
    chunk still decoding at `t_end` counts only its share of frames. `spans` gets (start, end, frames) per chunk."""
    t = time.perf_counter()
    if t >= t_end:
        return 0.0
    frames = 0.0
    for n in chunks:  # the chunk is decoded inside this step
        now = time.perf_counter()
        if now >= t_end:
            inside = n * (t_end - t) / (now - t) if now > t else 0.0
            if spans is not None:
                spans.append((t, t_end, inside))
            return frames + inside
        if spans is not None:
            spans.append((t, now, n))
        frames, t = frames + n, now
    return frames


def _pynvvideocodec_passes(path: str, gpu: int):
    """`one_pass(t_end)`: one pass of a PyNvVideoCodec decoder (created once, reused; NV12 left in GPU memory),
    returning the frames decoded before `t_end`."""
    import PyNvVideoCodec as nvc

    demuxer = nvc.CreateDemuxer(path)
    decoder = nvc.CreateDecoder(
        gpuid=gpu, codec=demuxer.GetNvCodecId(), cudacontext=0, cudastream=0, usedevicememory=True
    )

    def chunks():
        for packet in nvc.CreateDemuxer(path):
            yield len(decoder.Decode(packet))
        yield len(decoder.Decode(nvc.PacketData()))  # end of stream: flush

    def one_pass(t_end: float, spans: list | None = None) -> float:
        return _frames_before(t_end, chunks(), spans)

    return one_pass


def _torchcodec_passes(path: str, gpu: int):
    """The same for TorchCodec's CUDA decoder (FFmpeg's NVDEC path, RGB out): a new `VideoDecoder` per pass, as a
    loader opens each file, reading chunks of 32 frames in order."""
    from torchcodec.decoders import VideoDecoder

    def one_pass(t_end: float, spans: list | None = None) -> float:
        dec = VideoDecoder(path, device=f"cuda:{gpu}", seek_mode="approximate")
        n, m = dec.metadata.num_frames, _torchcodec_chunk(dec.metadata.width, dec.metadata.height)
        chunks = (dec.get_frames_in_range(a, min(a + m, n)).data.shape[0] for a in range(0, n, m))
        return _frames_before(t_end, chunks, spans)

    return one_pass


def _torchcodec_chunk(width: int, height: int) -> int:
    """Frames per TorchCodec call: 32, as the loaders read, or fewer where 32 RGB frames would pass 32 of 1080p."""
    return max(1, min(32, 32 * 1920 * 1088 // (width * height)))


CONTEXT_BYTES = 768 * 2**20  # a decoding process's CUDA context and libraries (610 MiB seen on an H100)


def _run_bytes(path, processes: int, threads: int, decoder: str) -> int:
    """The GPU memory one `saturate` run of `path` takes, estimated from its frame size: each process's context, and
    each decoder's output (TorchCodec: a call's RGB frames) and NVDEC surfaces."""
    info = video_info(path)  # cached: asked again for every batch of runs
    frame = info.width * info.height
    if decoder == "torchcodec":
        per = (_torchcodec_chunk(info.width, info.height) + 4) * frame * 3
    else:
        per = 36 * frame * 3 // 2
    return processes * (CONTEXT_BYTES + threads * per)


def _free_bytes(gpu: int) -> int | None:
    """The GPU memory NVML reports free, or None where it cannot say."""
    nvml = env.nvml_handle(gpu)
    memory = env._nvml_call(nvml[0].nvmlDeviceGetMemoryInfo, nvml[1]) if nvml else None
    return int(memory.free) if memory else None


def _raw_thread(decoder: str, path: str, gpu: int, ready, start, window: list, out: list, slot: int) -> None:
    """One decoder: decode a warm-up pass, release `ready`, wait for `start`, then decode `path` over and over inside
    `window` (t0, t_end), counting its frames in total and per WINDOW_BINS part: out[slot] = (frames, parts) or error."""
    try:
        one_pass = {"pynvvideocodec": _pynvvideocodec_passes, "torchcodec": _torchcodec_passes}[decoder](path, gpu)
        one_pass(float("inf"))
    except Exception as e:
        out[slot] = describe(e)[:300]
        return
    finally:
        ready.release()
    start.wait()
    (t0, t_end), frames, spans = window, 0.0, []
    try:
        while time.perf_counter() < t_end:
            frames += one_pass(t_end, spans)
    except Exception as e:
        out[slot] = describe(e)[:300]
        return
    bins = (t0, (t_end - t0) / WINDOW_BINS, [0.0] * WINDOW_BINS)
    for a, b, n in spans:  # each chunk's frames by the parts of the window it spans, now that the window is over
        _spread_into(bins, a, b, n)
    out[slot] = (frames, bins[2])


def _raw_process(decoder: str, path: str, gpu: int, threads: int, seconds: float, ready, go, queue) -> None:
    """`threads` warmed-up decoders in this process: it reports at the `ready` barrier once every one has decoded
    its warm-up pass, then waits for `go` (the processes of one run start their window together)."""
    import threading

    warmed, start, window = threading.Semaphore(0), threading.Event(), [0.0, 0.0]
    counts: list = [0] * threads
    workers = [
        threading.Thread(target=_raw_thread, args=(decoder, path, gpu, warmed, start, window, counts, k))
        for k in range(threads)
    ]
    for w in workers:
        w.start()
    for _ in workers:
        warmed.acquire()  # every decoder created and warmed up before the clock starts
    try:
        ready.wait()
    except Exception:  # the parent gave up on this run (a broken barrier): nothing to measure
        start.set()
        return
    go.wait()
    window[0] = time.perf_counter()
    window[1] = window[0] + seconds
    start.set()
    for w in workers:
        w.join()
    errors = [c for c in counts if isinstance(c, str)]
    done = [c for c in counts if isinstance(c, tuple)]
    bins = [sum(b[i] for _, b in done) for i in range(WINDOW_BINS)]
    queue.put({"frames": sum(f for f, _ in done), "bins": bins, "error": errors[0] if errors else None})


READY_TIMEOUT_S = 180  # a run whose decoders are not all warmed up by then fails ('did not start')


def _start(path, processes: int, threads: int, seconds: float, gpu: int, decoder: str) -> dict:
    """Start the `processes` of one `saturate` run; they make and warm up their decoders, then wait (`_ready`, then
    `saturate`'s go). Several runs can start side by side (`ceiling`), so their start-ups overlap."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    run = {"queue": ctx.Queue(), "ready": ctx.Barrier(processes + 1), "go": ctx.Event(), "warmed": None}
    args = (decoder, str(path), gpu, threads, seconds, run["ready"], run["go"], run["queue"])
    run["children"] = [ctx.Process(target=_raw_process, args=args, daemon=True) for _ in range(processes)]
    for c in run["children"]:
        c.start()
    return run


def _ready(run: dict, timeout: float = READY_TIMEOUT_S) -> bool:
    """Wait until every process of a started run has warmed up its decoders (once; later calls return at once)."""
    if run["warmed"] is None:
        try:
            run["ready"].wait(timeout=timeout)
            run["warmed"] = True
        except Exception:
            run["warmed"] = False
            for c in run["children"]:
                c.kill()
    return run["warmed"]


def _row(processes: int, threads: int, decoder: str, seconds: float, error: str | None) -> dict:
    """A `saturate` row with nothing measured: every key of a measured one, None (or 0) where nothing was measured."""
    return {
        "fps": None,
        "frames": 0,
        "processes": processes,
        "threads": threads,
        "decoder": decoder,
        "nvdec_util_samples": 0,
        "nvdec_util_median": None,
        "nvdec_util_p90": None,
        "video_clock_mhz": None,
        "seconds": seconds,
        "fps_by_part": None,
        "fps_spread_pct": None,
        "counted": None,
        "error": error,
    }


def saturate(
    path,
    processes: int = 7,
    threads: int = 1,
    seconds: float = 3.0,
    gpu: int = 0,
    decoder: str = "pynvvideocodec",
    started: dict | None = None,
) -> dict:
    """Raw NVDEC decode of `path` by processes x threads warmed-up `decoder`s for `seconds`, counting only frames
    inside the common window while NVML is sampled. `started`: processes from `_start`. Returns {'fps', 'frames',
    'nvdec_util_median', 'fps_by_part', 'fps_spread_pct', 'error', ...}. Notebook 20."""
    run = started or _start(path, processes, threads, seconds, gpu, decoder)
    if isinstance(run, dict) and run.get("refused"):
        return _row(processes, threads, decoder, seconds, run["refused"])
    nvml = env.nvml_handle(gpu)
    util, clock = [], []
    if not _ready(run):
        return _row(processes, threads, decoder, seconds, f"decoders did not start within {READY_TIMEOUT_S} s")
    run["go"].set()
    t0 = time.perf_counter()
    t_end = t0 + seconds
    while time.perf_counter() < t_end:
        time.sleep(0.05)
        # NVML averages utilization over its own sampling period: skip the readings of the first third
        # of the window, which still average in the idle moment before the start
        if nvml and time.perf_counter() > t0 + seconds / 3:
            nv, h = nvml
            util.append(nv.nvmlDeviceGetDecoderUtilization(h)[0])
            clock.append(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_VIDEO))
    try:
        results = [run["queue"].get(timeout=120) for _ in run["children"]]
    except queue.Empty:  # a process died in the window (a CUDA fault): its count is lost, so the run has no rate
        for c in run["children"]:
            c.kill()
        return _row(processes, threads, decoder, seconds, "a decoder process ended without its count")
    for c in run["children"]:
        c.join(timeout=30)
    frames = round(sum(r["frames"] for r in results), 1)  # the chunk at the window's end counts its share only
    width = seconds / WINDOW_BINS
    parts = [sum(r["bins"][i] for r in results) / width for i in range(WINDOW_BINS)]
    errors = sorted({r["error"] for r in results if r["error"]})
    util.sort()
    return {
        **_row(processes, threads, decoder, seconds, "; ".join(errors) or None),
        # a run in which a decoder failed ran fewer decoders than its layout says: no rate for that layout
        "fps": frames / seconds if frames and not errors else None,
        "frames": frames,
        "nvdec_util_samples": len(util),
        "nvdec_util_median": util[len(util) // 2] if len(util) >= MIN_SAMPLES else None,
        "nvdec_util_p90": util[int(0.9 * (len(util) - 1))] if len(util) >= MIN_SAMPLES else None,
        "video_clock_mhz": max(clock) if clock else None,
        "fps_by_part": [round(x, 1) for x in parts],  # the rate in each of the window's WINDOW_BINS parts
        "fps_spread_pct": spread_pct(parts) if frames else None,
        "counted": "within the window",  # the chunk at its end by its share (`_frames_before`)
    }


SWEEP = ((1, 1), (1, 4), (4, 2), (7, 1), (7, 2))
SATURATED_PCT = 95  # median NVDEC utilization at which a ceiling counts as the engines' limit, not a lower bound


def _layouts(configs, decoders) -> list[tuple[int, int, str]]:
    """(processes, threads, decoder) per config: a 3-tuple names its decoder, a pair runs with each of `decoders`."""
    return [tuple(c) if len(c) == 3 else (*c, d) for c in configs for d in ((None,) if len(c) == 3 else decoders)]


AHEAD_PROCESSES = 48  # processes of several runs started side by side at most (each a CUDA context and its decoders)
MEMORY_SHARE = 0.8  # of the GPU memory free, what the runs started side by side may take together


def _batch(costs: list, k: int, budget: int | None = None) -> list[int]:
    """The runs from the k-th on whose processes start together, `costs` giving (processes, GPU bytes) per run: as
    many as fit in AHEAD_PROCESSES and `budget` bytes (None: no memory limit), at least one."""
    out, total, total_bytes = [], 0, 0
    for j in range(k, len(costs)):
        processes, nbytes = costs[j]
        if out and (total + processes > AHEAD_PROCESSES or (budget is not None and total_bytes + nbytes > budget)):
            break
        out.append(j)
        total, total_bytes = total + processes, total_bytes + nbytes
    return out


def _start_batch(runs: list, k: int, seconds: float, gpu: int) -> dict[int, dict]:
    """Start side by side the runs from the k-th on ((path, processes, threads, decoder) each) that fit in a share of
    the GPU memory free now (`_batch`); return {index: started run} once all have warmed up, so none measures while
    another starts. A run that alone needs more than that share is not started: {'refused': why}."""
    free = _free_bytes(gpu)
    budget = None if free is None else int(free * MEMORY_SHARE)
    sizes = [_run_bytes(*r) if budget is not None else 0 for r in runs[k:]]
    batch = [k + j for j in _batch([(r[1], b) for r, b in zip(runs[k:], sizes)], 0, budget)]
    started = {}
    for j in batch:
        (path, processes, threads, decoder), need = runs[j], sizes[j - k]
        if budget is not None and need > budget:
            why = f"not run: needs about {need / 2**30:.0f} GiB of GPU memory, {free / 2**30:.0f} GiB free"
            started[j] = {"refused": why}
        else:
            started[j] = _start(path, processes, threads, seconds, gpu, decoder)
    for j in batch:
        if "refused" not in started[j]:
            _ready(started[j])
    return started


def short_of_memory(row: dict) -> bool:
    """Whether a `saturate` row failed for want of GPU memory (CUDA's out of memory, or NVDEC decoder error 2)."""
    error = (row.get("error") or "").lower()
    return row.get("fps") is None and ("out of memory" in error or "nvdec decoder: 2" in error)


def usable_decoders(device: str = "cuda") -> tuple[str, ...]:
    """The DECODERS whose library can decode on `device` here (their adapters answer `why_unavailable`)."""
    return tuple(d for d in DECODERS if why_unavailable(d, device) is None)


def ceiling(
    path,
    configs=SWEEP,
    seconds: float = 3.0,
    gpu: int = 0,
    log=None,
    decoders=None,
    if_unsaturated=(),
    started: dict | None = None,
) -> dict:
    """The NVDEC ceiling of one clip: the best `saturate` rate over `configs` with each of `decoders`
    (`if_unsaturated` layouts only where not saturated). Returns {'fps', 'spread_pct', 'best', 'saturated', 'levelled',
    'implied_fps', 'rows'}; not 'saturated' means a lower bound. A run that ran out of GPU memory beside others it
    started with runs again alone once they are done, its row keeping the first error as 'alone_after'. Notebook 20."""
    decoders = usable_decoders(f"cuda:{gpu}") if decoders is None else decoders
    rows = []

    def best_of():
        ok = [r for r in rows if r["fps"]]
        return max(ok, key=lambda r: r["fps"]) if ok else None

    def saturated(row):
        return row is not None and (row["nvdec_util_median"] or 0) >= SATURATED_PCT and levelled(rows, row) is not False

    def note(row):
        if not log:
            return
        util, samples = row["nvdec_util_median"], row["nvdec_util_samples"]
        measured = f"{util}%" if util is not None else f"not measured ({samples} samples, {MIN_SAMPLES} needed)"
        if row["fps"]:
            said = f"{row['fps']:,.0f} frames/s, NVDEC utilization median {measured}"
        else:
            said = f"failed: {row['error']}"
        alone = " (run alone: beside other runs it ran out of GPU memory)" if "alone_after" in row else ""
        log(f"{row['decoder']} {row['processes']} processes x {row['threads']} threads: {said}{alone}")

    for phase, layouts in enumerate((configs, if_unsaturated)):
        if phase and saturated(best_of()):
            break  # more concurrency only where the planned layouts did not show the engines' limit
        todo = _layouts(layouts, decoders or ("pynvvideocodec",))
        ahead: dict = {0: started} if started is not None and phase == 0 else {}
        first, crowded = len(rows), set()  # the runs that started beside others
        for k, (processes, threads, decoder) in enumerate(todo):
            if k not in ahead:  # the next runs' processes start side by side, as many as fit (`_batch`)
                batch = _start_batch([(path, *t) for t in todo], k, seconds, gpu)
                crowded.update(batch if len(batch) > 1 else ())
                ahead.update(batch)
            rows.append(saturate(path, processes, threads, seconds, gpu, decoder, started=ahead.pop(k)))
            note(rows[-1])
        for i in sorted(first + k for k in crowded):
            r = rows[i]
            if short_of_memory(r):  # beside the batch's other runs (the estimate was low): alone, now none holds any
                rows[i] = {
                    **saturate(path, r["processes"], r["threads"], seconds, gpu, r["decoder"]),
                    "alone_after": r["error"],
                }
                note(rows[i])
    best = best_of()
    if best is None:
        unknown = dict.fromkeys(("levelled", "implied_fps", "spread_pct"))
        return {"fps": None, "best": None, "saturated": False, **unknown, "rows": rows}
    util = best["nvdec_util_median"]
    return {
        "fps": best["fps"],
        "spread_pct": best.get("fps_spread_pct"),  # how steady the best run's rate was inside its window
        "best": best,
        "saturated": saturated(best),
        "levelled": levelled(rows, best),
        "implied_fps": best["fps"] * 100 / util if util else None,
        "rows": rows,
    }


def where_it_levelled(result: dict) -> tuple:
    """The (processes, threads) layouts of a `ceiling` result's best row and of the next less concurrent layout it
    ran: where its rate levelled off, so that a later clip run at both shows its own `levelled` and `saturated`."""
    best = (result["best"]["processes"], result["best"]["threads"])
    ran = {(r["processes"], r["threads"]) for r in result["rows"] if r.get("fps")} - {best}
    below = sorted((pt for pt in ran if pt[0] * pt[1] <= best[0] * best[1]), key=lambda pt: pt[0] * pt[1])
    return tuple(below[-1:]) + (best,)


LEVELLED_PCT = 3.0  # more decoders at once that raise the rate by less than this: the rate has levelled off


def levelled(rows: list[dict], best: dict) -> bool | None:
    """Whether `best`'s rate had stopped rising with concurrency: True when more decoders did not beat it or it beat
    fewer by under LEVELLED_PCT, False when still rising at the most concurrent layout, None when unknown."""
    ok = [r for r in rows if r.get("fps")]

    def n(r):
        return r["processes"] * r["threads"]

    if any(n(r) > n(best) for r in ok):
        return True
    fewer = [r["fps"] for r in ok if n(r) < n(best)]
    if not fewer:
        return None
    return best["fps"] <= (1 + LEVELLED_PCT / 100) * max(fewer)


def against_ceiling(fps, spread_pct, ceiling: dict | None) -> dict:
    """A loader's rate judged against a `ceiling` result. Returns {'pct_of_ceiling', 'verdict' ('below', 'at',
    'above'), 'words', 'at_most' (the ceiling was a lower bound)}; no share above 100 is a result. Notebooks 20, 21."""
    saturated = bool(ceiling and ceiling.get("saturated"))

    def judged(pct, verdict, words):
        return {"pct_of_ceiling": pct, "verdict": verdict, "words": words, "at_most": pct is not None and not saturated}

    if not ceiling or not ceiling.get("fps") or not fps:
        return judged(None, None, "no ceiling to compare with")
    c, spread = ceiling["fps"], max(spread_pct or 0.0, ceiling.get("spread_pct") or 0.0)  # the larger of the two
    pct = 100 * fps / c
    bound = "" if saturated else " (measured only as a lower bound here, so the share is at most this)"
    if pct <= 100:
        return judged(pct, "below", f"{pct:.1f}% of the NVDEC ceiling{bound}")
    if pct <= 100 + spread:
        inside = f"({pct - 100:.1f}% over it, inside the {spread:.1f}% spread)"
        return judged(100.0, "at", f"at the NVDEC ceiling {inside}{bound}")
    rates = f"{fps:,.0f} against {c:,.0f} frames/s"
    if saturated:
        words = f"ABOVE the saturated NVDEC ceiling ({rates}, more than the {spread:.1f}% spread): no loader can beat "
        words += "the engines, so one of the two measurements is wrong"
    else:
        words = f"above the NVDEC ceiling, which was not saturated ({rates}): the ceiling is only a lower bound here"
    return judged(None, "above", words)


def ceilings(
    clips: dict,
    infos: dict,
    first: list,
    others: list,
    configs=SWEEP,
    seconds: float = 3.0,
    gpu: int = 0,
    log=None,
    if_unsaturated=(),
) -> dict:
    """{clip name: `ceiling`} for notebook 20: the whole sweep on the first clip of `first`, the layouts where it
    levelled off on the rest of `first`, and each of `others` at its codec's best layout."""
    out: dict = {}
    step = (lambda m: log("    " + m)) if log else None
    swept = None  # the first sweep's result
    for name in first:
        todo_configs, more = configs, if_unsaturated
        if swept is not None and swept["fps"]:
            todo_configs = where_it_levelled(swept)
            more = tuple(c for c in if_unsaturated if tuple(c[:2]) not in todo_configs)
        if log:
            log(f"{name}: " + ("sweep" if todo_configs is configs else f"the layouts where {first[0]} levelled off"))
        out[name] = ceiling(clips[name], todo_configs, seconds, gpu, step, if_unsaturated=more)
        swept = out[name] if swept is None else swept
        if not out[name]["fps"]:
            continue
        b = out[name]["best"]
        layout = (b["processes"], b["threads"], b["decoder"])
        todo = [o for o in others if infos[o].codec == infos[name].codec and o not in out]
        ahead: dict = {}
        crowded = set()  # the clips whose run started beside others
        for k, other in enumerate(todo):
            if other not in ahead:  # the next clips' runs start side by side, as a sweep's do (`ceiling`)
                started = _start_batch([(clips[o], *layout) for o in todo], k, seconds, gpu)
                ahead.update({todo[j]: run for j, run in started.items()})
                crowded.update(todo[j] for j in started if len(started) > 1)
            if log:
                log(f"{other}: {layout[2]}, layout {layout[0]} x {layout[1]}")
            out[other] = ceiling(clips[other], (layout,), seconds, gpu, step, started=ahead.pop(other))
        for other in [o for o in todo if o in crowded]:  # out of memory beside the others: alone, once they are done
            failed = next((r for r in out[other]["rows"] if short_of_memory(r)), None)
            if failed:
                out[other] = ceiling(clips[other], (layout,), seconds, gpu, step)
                for r in out[other]["rows"]:
                    r["alone_after"] = failed["error"]  # as `ceiling`'s own reruns keep it
    return out


if __name__ == "__main__":  # any failure is reported as data: this process exists to contain it
    child.reply(_child, sys.argv[1], sys.argv[2])
