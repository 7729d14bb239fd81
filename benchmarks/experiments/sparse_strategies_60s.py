"""Notebook 20's section 4b alone (same calls): five sparse strategies on the 60 s 1080p clips, K = 16, 3 repeats.
Run alone on the machine, before anything else: python benchmarks/experiments/sparse_strategies_60s.py OUT.json"""

import json
import os
import sys
import time

from playbook_utils import env, sampling
from playbook_utils.bench import media, sparse


def main():
    rows = {}
    for name, path in media.long_media(smoke=False, log=print).items():
        li = media.probe(path)
        targets = sampling.uniform(li.num_frames, 16)
        r = sparse.run(path, targets, threads="AUTO", repeats=3)
        rows[name] = {"gop": li.gop_lengths[0], "frames": li.num_frames, "seconds_long": li.duration_s, **r}
        base = r["decode everything"]["seconds"]
        for label in sparse.STRATEGIES:
            x = r[label]
            print(
                f"{name} GOP {li.gop_lengths[0]}: {label:22s} {1e3 * x['seconds']:8.1f} ms {x['frames_decoded']:6d} decoded "
                f"{base / x['seconds']:5.1f}x exact={x['exact']} offset={x['mean_offset']:.1f}",
                flush=True,
            )
    rep = env.report()
    json.dump(
        {
            "cores": len(os.sched_getaffinity(0)),
            "cpu": rep["cpu_model"],
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "libraries": rep["libraries"],
            "ffmpeg": rep["ffmpeg"],
            "rows": rows,
        },
        open(sys.argv[1], "w"),
        indent=1,
        default=str,
    )


if __name__ == "__main__":
    main()
