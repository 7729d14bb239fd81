"""PyAV frame-thread count against random access on a many-core host: sequential whole clip vs K = 16 uniform frames
(sorted pass, seeks when the next target is in a later GOP, as the adapter does). python benchmarks/experiments/pyav_frame_threads.py OUT.json"""

import json
import os
import statistics
import sys
import time

import av

from playbook_utils import sampling
from playbook_utils.bench import media, sparse


def main():
    clip = media.default_media(smoke=False)["h264_1080p_gop30.mp4"]
    info = media.probe(clip)
    targets = sampling.uniform(info.num_frames, 16)

    def run(count, sparse_access):
        if sparse_access:  # the same sorted pass as read_frames and notebook 10
            return len(
                sparse.sorted_pass(
                    clip,
                    targets,
                    info.pts,
                    info.keyframe_of,
                    threads="AUTO",
                    thread_count=0 if count == "auto" else count,
                )[0]
            )
        with av.open(str(clip)) as c:
            s = c.streams.video[0]
            s.thread_type, s.thread_count = "AUTO", 0 if count == "auto" else count
            return sum(1 for _ in c.decode(s))

    rows = []
    for count in (1, 2, 4, 8, 16, "auto"):
        for sparse_access in (False, True):
            n = run(count, sparse_access)
            times = []
            for _ in range(5):
                t = time.perf_counter()
                run(count, sparse_access)
                times.append(time.perf_counter() - t)
            rows.append(
                {
                    "threads": count,
                    "workload": "sparse K=16" if sparse_access else "sequential",
                    "frames": n,
                    "fps": n / statistics.median(times),
                }
            )
            print(rows[-1], flush=True)
    json.dump(
        {"cores": len(os.sched_getaffinity(0)), "clip": clip.name, "rows": rows}, open(sys.argv[1], "w"), indent=1
    )


if __name__ == "__main__":
    main()
