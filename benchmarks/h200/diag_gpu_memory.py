"""On the H200: what CUDA memory a GpuLoader / GpuProcessLoader stopped after one batch leaves in this process, per
backend, before and after gc.collect(), and the live CUDA tensors then (shape, dtype, what refers to them).
The question behind it: tests/unit/test_loaders.py::test_gpu_loaders_stopped_early_end_cleanly_and_free_gpu_memory
failed for pynvvideocodec on 2026-12-03 (64 -> 96 MiB). Usage: python3 diag_gpu_memory.py BACKEND [VIDEO [VIDEO2]] (one backend per process: TorchCodec and
PyNvVideoCodec clash in one)."""

import gc
import sys

import torch

from playbook_utils import loaders


def live_cuda():
    out = []
    for o in gc.get_objects():
        try:
            if torch.is_tensor(o) and o.is_cuda:
                refs = [type(r).__name__ for r in gc.get_referrers(o)][:6]
                out.append((tuple(o.shape), str(o.dtype), o.untyped_storage().nbytes(), refs))
        except Exception:
            pass
    return out


def main():
    backend, paths = sys.argv[1], sys.argv[2:]
    if not paths:  # the smoke media set (made or found in PLAYBOOK_MEDIA_DIR), as the test uses
        from playbook_utils.bench import media

        smoke = media.default_media(smoke=True)
        paths = [smoke["h264_144p_gop12.mp4"], smoke["hevc_144p_gop48.mp4"]]
    torch.zeros(1, device="cuda")
    for backend in (backend,):
        base = torch.cuda.memory_allocated()
        for stage in ("GpuLoader", "GpuProcessLoader"):
            for _ in range(3):
                if stage == "GpuLoader":
                    for batch in loaders.GpuLoader(
                        [paths[0]] * 8, backend=backend, device="cuda", threads=2, batch_size=1, size=64, chunk=24
                    ):
                        break
                else:
                    L = loaders.GpuProcessLoader(
                        [paths[0], paths[-1]] * 4,
                        processes=2,
                        threads=2,
                        batch_size=1,
                        backend=backend,
                        device="cuda",
                        size=64,
                        chunk=24,
                    )
                    for batch in L:
                        break
                del batch
            torch.cuda.synchronize()
            before_gc = torch.cuda.memory_allocated()
            live = live_cuda()
            gc.collect()
            after_gc = torch.cuda.memory_allocated()
            print(
                f"{backend:15s} {stage:17s} +{(before_gc - base) / 2**20:.1f} MiB before gc.collect, "
                f"+{(after_gc - base) / 2**20:.1f} MiB after; live CUDA tensors before gc: {len(live)}"
            )
            for t in live[:12]:
                print("    ", t)
            base = after_gc


if __name__ == "__main__":
    main()
