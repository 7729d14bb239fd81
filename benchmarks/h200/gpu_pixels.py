"""The GPU halves of issues 26 and 27 in one call: every GPU backend's colours against the file's tags, the colour
clips read alternately (a decoder reused across files of one coded size shows itself), and every GPU backend's
frames of the reader's mixed folder against a CPU library's decode (`exactness.check_frames`: the frame asked
for, and the same pixels).

On the CPU first (the GPU machine has no ffmpeg):  python benchmarks/h200/gpu_pixels.py make .gpu_media/colour
On the GPU (carry .gpu_media):  python3 benchmarks/h200/gpu_pixels.py run .gpu_media/colour .gpu_media/videos OUT.json
Prints what it finds; the JSON holds every row. DEVICE=cpu runs the same on the CPU backends (a dry run)."""

import json
import os
import sys
import time
from pathlib import Path

from playbook_utils.bench import exactness, media, pixels
from playbook_utils.decoders import BACKENDS, read_frames, video_info, why_unavailable


def main() -> None:
    if sys.argv[1] == "make":
        clips = media.colour_clips(sys.argv[2], smoke=False)
        print("\n".join(f"{n}: {p}" for n, p in clips.items()) or "no ffmpeg command-line tool here")
        return
    colour_dir, video_dir, out = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    t0, device = time.perf_counter(), os.environ.get("DEVICE", "cuda")
    gpu = [b for b in BACKENDS if why_unavailable(b, device) is None]
    print(f"{device} backends here:", gpu, {b: why_unavailable(b, device) for b in BACKENDS if b not in gpu})
    clips = media.colour_clips(colour_dir, smoke=False)
    rows = pixels.run(clips, gpu, device, [0, 3, 5], rounds=3) if clips else []
    summary = pixels.summary(rows)
    # the rows kept before anything is printed: on 2026-12-04 a verdict line raised, and the matrix was lost
    out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1, default=str))
    print("\n".join(pixels.verdict_lines(summary)))
    for r in rows:
        if r["status"] == "ok" and not r["agrees"]:
            print(f"  DISAGREES: {r['backend']} {r['clip']} round {r['round']}: {r['psnr_db']} dB")
    checks = []
    for path in sorted(p for p in video_dir.iterdir() if p.is_file()):
        for b in gpu:
            why = why_unavailable(b, device, path)
            if why:
                checks.append({"file": path.name, "backend": b, "refused": why})
                continue
            try:
                n = video_info(path).num_frames
                idx = sorted({0, n // 3, n // 2, n - 1, 7 % n})
                c = exactness.check_frames(path, idx, read_frames(path, idx, b, device), b).as_dict()
            except Exception as e:  # a file the backend cannot read is its row, with the reason
                c = {"error": f"{type(e).__name__}: {e}"[:300]}
            checks.append({"file": path.name, "backend": b, **c})
            print(f"{path.name:24s} {b:15s} {c.get('exact')} {c.get('lowest_db')} {c.get('detail') or c.get('error')}")
    out.write_text(json.dumps({"rows": rows, "summary": summary, "checks": checks,
                               "seconds": time.perf_counter() - t0}, indent=1, default=str))  # fmt: skip
    print(f"{out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
