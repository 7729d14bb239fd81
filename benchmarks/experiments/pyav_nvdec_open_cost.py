"""How PyAV's NVDEC open cost depends on FFmpeg's CUDA context options. Each variant in a fresh process:
python benchmarks/experiments/pyav_nvdec_open_cost.py OUT.json"""

import json
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
import av, torch
from av.codec.hwaccel import HWAccel
from playbook_utils.bench import media
variant, torch_first = sys.argv[1], sys.argv[2] == "1"
opts = {"default": {}, "primary_ctx": {"primary_ctx": "1"}, "current_ctx": {"current_ctx": "1"}}[variant]
if torch_first:
    torch.zeros(1, device="cuda")
out = {"variant": variant, "torch_first": torch_first}
for name in ("h264_144p_gop12.mp4",):
    clip = media.default_media(smoke=True)[name]
    times = []
    try:
        for i in range(21):
            t = time.perf_counter()
            with av.open(str(clip), hwaccel=HWAccel(device_type="cuda", allow_software_fallback=False, options=opts)) as c:
                s = c.streams.video[0]
                s.thread_type = "AUTO"
                f = next(c.decode(s))
                hw = s.codec_context.is_hwaccel
                arr = f.to_ndarray(format="rgb24")
            times.append(time.perf_counter() - t)
        out[name] = {"median_ms": 1e3 * statistics.median(times[1:]), "first_ms": 1e3 * times[0], "is_hwaccel": hw,
                     "stamp": media.read_stamp(torch.from_numpy(arr).permute(2, 0, 1))}
        # the same with one thread (no frame threads): how much of the cost is thread start-up
        times = []
        for i in range(11):
            t = time.perf_counter()
            with av.open(str(clip), hwaccel=HWAccel(device_type="cuda", allow_software_fallback=False, options=opts)) as c:
                s = c.streams.video[0]
                next(c.decode(s))
            times.append(time.perf_counter() - t)
        out[name]["median_ms_one_thread"] = 1e3 * statistics.median(times[1:])
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
print(json.dumps(out))
"""


def main():
    rows = []
    for variant in ("default", "primary_ctx", "current_ctx"):
        for torch_first in ("0", "1"):
            p = subprocess.run(
                [sys.executable, "-c", CHILD, variant, torch_first], capture_output=True, text=True, timeout=300
            )
            line = [x for x in p.stdout.splitlines() if x.startswith("{")]
            rows.append(
                json.loads(line[-1])
                if line
                else {"variant": variant, "torch_first": torch_first, "error": p.stderr[-400:]}
            )
            print(rows[-1], flush=True)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
