"""On the GPU: PyNvVideoCodec's and DALI's decoding beside a default stream kept busy, as by a training step, with
their work on the default stream (as before) and on the decoding threads' own stream. TorchCodec's threads waited 26.4% of a
training step on the default stream and 6.6% on their own (notebook 21, section 5); PyNvVideoCodec's and DALI's were
not measured. Over COPIES distinct copies of CLIP, K frames each (`uniform`), THREADS threads, one epoch per line:

    loader  `GpuLoader(backend="pynvvideocodec")` with its adapter's `OWN_STREAM` on ("own") or off ("default")
    pynvc   notebook 22's `pynvvideocodec_clips`: its loader ("own"), or its `read` on the default stream ("default")
    dali-l  `GpuLoader(backend="dali")`, as `loader`
    dali    notebook 22's `dali_clips`, as `pynvc`

each alone ("idle") and beside a thread that runs steps of 64 products of 4096x4096 matrices on the default stream,
each step waited for ("busy"). Each line: frames/s, seconds, and whether its frames equal those of the first line of
its kind. Usage: python3 benchmarks/h200/diag_stream_wait.py CLIP [COPIES] [THREADS]   (default 48 copies, 8 threads)
"""

import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from playbook_utils import loaders
from playbook_utils.bench import loader_bench
from playbook_utils.decoders import adapter

K = 16


def keep_busy(stop: threading.Event, steps: list) -> None:
    a = torch.randn(4096, 4096, device="cuda")
    while not stop.is_set():
        t = time.perf_counter()
        for _ in range(64):
            torch.mm(a, a)
        torch.cuda.default_stream().synchronize()
        steps.append(time.perf_counter() - t)


def loader_epoch(backend: str):
    """An epoch of `GpuLoader(backend=...)` with the adapter's `OWN_STREAM` on ("own") or off ("default")."""

    def epoch(paths, threads: int, own: bool) -> list:
        adapter(backend).OWN_STREAM = ("cuda",) if own else ()
        L = loaders.GpuLoader(paths, backend=backend, threads=threads, batch_size=4, strategy="uniform", k=K)
        return [v.cpu() for b in L for v in b]

    return epoch


def module_epoch(name: str):
    """An epoch of notebook 22's module NAME: its loader ("own"), or its `read` on the default stream ("default")."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "modules"))

    def epoch(paths, threads: int, own: bool) -> list:
        mod = __import__(name)  # here: a library that does not import fails its own lines only
        clips = mod.VideoClips(paths, k=K, size=224, **({} if name.startswith("pynv") else {"device": "cuda"}))
        if own:
            return [v.cpu() for frames, _, _ in mod.loader(clips, batch_size=4, workers=threads) for v in frames]

        def read(p):  # the module before: the thread's current stream, the default one
            with torch.cuda.device(getattr(clips, "gpu", 0)):
                return clips.read(p)

        with ThreadPoolExecutor(threads) as pool:
            return [v.cpu() for v in pool.map(read, paths)]

    return epoch


def main() -> None:
    clip = sys.argv[1]
    copies = int(sys.argv[2]) if len(sys.argv) > 2 else 48
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    folder = Path(tempfile.mkdtemp(prefix="streamwait"))
    paths = [str(p) for p in loader_bench.distinct_copies(clip, copies, folder)]
    print(f"{torch.cuda.get_device_name()}; {Path(clip).name}: {copies} copies, {K} frames each, {threads} threads")
    kinds = (
        ("loader", loader_epoch("pynvvideocodec")),
        ("pynvc", module_epoch("pynvvideocodec_clips")),
        ("dali-l", loader_epoch("dali")),
        ("dali", module_epoch("dali_clips")),
    )
    only = os.environ.get("DIAG_KINDS", "").split()  # e.g. DIAG_KINDS="dali-l dali": those lines only
    for name, epoch in kinds:
        if only and name not in only:
            continue
        try:
            epoch(paths[:threads], threads, True)  # warm: the CUDA context, the decoders
        except Exception as e:  # one library missing or failing leaves the others' lines
            print(f"{name}: {type(e).__name__}: {e}", flush=True)
            continue
        first = None
        for load in ("idle", "busy"):
            for own in (True, False):
                stop, steps = threading.Event(), []
                worker = threading.Thread(target=keep_busy, args=(stop, steps))
                if load == "busy":
                    worker.start()
                    time.sleep(1.0)
                t = time.perf_counter()
                got = epoch(paths, threads, own)
                seconds = time.perf_counter() - t
                stop.set()
                if load == "busy":
                    worker.join()
                first = got if first is None else first
                same = len(got) == len(first) and all(torch.equal(a, b) for a, b in zip(got, first))
                step = f", a busy step {1e3 * sum(steps) / len(steps):.0f} ms" if steps else ""
                print(
                    f"{name:6s} {'own' if own else 'default':7s} {load:4s} {len(got) * K / seconds:8,.0f} frames/s "
                    f"{seconds:6.2f} s  frames same as the first line: {same}{step}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
