"""A real training step beside the loaders (notebook 21, section 5): a small `torch.nn` video transformer that
takes frames as Qwen2-VL's vision tower does, trained on the loaders' batches, to measure the step time with and
without decoding beside it, the data wait and a batch's memory. No weights are downloaded."""

from __future__ import annotations

import statistics
import time

from playbook_utils import loaders, sampling, transforms
from playbook_utils.bench import verdicts
from playbook_utils.bench.loader_bench import found_empty, spec_lookahead

TEMPORAL_PATCH = sampling.QWEN_FRAME_FACTOR  # frames per patch, as Qwen2-VL's vision tower takes them


def tiny_video_model(dim: int = 256, layers: int = 4, heads: int = 4, classes: int = 10):
    """A video transformer of `layers` encoder layers over `sampling.QWEN_PATCH`-pixel patches of TEMPORAL_PATCH
    frames, mean-pooled into a linear head. Takes float (B, K, 3, H, W), K and H, W multiples of the patch's."""
    import torch
    from torch import nn

    class TinyVideoTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            p = sampling.QWEN_PATCH
            self.embed = nn.Conv3d(3, dim, kernel_size=(TEMPORAL_PATCH, p, p), stride=(TEMPORAL_PATCH, p, p))
            layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(dim, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            tokens = self.embed(x.transpose(1, 2)).flatten(2).transpose(1, 2)  # (B, patches, dim)
            return self.head(self.encoder(tokens).mean(1))

    return TinyVideoTransformer()


def processor_view(k: int, height: int, width: int, max_pixels: int | None = None) -> dict:
    """What a Qwen2-VL-style processor makes of K frames of height x width: {'frames', 'size' (after
    `sampling.vlm_frame_size`), 'patches', 'values_per_patch', 'tokens' (after the 2 x 2 merge), 'uint8_mb'}."""
    h, w = sampling.vlm_frame_size(height, width, k, max_pixels=max_pixels)
    p, m = sampling.QWEN_PATCH, sampling.QWEN_MERGE
    patches = (k // TEMPORAL_PATCH) * (h // p) * (w // p)
    return {
        "frames": k,
        "size": (h, w),
        "patches": patches,
        "values_per_patch": 3 * TEMPORAL_PATCH * p * p,
        "tokens": patches // (m * m),
        "uint8_mb": k * 3 * h * w / 2**20,
    }


def train_steps(model, batches, steps: int, device: str, prepare=None, warmup: int = 2, lookahead: int = 0) -> dict:
    """Train `model` on `steps` batches from `batches` after `warmup` (and `lookahead`) untimed ones, timing the
    data wait (`next` then `prepare`) and the step; the clock starts as in `loader_bench.measure_loader`. Returns
    {'steps', 'step_s', 'wait_s', 'wait_fraction', 'samples_per_s', 'peak_mem_mb', 'batch_mb', 'why', ...}."""
    import torch

    cuda = str(device).startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    prepare = prepare or (lambda b: b.to(device))
    waits, times, sizes, batch_mb, batch_shape = [], [], [], None, (None, None)
    skip, held, begin, n, last_step = warmup + lookahead, 0, None, 0, 0.0
    while len(times) < steps:
        if n == skip:
            sync()
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
                held = torch.cuda.memory_allocated(device)
        t0 = time.perf_counter()
        try:
            x = prepare(next(batches))
        except StopIteration:
            break
        sync()
        t1 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            loss = model(x).float().logsumexp(1).mean()  # any scalar of the output: the step is what is measured
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        t2 = time.perf_counter()
        waited = found_empty(t1 - t0, last_step)
        if begin is None and n >= skip and (not lookahead or waited or n >= skip + lookahead):
            begin = t0
        if begin is not None:
            waits.append(t1 - t0)
            times.append(t2 - t1)
            sizes.append(x.shape[0])
            batch_mb, batch_shape = x.numel() * x.element_size() / 2**20, (x.shape[0], str(x.dtype).split(".")[-1])
        last_step, n = t2 - t1, n + 1
    if not times:
        raise RuntimeError(
            f"train_steps: the batches ended after {n}, before the {skip} of warm-up and look-ahead were drawn"
        )
    wall = time.perf_counter() - begin
    return {
        "steps": len(times),
        "step_s": statistics.median(times),
        "step_spread_pct": verdicts.spread_pct(times),
        "wait_s": statistics.median(waits),
        "wait_mean_s": sum(waits) / len(waits),
        "wait_fraction": sum(waits) / wall,
        "samples_per_s": sum(sizes) / wall,
        "peak_mem_mb": (torch.cuda.max_memory_allocated(device) - held) / 2**20 if cuda else None,
        "batch_mb": batch_mb,
        "batch_videos": batch_shape[0],
        "batch_dtype": batch_shape[1],
        "warmup_batches": warmup,
        "lookahead_batches": lookahead,
        "skipped_batches": n - len(times),
        "why": None if len(times) == steps else f"the batches ended after {len(times)} measured steps of {steps}",
    }


def held_batches(batches, count: int, prepare):
    """An endless iterator over the first `count` batches of `batches`, prepared once and held (on the device)."""
    import itertools

    kept = [prepare(b) for b in itertools.islice(batches, count)]
    if not kept:
        raise ValueError("the loader delivered no batch")
    return itertools.cycle(kept)


def with_and_without_decoding(make_batches, prepare, make_model, steps: int, device: str, held: int = 4, warmup=2):
    """The same training twice from the same weights: on batches a loader decodes meanwhile (`make_batches()`),
    then on `held` of them held on `device`. Returns {'with_loader', 'held', 'step_cost_pct', 'spread_pct',
    'within_spread'}. Notebook 21."""
    import torch

    prepare = prepare or (lambda b: b.to(device))  # as `train_steps`: batches that are model-ready already

    def run(batches, prep, lookahead=0):
        torch.manual_seed(0)
        try:
            return train_steps(make_model(), batches, steps, device, prep, warmup, lookahead=lookahead)
        finally:
            getattr(batches, "close", lambda: None)()

    live = run(make_batches(), prepare, getattr(make_batches, "lookahead_batches", 0))
    source = make_batches()
    try:
        kept = held_batches(source, held, prepare)
    finally:
        getattr(source, "close", lambda: None)()
    still = run(kept, lambda b: b)
    cost = 100 * (live["step_s"] / still["step_s"] - 1)
    spread = max(live["step_spread_pct"] or 0.0, still["step_spread_pct"] or 0.0)
    return {
        "with_loader": live,
        "held": still,
        "step_cost_pct": cost,
        "spread_pct": spread,
        "within_spread": abs(cost) <= spread,
    }


SMALLEST_FRAME_PIXELS = sampling.QWEN_VIDEO_MIN_TOKENS * (sampling.QWEN_PATCH * sampling.QWEN_MERGE) ** 2


def gpu_batches(paths, backend: str, threads: int, batch_size: int, size, k: int):
    """The `make_batches` of `with_and_without_decoding` for a `loaders.GpuLoader`: fresh iterators over its batches
    of K frames per video, model-ready on the GPU (float16 at `size`), a file that fails left out of its batch."""

    def batches():
        yield from loaders.GpuLoader(
            paths, backend=backend, threads=threads, batch_size=batch_size, size=size, strategy="uniform", k=k,
            on_error="skip",
        )  # fmt: skip

    batches.lookahead_batches = -(-spec_lookahead({"kind": "gpu", "threads": threads}) // batch_size)
    return batches


def cpu_batches(paths, backend: str, workers: int, batch_size: int, k: int, **loader_kwargs):
    """The `make_batches` of `with_and_without_decoding` for a `loaders.make_loader` DataLoader: fresh iterators over
    its uint8 batches, a file that fails left out, its workers stopped when the iterator is closed."""

    def batches():
        dl = loaders.make_loader(
            paths, backend=backend, batch_size=batch_size, num_workers=workers, k=k, on_error="skip", **loader_kwargs
        )
        try:
            yield from (good for good, _ in dl if good is not None)
        finally:
            loaders.close_loader(dl)

    batches.lookahead_batches = workers * (loader_kwargs.get("prefetch_factor") or 2)  # each worker's prefetch
    return batches


def model_input(size, device: str):
    """The `prepare` of uint8 batches (B, K, 3, H, W): `transforms.to_model_batch` at `size` on `device`, per frame."""

    def prepare(batch):
        return transforms.to_model_batch(batch.flatten(0, 1), size, device=device).unflatten(0, batch.shape[:2])

    return prepare
