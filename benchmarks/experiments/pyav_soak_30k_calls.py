# 30,000 random-access read_frames calls (4 random frames each) with PyAV on the 256x144 H.264 clip: RSS every 1,000 calls.
# Run twice on 2026-11-29: plainly, and with MALLOC_ARENA_MAX=1 (to see whether glibc arenas explain the growth).
# python benchmarks/experiments/pyav_soak_30k_calls.py > out.json
import json
from playbook_utils.bench import faults, media


def main():
    clip = media.default_media(smoke=True)["h264_144p_gop12.mp4"]
    r = faults.soak(clip, "pyav", "cpu", calls=30_000, warmup=500, every=1000)
    print(
        json.dumps(
            {
                "growth": r["rss_growth_pct"],
                "seconds": r["seconds"],
                "curve": [round(p["rss_mb"], 1) for p in r["curve"]],
            }
        )
    )


if __name__ == "__main__":
    main()
