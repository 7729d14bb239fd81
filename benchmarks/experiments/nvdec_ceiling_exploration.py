"""Where does raw NVDEC decode saturate on this GPU? The exploration `bench.nvdec.ceiling` is built on.

OUT=DIR python benchmarks/experiments/nvdec_ceiling_exploration.py   # writes DIR/ceiling_explore.json (default /tmp)
"""

import json
import multiprocessing as mp
import os
import threading
import time


def nv_thread(path, reuse, t_end, out, k):
    import PyNvVideoCodec as nvc

    dec, frames, passes = None, 0, 0
    while time.perf_counter() < t_end:
        dmx = nvc.CreateDemuxer(path)
        if dec is None or not reuse:
            dec = nvc.CreateDecoder(
                gpuid=0, codec=dmx.GetNvCodecId(), cudacontext=0, cudastream=0, usedevicememory=True
            )
        n = 0
        for p in dmx:
            n += len(dec.Decode(p))
        n += len(dec.Decode(nvc.PacketData()))
        frames += n
        passes += 1
    out[k] = (frames, passes)


def av_thread(path, reuse, t_end, out, k):
    import av
    from av.codec.hwaccel import HWAccel

    frames, passes = 0, 0
    while time.perf_counter() < t_end:
        with av.open(path, hwaccel=HWAccel(device_type="cuda", allow_software_fallback=False)) as c:
            n = sum(1 for _ in c.decode(video=0))
        frames += n
        passes += 1
    out[k] = (frames, passes)


def proc(kind, path, threads, reuse, barrier, start_at, dur, q):
    fn = nv_thread if kind == "nv" else av_thread
    # warm: one pass per thread before the barrier
    w = {}
    fn(path, reuse, time.perf_counter() + 0.01, w, 0)
    barrier.wait()
    t0 = time.perf_counter()
    t_end = t0 + dur
    out = {}
    ths = [threading.Thread(target=fn, args=(path, reuse, t_end, out, k)) for k in range(threads)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    q.put((sum(v[0] for v in out.values()), sum(v[1] for v in out.values()), time.perf_counter() - t0))


def measure(kind, path, procs, threads, reuse=True, dur=4.0):
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    b = ctx.Barrier(procs + 1)
    ps = [ctx.Process(target=proc, args=(kind, path, threads, reuse, b, 0, dur, q)) for _ in range(procs)]
    [p.start() for p in ps]
    b.wait()
    t0 = time.perf_counter()
    util, clk = [], []
    while time.perf_counter() < t0 + dur:
        time.sleep(0.05)
        util.append(pynvml.nvmlDeviceGetDecoderUtilization(h)[0])
        clk.append(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_VIDEO))
    res = [q.get(timeout=120) for _ in ps]
    [p.join() for p in ps]
    frames = sum(r[0] for r in res)
    wall = max(r[2] for r in res)
    util.sort()
    row = dict(
        kind=kind,
        clip=os.path.basename(path),
        procs=procs,
        threads=threads,
        reuse=reuse,
        fps=round(frames / wall),
        frames=frames,
        passes=sum(r[1] for r in res),
        util_med=util[len(util) // 2] if util else None,
        util_p90=util[int(len(util) * 0.9)] if util else None,
        util_max=max(util) if util else None,
        video_clock=max(clk) if clk else None,
    )
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    from playbook_utils.bench import media

    d = "/tmp/ceil"
    os.makedirs(d, exist_ok=True)
    clips = {}
    specs = [("h264", 1920, 1080, 30), ("hevc", 1920, 1080, 30), ("h264", 1280, 720, 30), ("h264", 3840, 2160, 30)]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(4) as ex:
        futs = {s: ex.submit(media.make_clip, f"{d}/{s[0]}_{s[2]}.mp4", s[0], s[1], s[2], 30, 300, s[3]) for s in specs}
        for s, f in futs.items():
            clips[s] = str(f.result())
    print("clips", clips, flush=True)
    rows = []
    h264, hevc = clips[specs[0]], clips[specs[1]]
    for path in (h264, hevc):
        for p, t, reuse in [
            (1, 1, True),
            (1, 1, False),
            (1, 4, True),
            (7, 1, True),
            (7, 2, True),
            (14, 1, True),
            (14, 2, True),
            (28, 1, True),
            (14, 1, False),
        ]:
            rows.append(measure("nv", path, p, t, reuse))
        for p, t in [(7, 1), (14, 1), (28, 1)]:
            rows.append(measure("av", path, p, t))
    for path in (clips[specs[2]], clips[specs[3]]):
        for p, t in [(7, 1), (14, 1), (14, 2)]:
            rows.append(measure("nv", path, p, t))
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "ceiling_explore.json"), "w"), indent=1)
