"""Issue 30's matrix on the H200: stamped open-GOP clips (H.264 and HEVC, 8- and 10-bit, short and long GOP, MP4 and
MKV, with B-frames) read by every backend on DEVICE (default cuda), three kinds of read per clip: the correctness
matrix's out-of-order, repeated request; indices on both sides of every keyframe, where open GOP's leading pictures
live; and the whole clip. Each returned frame's stamp is read back (`bench.matrix.table`, each backend in its own
process). Writes every outcome to OUT_JSON and prints the table; exit status 1 when any read came back WRONG.

    python benchmarks/h200/open_gop_matrix.py OUT_JSON [FOLDER]   (FOLDER: where the clips are made, default /tmp/og)
    DEVICE=cpu python benchmarks/h200/open_gop_matrix.py ...       (the CPU backends: a dry run on any machine)
"""

import json
import os
import sys
import time
from pathlib import Path

from playbook_utils.bench import matrix, media
from playbook_utils.decoders import BACKENDS, video_info, why_unavailable

# name: make_clip's arguments (every clip open GOP, 256x144, 96 frames)
CLIPS = {
    "h264 mp4, GOP 12": dict(codec="h264", gop=12, bframes=3),
    "h264 mkv, GOP 48": dict(codec="h264", gop=48, bframes=2, suffix=".mkv"),
    "hevc mp4, GOP 12": dict(codec="hevc", gop=12, bframes=3),
    "hevc mp4, GOP 48": dict(codec="hevc", gop=48, bframes=3),
    "hevc mkv, GOP 24": dict(codec="hevc", gop=24, bframes=3, suffix=".mkv"),
    "hevc mkv, 10-bit, GOP 12": dict(codec="hevc", gop=12, bframes=3, suffix=".mkv", pix_fmt="yuv420p10le"),
}


def build(folder: Path) -> dict:
    out = {}
    for name, kw in CLIPS.items():
        kw = dict(kw)
        path = folder / (name.replace(" ", "_").replace(",", "") + kw.pop("suffix", ".mp4"))
        if not path.exists():
            media.make_clip(path, width=256, height=144, num_frames=96, closed_gop=False, **kw)
        info = video_info(path)
        if not info.open_gop:
            raise SystemExit(f"{path}: not open GOP as made")
        out[name] = (path, info)
    return out


def _commit_file() -> str | None:
    """The commit written on the CPU before the tree travelled (.gpu_media/COMMIT: the copy has no history)."""
    found = Path(".gpu_media/COMMIT")
    return found.read_text().strip() if found.exists() else None


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    device = os.environ.get("DEVICE", "cuda")
    folder = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/og")
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    clips = build(folder)
    cases = {}
    for name, (path, info) in clips.items():
        n = info.num_frames
        cases[f"{name} / matrix request"] = (path, matrix.request_for(n))
        cases[f"{name} / around keyframes"] = (path, matrix.around_keyframes(info))
        cases[f"{name} / whole clip"] = (path, list(range(n)))
    backends = [b for b in BACKENDS if why_unavailable(b, device) is None]
    print(
        f"{device}: {', '.join(backends)}; not here: { ({b: why_unavailable(b, device) for b in BACKENDS if b not in backends}) }"
    )
    table = matrix.table(cases, backends, device)
    print(matrix.format_table(table))
    wrong = [(c, b, o) for c, row in table.items() for b, o in row.items() if o.startswith("WRONG")]
    refused = sorted(
        {
            (c.split(" / ")[1], b, o.split(":", 1)[1].strip()[:160])
            for c, row in table.items()
            for b, o in row.items()
            if not o.startswith(("exact", "WRONG"))
        }
    )
    for kind, b, why in refused:
        print(f"not read ({kind}): {b}: {why}")
    print(f"{len(wrong)} wrong reads of {sum(len(r) for r in table.values())}" + "".join(f"\n  {w}" for w in wrong))
    Path(sys.argv[1]).write_text(
        json.dumps(
            {
                "device": device,
                "commit": os.environ.get("PLAYBOOK_COMMIT") or _commit_file(),
                "seconds": round(time.perf_counter() - t0, 1),
                "table": table,
                "wrong": len(wrong),
            },
            indent=1,
        )
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
