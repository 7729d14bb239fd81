"""On the GPU: the GPU memory one `nvdec.saturate` run takes (NVML, the peak while it warms up and decodes), beside
`nvdec._run_bytes`'s estimate, for the layouts notebooks 20 and 21 start side by side. The question behind it: the
runs that `nvdec._start_batch` let start together on an H100 ran out of memory in 21 (TorchCodec 1 x 64), so is the
estimate low? Usage: python3 diag_ceiling_memory.py (builds the two 1080p clips it reads, full size)."""

import threading
import time

from playbook_utils.bench import media, nvdec

LAYOUTS = ((1, 16), (1, 64), (7, 4), (16, 4))


def main():
    specs = [s for s in media.default_media_specs(False) if s.bitrate and s.height == 1080 and s.gop == 30]
    clips = media.default_media(smoke=False, specs=specs)
    print("clips:", ", ".join(clips))
    for name, path in clips.items():
        for decoder in nvdec.usable_decoders("cuda"):
            for processes, threads in LAYOUTS:
                before = nvdec._free_bytes(0)
                low, stop = [before], threading.Event()

                def sample():
                    while not stop.is_set():
                        low[0] = min(low[0], nvdec._free_bytes(0))
                        time.sleep(0.05)

                t = threading.Thread(target=sample)
                t.start()
                row = nvdec.saturate(path, processes, threads, 2.0, 0, decoder)
                stop.set()
                t.join()
                peak, est = (before - low[0]) / 2**30, nvdec._run_bytes(path, processes, threads, decoder) / 2**30
                print(
                    f"{name} {decoder} {processes}x{threads}: peak {peak:.1f} GiB, estimate {est:.1f} GiB "
                    f"({peak / est:.2f}x), fps {row['fps'] or 0:,.0f}, error {row['error']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
