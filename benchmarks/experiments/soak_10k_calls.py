"""10,000 random-access read_frames calls per CPU backend, side by side, with the memory curve (the CPU half of notebook 23's soak).

PLAYBOOK_MEDIA_DIR=... python benchmarks/experiments/soak_10k_calls.py   # writes the JSON and PNG into the current folder
"""

import json
import subprocess
import sys
import time

from playbook_utils import env
from playbook_utils.bench import media


def main():
    import matplotlib

    matplotlib.use("Agg")  # a PNG, no window: chosen here, so that importing this script changes nothing
    import matplotlib.pyplot as plt

    clips = media.default_media(smoke=True)
    h264, vp9 = str(clips["h264_144p_gop12.mp4"]), str(clips["vp9_144p_gop12.webm"])
    jobs = {
        "pyav cpu": (h264, "pyav"),
        "decord cpu": (h264, "decord"),
        "torchcodec cpu": (h264, "torchcodec"),
        "dali cpu": (vp9, "dali"),
    }
    procs = {}
    for name, (clip, b) in jobs.items():
        code = (
            f"import json; from playbook_utils.bench import faults; r = faults.soak({clip!r}, {b!r}, 'cpu', calls=10000, "
            f"warmup=500, every=250); print(json.dumps(r))"
        )
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    out = {
        "machine": env.report(probe_libraries=False)["cpu_model"],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": "faults.soak(clip, backend, 'cpu', calls=10000, warmup=500, every=250), the four backends side by side",
        "soaks": {},
    }
    for name, p in procs.items():
        so, se = p.communicate()
        line = [x for x in so.splitlines() if x.startswith("{")]
        out["soaks"][name] = json.loads(line[-1]) if line else {"error": se.strip().splitlines()[-1:]}
        r = out["soaks"][name]
        print(
            name,
            r.get("calls"),
            round(r.get("rss_growth_pct", float("nan")), 2),
            r["curve"][0]["rss_mb"] if "curve" in r else r,
        )
    json.dump(out, open("soak_10k_calls.json", "w"), indent=1)

    # the plot beside it
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for n, r in out["soaks"].items():
        c = r["curve"]
        ax.plot(
            [p["call"] for p in c], [p["rss_mb"] for p in c], label=f"{n}: {r['rss_growth_pct']:+.2f}% after warm-up"
        )
    ax.axvline(500, color="gray", ls="--", lw=1)
    ax.set_xlabel("read_frames calls, 4 random frames each (dashed: end of warm-up)")
    ax.set_ylabel("resident memory (MiB)")
    ax.set_title(
        f"10,000 random-access calls per backend, 256x144 clips ({out['machine']} x2, {out['date_utc']} UTC)",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig("soak_10k_calls.png", dpi=90)


if __name__ == "__main__":
    main()
