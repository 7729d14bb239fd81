"""On the GPU: why 21's training step waited for data 26% of the time (5.8 videos/s against 7.8 on held batches)
though the same loader alone delivered 19.2 videos/s. The suspect: TorchCodec converts NVDEC's frames on the
current CUDA stream, and `GpuLoader`'s threads set none, so their conversion and resize queue on the default stream
behind the model's step (and each thread's synchronize waits for the step). 21's section 5 as it ran (TorchCodec,
16 threads, 4 videos of 16 frames at the processor's size, the 8-layer model), five runs: the loader alone, each
way; the step on held batches; the step with the loader as 21 runs it; the step with each loader thread on a stream
of its own. Usage: python3 diag_train_wait.py [OUT_DIR] (builds the realistic 1080p clips it reads, full size)."""

import json
import os
import sys
import threading
import time
from pathlib import Path

import torch

from playbook_utils import loaders
from playbook_utils.bench import loader_bench, media, train_step

K, BATCH, THREADS, STEPS = 16, 4, 16, 30
MODEL = dict(dim=512, layers=8, heads=8)


class OwnStreams(loaders.GpuLoader):
    """`GpuLoader` whose threads each decode and resize on a CUDA stream of their own."""

    local = threading.local()

    def _item(self, i):
        if not hasattr(self.local, "stream"):
            self.local.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.local.stream):
            out = super()._item(i)  # synchronizes its (current) stream before it returns
        if out is not None:  # read on the default stream: its memory is not reused before that is done
            out.record_stream(torch.cuda.default_stream())
        return out


def batches_of(cls, items, size):
    return train_step.gpu_batches(items, "torchcodec", THREADS, BATCH, size, K, loader=cls)


def alone(make) -> float:
    """Videos per second the loader delivers after its look-ahead, no model."""
    it, n = make(), 0
    for _ in range(make.lookahead_batches):
        next(it)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in it:
        n += b.shape[0]
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
    only = os.environ.get("CLIPS", "")  # e.g. h264: the realistic clips whose names start so (default: all four)
    specs = [c for c in media.default_media_specs(False) if c.bitrate and c.height == 1080 and c.name.startswith(only)]
    clips = media.default_media(smoke=False, log=print, specs=specs)
    print("clips:", ", ".join(clips))
    view = train_step.processor_view(K, 1080, 1920)
    items = loader_bench.epoch_items(
        list(clips.values()),
        loader_bench.wait_epoch({"kind": "gpu", "threads": THREADS}, BATCH, STEPS),
        "/tmp/diag_train",
    )
    print(f"{len(items)} files, frames resized to {view['size']}")
    runs = {}
    for name, cls in (("own streams", OwnStreams), ("default stream", loaders.GpuLoader)):  # the question first
        make = batches_of(cls, items, view["size"])
        torch.manual_seed(0)
        live = train_step.train_steps(
            train_step.tiny_video_model(**MODEL), make(), STEPS, "cuda", None, lookahead=make.lookahead_batches
        )
        said(runs, f"step, loader on the {name}", live, out)
    make = batches_of(loaders.GpuLoader, items, view["size"])
    torch.manual_seed(0)
    source = make()
    kept = train_step.held_batches(source, 4, lambda b: b)
    source.close()  # its threads stop decoding ahead
    held = train_step.train_steps(train_step.tiny_video_model(**MODEL), kept, STEPS, "cuda", lambda b: b)
    said(runs, "step, held batches", held, out)
    for name, cls in (("default stream", loaders.GpuLoader), ("own streams", OwnStreams)):
        said(runs, f"alone, {name}", {"videos_per_s": alone(batches_of(cls, items, view["size"]))}, out)


def said(runs, name, r, out):
    """Print one run's line and write every run so far (a run cut short keeps the ones before it)."""
    runs[name] = r
    step = f", step {1e3 * r['step_s']:.0f} ms, waits {100 * r['wait_fraction']:.0f}%" if "step_s" in r else ""
    print(f"{name:36s} {r.get('videos_per_s', r.get('samples_per_s')):6.1f} videos/s{step}", flush=True)
    keep = ("videos_per_s", "samples_per_s", "step_s", "step_spread_pct", "wait_fraction", "steps", "peak_mem_mb")
    (out / "diag_train_wait.json").write_text(
        json.dumps({n: {k: r.get(k) for k in keep if k in r} for n, r in runs.items()}, indent=1)
    )


if __name__ == "__main__":
    main()
