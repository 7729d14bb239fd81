"""Each handed-over module's epoch over a folder of odd files, file by file: read right, wrong, or skipped and why.
"Worst frame" is against the frames asked for: a WRONG beside a worst frame as high as the other libraries' is two
frames too alike to tell apart after the resize (tiny.mp4: frames 38 and 39 are 55 dB apart at 64x48).
References: `tests.reader_folder`'s, made on the CPU where missing (the GPU machine has no ffmpeg tool: carry the
folder's `.reference`). Usage, from the project root: python odd_folder.py FOLDER DEVICE [BACKEND ...]"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests import reader_folder as rf  # noqa: E402

folder, device, *backends = sys.argv[1:]
paths = sorted(str(p) for p in Path(folder).resolve().rglob("*") if p.is_file() and ".reference" not in p.parts)
for p in map(Path, paths):
    if not rf._ref_file(p).exists():
        rf.save_reference(p)
gpu = ["torchcodec", "pynvvideocodec", "dali"]
env = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "modules"), os.environ.get("PYTHONPATH")])),
}
for b in backends or (gpu if device == "cuda" else ["pyav", "torchcodec", "decord", "spdl", "dali"]):
    cmd = [sys.executable, str(ROOT / "tests/unit/test_handover.py"), "epoch", b, device, *paths]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode:
        print(f"== {b} on {device}: FAILED\n{r.stderr[-1500:]}")
        continue
    d = json.loads(r.stdout.splitlines()[-1])
    print(f"== {b} on {device}: shapes {d['shapes']}, devices {d['devices']}")
    for n in d["seen"]:
        ok = d["shown_at"][n] == d["want"][n]
        wrong = "" if ok else f" shown {d['shown_at'][n]}, asked {d['want'][n]}"
        print(f"  {'right' if ok else 'WRONG'} {Path(n).name:28s} worst frame {d['low_db'][n]:.1f} dB{wrong}")
    for n, why in d["skipped"].items():
        print(f"  skip  {Path(n).name:28s} {why[:200]}")
