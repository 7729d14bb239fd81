"""On the GPU (issue 59): PyAV's frames kept in GPU memory (`HWAccel(is_hw_owned=True)`, `pyav.PyAV.RESIDENT`)
against its download-to-host path and TorchCodec on CUDA, on the realistic 1080p clips: every frame of each clip
checked against PyAV's CPU decode (PSNR), then frames/s reading all of them, each path in its own process.

    source /tmp/gpu-env.sh && PLAYBOOK_MEDIA_DIR=/tmp/media python3 benchmarks/h200/pyav_resident.py [OUT_JSON]

Prints one line per clip and path and writes the rows to OUT_JSON (default $OUT/pyav_resident.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PATHS = {"pyav host": ("pyav", False), "pyav resident": ("pyav", True), "torchcodec": ("torchcodec", None)}


def one(path: str, label: str) -> dict:
    """The row of one path on one clip, measured in this process."""
    from playbook_utils.bench import pixels, timing
    from playbook_utils.decoders import pyav, read_frames, video_info

    backend, resident = PATHS[label]
    from playbook_utils.device import Device

    info = video_info(path)
    every = list(range(info.num_frames))
    if resident is not None:
        pyav.PyAV.RESIDENT = resident
        if resident:  # the adapter falls back to the host path where this one fails: here it fails instead
            pyav._read(path, every[:2], Device.parse("cuda"), info, [], resident=True)
    frames = read_frames(path, every, backend, "cuda")
    reference = read_frames(path, every, "pyav", "cpu")
    psnr = sorted(pixels.psnr(frames[i].cpu(), reference[i]) for i in every)
    worst = psnr[0]
    m = timing.measure(
        lambda: read_frames(path, every, backend, "cuda"), items=len(every), min_time=3.0, sync=timing.cuda_sync("cuda")
    )
    return {
        "clip": Path(path).name,
        "path": label,
        "fps": round(m["per_s"]),
        "spread_pct": m["spread_pct"],
        "lowest_psnr_db": round(worst, 1),
        "median_psnr_db": round(psnr[len(psnr) // 2], 1),
        "frames_below": sum(x < pixels.THRESHOLD_DB for x in psnr),
        "right": worst >= pixels.THRESHOLD_DB,
        "on": str(frames.device),
    }


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
        return 0
    from playbook_utils.bench import media

    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(os.environ.get("OUT", ".")) / "pyav_resident.json")
    clips = {n: p for n, p in media.realistic_media(smoke=False).items() if "gop30" in n}
    rows = []
    for name, path in sorted(clips.items()):
        for label in PATHS:
            run = subprocess.run([sys.executable, __file__, "--one", str(path), label], capture_output=True, text=True)
            lines = [x for x in run.stdout.splitlines() if x.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"clip": name, "path": label, "error": run.stderr[-400:]}
            rows.append(row)
            print(row, flush=True)
    out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
