"""On the H200: where PyNvVideoCodec's forward read of an open-GOP file spends its time. On 2026-12-04 its
`GpuLoader` read x265 open-GOP 1080p HEVC at 593-651 frames/s with NVDEC 18% busy (TorchCodec's: 7,927 at 98%):
the engines were idle, so the time went on the host side of `decoders.pynvvideocodec._forward`. This times, over
the same distinct copies, one video after another on 1 thread and on THREADS threads, the parts of that path:

    open     CreateDemuxer + CreateDecoder only
    decode   + every packet decoded (NV12 left in the decoder's surfaces): the raw loop of the NVDEC ceiling
    copy     + each surface copied out (`torch.from_dlpack(f).clone()`), as `_forward` keeps frames
    adapter  `read_frames(..., "pynvvideocodec", "cuda")`: the copies converted to RGB (`_forward` in full)
    chunks   the same in chunks of 64 frames, as `GpuLoader` reads every frame: before `_ForwardPass` each chunk
             started a new pass from frame 0 with a new decoder (940 frames decoded for 300); now it goes on

Each line: frames/s over the videos read and seconds per video. Usage:
    python3 benchmarks/h200/diag_pynvc_forward.py CLIP [COPIES] [THREADS]   (default 24 copies, 16 threads)
"""

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from playbook_utils.bench import loader_bench
from playbook_utils.decoders import read_frames, video_info


def part(path: str, how: str) -> int:
    import PyNvVideoCodec as nvc

    if how in ("adapter", "chunks"):
        n = video_info(path).num_frames
        step = 64 if how == "chunks" else n
        return sum(
            read_frames(path, list(range(a, min(n, a + step))), "pynvvideocodec", "cuda").shape[0]
            for a in range(0, n, step)
        )
    demuxer = nvc.CreateDemuxer(path)
    dec = nvc.CreateDecoder(gpuid=0, codec=demuxer.GetNvCodecId(), cudacontext=0, cudastream=0, usedevicememory=True)
    if how == "open":
        return 0
    count, kept = 0, []

    def take(frames):
        nonlocal count
        for f in frames:
            count += 1
            if how == "copy":
                kept.append(torch.from_dlpack(f).clone())

    # each packet decoded as the demuxer hands it out, as nvdec.py's ceiling does: on 2026-12-04 (sixth session) a
    # list of the demuxer's packets, decoded afterwards, gave no frame (likeliest: the demuxer reuses its packet)
    for packet in demuxer:
        take(dec.Decode(packet))
    take(dec.Decode(nvc.PacketData()))  # end of stream: flush
    torch.cuda.synchronize()
    return count


def main() -> int:
    clip = sys.argv[1]
    copies = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    with tempfile.TemporaryDirectory() as folder:
        paths = [str(p) for p in loader_bench.distinct_copies(clip, copies, Path(folder))]
        for p in paths:
            video_info(p)  # probed before any clock
        part(paths[0], "adapter")  # the CUDA context, the library's first decoder
        for how in ("open", "decode", "copy", "adapter", "chunks"):
            for t in (1, threads):
                todo = paths[: max(4, copies // (4 if t == 1 else 1))]
                t0 = time.perf_counter()
                with ThreadPoolExecutor(t) as pool:
                    frames = sum(pool.map(lambda p, how=how: part(p, how), todo))
                s = time.perf_counter() - t0
                print(
                    f"{how:8s} {t:2d} thread(s): {len(todo):3d} videos in {s:6.2f} s, {s / len(todo) * t:6.3f} s a video "
                    f"per thread, {frames:6d} frames"
                    + (f", {frames / s:8,.0f} frames/s" if frames else " (none decoded)"),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
