"""On the H200: where SPDL's NVDEC path spends its time reading every frame of a clip. On 2026-12-04 (seventh
session) notebook 20's table gave SPDL CUDA 102 frames/s on the realistic 1080p H.264 clip (9.7 Mbit/s) and 534 on
the closed-GOP HEVC one, with NVDEC 4% busy and one CPU core busy: a host-side limit. The adapter
(`decoders.spdl._frames_cuda`) reads one window per GOP that holds wanted frames: for a whole clip of GOP 30, ten
windows, each demuxed from the file again, put through the bitstream filter, decoded by a new NVDEC decoder and
converted to RGB. This times, for each clip, on one thread:

    adapter     read_frames(path, every frame, "spdl", "cuda"), as 20's table does
    windows     the adapter's windows by hand, each step timed: demux, bitstream filter, new decoder, decode, RGB
    one window  the whole clip as one window: one demux, one filter, one decoder
    decoders    creating NVDEC decoders alone (no packet decoded)

Each line: frames/s and the milliseconds each step took in all. Usage:
    python3 benchmarks/h200/diag_spdl_cuda.py CLIP [CLIP ...]   (default: the realistic 1080p H.264 and HEVC clips)
"""

import sys
import time
from collections import defaultdict

import torch

from playbook_utils.bench import media
from playbook_utils.decoders import read_frames, video_info


def timed(log, step, fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    torch.cuda.synchronize()
    log[step] += time.perf_counter() - t0
    return out


def windows(path, info, groups, log):
    """Decode `groups` ([(first, last)] frame ranges) as the adapter does, one window each; frames decoded."""
    import spdl.io

    times = sorted(spdl.io.demux_video(path).get_timestamps())
    half = (times[1] - times[0]) / 2
    cfg = spdl.io.cuda_config(device_index=0)
    count = 0
    for first, last in groups:
        packets = timed(log, "demux", spdl.io.demux_video, path, timestamp=(times[first], times[last] + half))
        codec = packets.codec
        packets = timed(log, "filter", spdl.io.apply_bsf, packets, f"{codec.name}_mp4toannexb")
        decoder = timed(log, "new decoder", spdl.io.nvdec_decoder, cfg, codec)
        nv12 = timed(log, "decode", decoder.decode_packets, packets)
        rgb = timed(log, "rgb", lambda: spdl.io.to_torch(spdl.io.nv12_to_rgb(nv12, device_config=cfg, coeff=1)))
        count += rgb.shape[0]
    return count


def line(name, frames, seconds, log=None):
    parts = "; ".join(f"{k} {1e3 * v:,.0f} ms" for k, v in (log or {}).items())
    print(
        f"  {name:11s} {frames:5d} frames in {seconds:6.2f} s = {frames / seconds:7,.0f} frames/s"
        + (f" ({parts})" if parts else "")
    )


def main(paths):
    import spdl.io

    for path in paths:
        info = video_info(path)
        n = info.num_frames
        keys = sorted(set(info.keyframe_of))
        print(
            f"{path}: {info.codec} {info.width}x{info.height}, {n} frames, {len(keys)} GOPs, open GOP {info.open_gop}"
        )
        read_frames(path, [0], "spdl", "cuda")  # CUDA context, SPDL's first use: not timed
        t0 = time.perf_counter()
        got = read_frames(path, list(range(n)), "spdl", "cuda").shape[0]
        torch.cuda.synchronize()
        line("adapter", got, time.perf_counter() - t0)
        per_gop = [(k, (keys[i + 1] - 1) if i + 1 < len(keys) else n - 1) for i, k in enumerate(keys)]
        for name, groups in (("windows", per_gop), ("one window", [(0, n - 1)])):
            log = defaultdict(float)
            t0 = time.perf_counter()
            got = windows(path, info, groups, log)
            line(name, got, time.perf_counter() - t0, log)
        cfg = spdl.io.cuda_config(device_index=0)
        codec = spdl.io.demux_video(path).codec
        t0 = time.perf_counter()
        for _ in range(len(keys)):
            spdl.io.nvdec_decoder(cfg, codec)
        per = (time.perf_counter() - t0) / len(keys)
        print(f"  decoders    {len(keys)} created in {per * len(keys):.2f} s: {1e3 * per:.1f} ms each")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU (SPDL's NVDEC path)")
    clips = sys.argv[1:] or [
        str(p)
        for n, p in media.realistic_media(smoke=False).items()
        if n.startswith(("h264_1080p_gop30", "hevc_1080p_gop30"))
    ]
    main(clips)
