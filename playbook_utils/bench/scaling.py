"""Sharded loading over ranks, measured: `launch` starts the ranks under torchrun, `main` is one rank (notebook 30).

    torchrun --standalone --nproc_per_node=2 -m playbook_utils.bench.scaling \\
        --backend pyav --device cpu --paths paths.json --output run.json

Each rank reads its shard for `--epochs` epochs, timed between barriers; rank 0 writes every rank's counts and the
exactly-once check to `--output`. The first epoch includes start-up; quote the last."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from playbook_utils import distributed
from playbook_utils.device import Device
from playbook_utils.errors import describe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="pyav")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda: each rank uses cuda:LOCAL_RANK")
    ap.add_argument("--paths", required=True, help="JSON file holding the list of video paths (the dataset)")
    ap.add_argument("--output", required=True, help="JSON file rank 0 writes")
    ap.add_argument("--k", type=int, default=8, help="frames sampled uniformly per video")
    ap.add_argument("--size", default="", help="HxW to resize to, for videos of mixed sizes (e.g. 144x256)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--num-workers", type=int, default=1, help="DataLoader workers per rank (CPU decoding)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--shuffle", type=int, default=1, help="1: shuffle with seed + epoch, as DistributedSampler")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        return run(args)
    except Exception as e:  # leave the cause where the launcher finds it, then fail as usual
        Path(f"{args.output}.rank{os.environ.get('RANK', 0)}.error").write_text(describe(e)[:1000])
        raise


def run(args) -> int:
    """One rank's epochs; rank 0 writes the gathered result to args.output."""
    import torch
    import torch.distributed as dist

    paths_file = Path(args.paths)
    if not paths_file.exists():
        raise FileNotFoundError(f"{paths_file}: the list of video paths does not exist")
    paths = json.loads(paths_file.read_text())
    sizes = distributed.file_sizes(paths)  # DecodeError naming a missing or empty file, before any decoding
    device, pg_backend = distributed.rank_device(args.device)
    cuda = Device.parse(device).is_cuda
    if cuda:
        torch.cuda.set_device(device)  # before init, so NCCL binds this rank to its own GPU
    dist.init_process_group(pg_backend)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        size = tuple(map(int, args.size.split("x"))) if args.size else None
        # on_error='skip': a file that fails as it is read is named, and the epoch goes on
        loader = distributed.sharded_loader(
            paths,
            args.backend,
            rank,
            world,
            device,
            batch_size=args.batch_size,
            num_workers=args.num_workers,
            shuffle=bool(args.shuffle),
            seed=args.seed,
            k=args.k,
            size=size,
            on_error="skip",
        )
        epochs = []
        for epoch in range(args.epochs):
            loader.set_epoch(epoch)
            ids, seen, frames, skipped = [], [], 0, {}
            dist.barrier()
            start = time.perf_counter()
            for batch_ids, batch, failed in loader:
                ids += batch_ids
                seen += batch_ids + [f.index for f in failed]  # every sample, delivered or skipped
                skipped.update((f.path, f.cause) for f in failed)
                frames += 0 if batch is None else batch.shape[0] * batch.shape[1]
            if cuda:
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - start
            nbytes = sum(sizes[i] for i in ids)
            fps, mb_s = (frames / seconds, nbytes / seconds / 1e6) if seconds > 0 else (0.0, 0.0)
            epochs.append(
                {
                    "epoch": epoch,
                    "samples": len(ids),
                    "frames": frames,
                    "bytes": nbytes,
                    "seconds": seconds,
                    "fps": fps,
                    "mb_s": mb_s,
                    "ids": seen,
                    "skipped": skipped,
                }
            )
        mine = {
            "rank": rank,
            "local_rank": int(os.environ.get("LOCAL_RANK", 0)),
            "host": socket.gethostname(),
            "device": device,
            "decode_device": loader.decode_device,
            "torch_threads": torch.get_num_threads(),
            "epochs": epochs,
        }
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            out = {
                "world_size": world,
                "backend": args.backend,
                "device_kind": args.device,
                "process_group": pg_backend,
                "num_samples": len(paths),
                "k": args.k,
                "batch_size": args.batch_size,
                "num_workers": args.num_workers,
                "epochs": [],
                "ranks": gathered,
            }
            for e in range(args.epochs):
                per_rank = [g["epochs"][e] for g in gathered]
                slowest = max(r["seconds"] for r in per_rank)
                frames = sum(r["frames"] for r in per_rank)
                check = distributed.exactly_once([r["ids"] for r in per_rank], len(paths))
                fps = frames / slowest if slowest > 0 else 0.0
                out["epochs"].append(
                    {"epoch": e, "seconds": slowest, "frames": frames, "aggregate_fps": fps, "exactly_once": check}
                )
            Path(args.output).write_text(json.dumps(out, indent=1))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


def launch(
    world_size: int, paths, output, backend: str = "pyav", device: str = "cpu", timeout: float = 600, **worker_options
) -> dict:
    """Run `main` in `world_size` ranks under torchrun, `worker_options` its flags (None leaves one out), and return
    rank 0's JSON. Raises RuntimeError with the ranks' output tail on failure or timeout. Notebook 30."""
    distributed.file_sizes(paths)  # a missing or empty file is named here, before any rank starts
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    paths_file = output.with_suffix(".paths.json")
    paths_file.write_text(json.dumps([str(p) for p in paths]))
    args = ["--backend", backend, "--device", device, "--paths", str(paths_file), "--output", str(output)]
    for name, value in worker_options.items():
        if value is not None:
            args += [f"--{name.replace('_', '-')}", str(value)]
    # `--standalone`: rendezvous on localhost at a free port, so parallel runs never collide
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}"]
    cmd = [*torchrun, "-m", "playbook_utils.bench.scaling", *args]
    rank_errors = f"{output.name}.rank*.error"  # what `main` writes where a rank fails
    for stale in [output, *output.parent.glob(rank_errors)]:
        stale.unlink(missing_ok=True)
    start = time.perf_counter()
    # Own process group, so a timeout ends torchrun and every rank it started, nothing else.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        raise RuntimeError(
            f"{world_size} rank(s) of {backend} did not finish in {timeout:.0f} s:\n{log[-2000:]}"
        ) from e
    if proc.returncode != 0 or not output.exists():
        errors = [f"{p.name.rsplit('.', 2)[1]}: {p.read_text()}" for p in sorted(output.parent.glob(rank_errors))]
        errors.sort(key=lambda line: "closed by peer" in line)  # the root cause first, its echoes after
        raise RuntimeError(
            f"{world_size} rank(s) of {backend} failed (exit {proc.returncode}): "
            f"{'; '.join(errors) or 'no rank recorded an error (see the output below)'}"
            f"\n--- last output of the ranks ---\n{log[-3000:]}"
        )
    result = json.loads(output.read_text())
    result["launch_s"] = round(time.perf_counter() - start, 2)
    result["command"] = " ".join(cmd)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
