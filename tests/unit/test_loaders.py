import os
from pathlib import Path

import pytest

from playbook_utils import DecodeError, loaders
from playbook_utils.bench import loader_bench, media, train_step
from playbook_utils.decoders import available, read_frames, video_info
from playbook_utils.tools import kit
from tests import reader_folder
from tests.sentences import numbers, sizes


@pytest.fixture(scope="module")
def paths():
    clips = media.default_media(smoke=True)
    return [clips["h264_144p_gop12.mp4"], clips["hevc_144p_gop48.mp4"]]


@pytest.mark.media
def test_dataset_items_hold_exactly_the_sampled_frames(paths):
    ds = loaders.VideoClipDataset(paths, backend="torchcodec", k=8)
    assert len(ds) == 2
    for i in range(2):
        item = ds[i]
        assert item.shape == (8, 3, 144, 256)
        assert [media.read_stamp(f) for f in item] == ds.indices(i)


@pytest.mark.media
def test_clip_strategy_is_reproducible_and_resizes(paths):
    a = loaders.VideoClipDataset(paths, strategy="clip", clip_len=4, stride=3, seed=7, size=(72, 128))
    b = loaders.VideoClipDataset(paths, strategy="clip", clip_len=4, stride=3, seed=7)
    assert a.indices(1) == b.indices(1) and a.indices(0) != loaders.VideoClipDataset(
        paths, strategy="clip", seed=8
    ).indices(0)
    item = a[1]
    assert item.shape == (4, 3, 72, 128)
    assert [media.read_stamp(f) for f in item] == a.indices(1)
    with pytest.raises(ValueError, match="strategy"):
        loaders.VideoClipDataset(paths, strategy="random")


@pytest.mark.media
def test_loader_batches_and_wait_measurement(paths):
    dl = loaders.make_loader(paths * 8, backend="pyav", batch_size=2, num_workers=1, k=4)
    # workers forked by a forkserver, not by the caller (a forked one hung on the H200 machine), and a time limit
    assert dl.multiprocessing_context.get_start_method() == loaders.START_METHOD == "forkserver" and dl.timeout > 0
    batch = next(iter(dl))
    assert batch.shape == (2, 4, 3, 144, 256)
    # 8 batches: 2 of warm-up, then the 2 the worker prefetched (decoded before the clock could start), then 4
    r = loader_bench.measure_loader(dl, step_s=0.01, steps=5)
    assert r["lookahead_batches"] == 2 and r["steps"] == 4 and r["steady"]
    assert 0 < r["wait_fraction"] < 1 and r["samples_per_s"] > 0 and not r["stopped_by_time"]
    capped = loader_bench.measure_loader(dl, step_s=0.2, steps=1000, max_seconds=0.5, min_steps=3)
    assert capped["stopped_by_time"] and capped["steps"] == 3
    short = loader_bench.measure_loader(dl, step_s=0.0, steps=10, warmup=4)  # the epoch ends after 2 measured
    assert short["steps"] == 2 and not short["steady"] and numbers(short["why"]) == ["2"]  # why: only 2 steps


@pytest.mark.media
def test_a_file_that_fails_as_it_is_read_is_skipped_and_named_by_the_measured_loaders(paths, tmp_path, monkeypatch):
    # data damaged mid-file passes the scan (its packets are whole) and fails in the decoder: the which-loader
    # command's sweep (notebooks 21 and 22) ended on such a file
    (tmp_path / "damaged.mp4").write_bytes(reader_folder.damaged_mid(Path(paths[0]).read_bytes()))
    damaged = str(tmp_path / "damaged.mp4")
    with pytest.raises(DecodeError):
        read_frames(damaged, list(range(video_info(damaged).num_frames)), "pyav", "cpu")
    monkeypatch.setattr(loader_bench, "FAILED_READING", {})  # what other tests of this process found stays theirs
    rows, stuck, _ = loader_bench.sweep_workers([*paths, damaged] * 12, ["pyav"], [1], 4, 2, 0.0, 12, 60, (64, 64),
                                                 60, "cpu", curve=False)  # fmt: skip
    assert not stuck and rows[0]["samples"] > 0
    assert list(rows[0]["files_skipped"]) == [damaged] and "Invalid data" in rows[0]["files_skipped"][damaged]
    assert loader_bench.accepted([*paths, damaged], "pyav")[0] == paths  # the loaders measured after leave it out
    fed = list(train_step.cpu_batches([damaged, *paths], "pyav", 0, 2, 4, size=(64, 64))())  # 21's training step
    assert [tuple(b.shape) for b in fed] == [(1, 4, 3, 64, 64), (1, 4, 3, 64, 64)]
    copies = [str(c) for c in loader_bench.epoch_items([damaged], 2, tmp_path / "epoch")]  # copies, as 21 makes them
    monkeypatch.setattr(loader_bench, "FAILED_READING", {})  # a process that has not read it yet
    rows, _, _ = loader_bench.sweep_workers([*paths * 6, *copies], ["pyav"], [1], 4, 2, 0.0, 12, 60, (64, 64), 60,
                                            "cpu", curve=False)  # fmt: skip
    assert list(rows[0]["files_skipped"]) == [damaged]  # the reader's file, not the copy
    assert loader_bench.accepted(copies, "pyav")[0] == []  # every copy of it left out after


@pytest.mark.media
def test_the_workers_server_started_ahead_is_the_one_the_loader_forks_from(paths):
    import os
    from multiprocessing import forkserver

    loaders.start_worker_server()  # returns at once; the server imports PyTorch in the background
    pid = forkserver._forkserver._forkserver_pid
    assert pid is not None and os.waitpid(pid, os.WNOHANG) == (0, 0)  # running
    dl = loaders.make_loader(paths, backend="pyav", batch_size=2, num_workers=1, k=4)
    assert next(iter(dl)).shape == (2, 4, 3, 144, 256)
    assert forkserver._forkserver._forkserver_pid == pid  # no second server
    loaders.close_loader(dl)


@pytest.mark.media
def test_skip_policy_finishes_the_epoch_and_lists_bad_files(paths, tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    items = paths + [empty, tmp_path / "missing.mp4"] + paths
    dl = loaders.make_loader(items, backend="pyav", batch_size=3, num_workers=1, k=4, on_error="skip")
    delivered, skipped = 0, []
    for batch, skips in dl:
        delivered += 0 if batch is None else batch.shape[0]
        skipped += skips
    assert delivered == 4
    assert [s.index for s in skipped] == [2, 3]
    assert [os.path.basename(s.path) for s in skipped] == ["empty.mp4", "missing.mp4"]
    assert all(s.path in s.cause for s in skipped)  # each names its file
    with pytest.raises(Exception, match="empty"):
        for _ in loaders.make_loader(items, backend="pyav", batch_size=3, num_workers=0, k=4):
            pass
    with pytest.raises(ValueError, match="on_error"):
        loaders.VideoClipDataset(items, on_error="ignore")


@pytest.mark.media
def test_gpu_loader_skips_a_file_it_cannot_read_when_asked_and_names_it(paths, tmp_path):
    # notebook 22 on an H100: an AV1 file NVDEC refused when read ended the playbook loader's whole measurement
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video")
    items = [paths[0], str(broken), paths[0]]
    L = loaders.GpuLoader(items, backend="pyav", device="cpu", threads=2, batch_size=2, size=32, k=4,
                          strategy="uniform", on_error="skip")  # fmt: skip
    assert [tuple(b.shape) for b in L] == [(2, 4, 3, 32, 32)] and L.frames_delivered == 8
    assert [p for p, _ in L.skipped] == [str(broken)] and str(broken) in L.skipped[0][1]
    with pytest.raises(Exception, match="broken.mp4"):
        list(
            loaders.GpuLoader(
                items, backend="pyav", device="cpu", threads=2, batch_size=2, size=32, k=4, strategy="uniform"
            )
        )


@pytest.mark.media
def test_gpu_loader_delivers_every_frame_in_order_model_ready(paths):
    # GpuLoader's threads and chunking, exercised with the CPU backend (the same code runs on CUDA)
    import torch

    L = loaders.GpuLoader([paths[0]] * 3, backend="pyav", device="cpu", threads=2, batch_size=2, size=32, chunk=40)
    batches = list(L)
    assert [tuple(b.shape) for b in batches] == [(2, 96, 3, 32, 32), (1, 96, 3, 32, 32)]
    assert batches[0].dtype == torch.float16 and L.frames_delivered == 3 * 96
    # model-ready: the same numbers as transforms.to_model_batch on the frames read in one piece
    from playbook_utils import transforms
    from playbook_utils.decoders import read_frames

    ref = transforms.to_model_batch(read_frames(paths[0], list(range(96))), 32, dtype=torch.float16)
    assert torch.equal(batches[1][0], ref)


@pytest.mark.media
def test_a_warmed_child_measures_a_loader_once_and_a_fresh_child_the_rest(paths):
    spec = {"kind": "gpu", "backend": "pyav", "threads": 1, "device": "cpu", "batch_size": 1}
    try:
        # one child left for later starts with the next call's: two warmed side by side, in one wait
        assert loader_bench.warm_children([spec], "cpu", [paths[1], paths[0]], later=True) == 0.0
        warm_s = loader_bench.warm_children([spec], "cpu", paths[0])
        runs = [loader_bench.measure_isolated({**spec, "paths": [paths[0]] * 6}) for _ in range(3)]
    finally:
        loader_bench.end_children()
    # the warmed children took the first two specs (their start-up is in warm_s, not in the call); the third got
    # a fresh child of its own
    assert warm_s > 0 and [r["status"] for r in runs] == ["ok"] * 3
    assert runs[0]["warm_s"] > 0 and runs[1]["warm_s"] > 0 and "warm_s" not in runs[2]
    assert all(r["frames"] == r["items"] * 96 and r["lookahead_items"] == 2 for r in runs)


@pytest.mark.media
def test_the_gpu_loaders_clips_are_the_shortest_gop_of_each_kind(paths, tmp_path):
    kinds = loader_bench.gpu_clips(paths, 3)
    assert kinds == [("h264", str(paths[0])), ("hevc", str(paths[1]))] and loader_bench.gpu_clips(paths, 1) == kinds[:1]
    # the commonest kinds first: open-GOP HEVC (x265's default) before closed, whatever the order of the files
    made = {g: media.make_clip(tmp_path / f"hevc_{g}.mp4", "hevc", 128, 72, num_frames=24, gop=12, bframes=2,
                               closed_gop=(g == "closed")) for g in ("closed", "open")}  # fmt: skip
    both = loader_bench.gpu_clips([made["closed"], made["open"], paths[0]], 2)
    assert both == [("h264", str(paths[0])), ("hevc", str(made["open"]))]


@pytest.mark.media
def test_isolated_measurement_reports_rates_and_failures_as_data(paths, tmp_path):
    r = loader_bench.measure_isolated(
        {"kind": "gpu", "backend": "pyav", "threads": 1, "paths": [paths[0]] * 12, "device": "cpu", "batch_size": 1}
    )
    # 12 videos, a look-ahead of 2: the run stops once its window holds two look-aheads, before the drain
    assert r["lookahead_items"] == 2 and r["steady"] and r["stopped_early"] and "wait" not in r
    assert r["items"] >= 4 and r["epoch_items"] <= 12 - 2 and r["frames"] == r["items"] * 96 and r["frames_per_s"] > 0
    w = loader_bench.measure_isolated(
        {
            "kind": "gpu",
            "backend": "pyav",
            "threads": 1,
            "paths": [paths[0]] * 6,
            "device": "cpu",
            "batch_size": 1,
            "step_s": 0.0,
            "steps": 2,
        }
    )
    assert w["status"] == "ok" and "frames" not in w and w["wait"]["steps"] == 2
    # how busy the machine was inside the window: no GPU here, so no NVDEC or SM figure
    assert {"cpu_pct", "nvdec_pct", "sm_pct", "samples", "busy_why"} == set(r["utilization"])
    assert r["utilization"]["nvdec_pct"] is None
    sampled = loader_bench.measure_isolated(
        {
            "kind": "gpu",
            "backend": "pyav",
            "threads": 2,
            "paths": [paths[0]] * 3,
            "device": "cpu",
            "batch_size": 1,
            "strategy": "uniform",
            "k": 4,
        }
    )
    assert sampled["epoch_frames"] == 3 * 4 and sampled["batches"] == 3 and not sampled["steady"]
    nope = tmp_path / "nope.mp4"
    bad = loader_bench.measure_isolated(
        {
            "kind": "gpu",
            "backend": "pyav",
            "threads": 1,
            "paths": [nope],
            "device": "cpu",
            "batch_size": 1,
        }
    )
    assert bad["status"] == "error" and nope.name in bad["error"]


@pytest.mark.media
def test_flat_out_counts_every_frame_delivered(paths):
    L = loaders.GpuLoader([paths[0]] * 3, backend="pyav", device="cpu", threads=2, batch_size=2, size=32, chunk=40)
    r = loader_bench.measure_flat_out(L)
    assert r["epoch_frames"] == 3 * 96 == L.frames_delivered and r["batches"] == 2 and r["lookahead_items"] == 4


@pytest.mark.media
def test_process_loader_delivers_every_video_once_model_ready(paths, tmp_path):
    # GpuProcessLoader with the CPU backend: tensors travel through shared memory instead of CUDA IPC,
    # the rest of the code is the same
    import torch

    from playbook_utils import transforms
    from playbook_utils.decoders import read_frames

    items = [paths[0], paths[1], paths[0], paths[1], paths[0]]
    L = loaders.GpuProcessLoader(
        items, processes=2, threads=1, batch_size=2, backend="pyav", device="cpu", size=32, chunk=40
    )
    videos = [v for b in L for v in (b if isinstance(b, list) else list(b))]
    assert len(videos) == len(items) and L.frames_delivered == sum(v.shape[0] for v in videos)
    refs = {
        str(p): transforms.to_model_batch(read_frames(p, list(range(n))), 32, dtype=torch.float16)
        for p, n in ((paths[0], 96), (paths[1], media.probe(paths[1]).num_frames))
    }
    matched = [next(k for k, r in refs.items() if r.shape == v.shape and torch.equal(r, v)) for v in videos]
    assert sorted(matched) == sorted(str(p) for p in items)  # every video once, in whatever order they finished

    r = loader_bench.measure_flat_out(
        loaders.GpuProcessLoader(
            [paths[0]] * 4, processes=2, threads=1, batch_size=1, backend="pyav", device="cpu", size=32
        ),
        warmup_batches=1,
    )
    assert r["batches"] == 3 and r["epoch_frames"] == 4 * 96 and r["startup_s"] > 0 and r["lookahead_items"] == 8

    bad = loaders.GpuProcessLoader(
        [tmp_path / "nope.mp4"], processes=2, threads=1, batch_size=1, backend="pyav", device="cpu"
    )
    with pytest.raises(RuntimeError, match="nope.mp4"):
        list(bad)


GPU_LOADER_BACKENDS = [b for b in ("pynvvideocodec", "torchcodec") if b in available("cuda")]


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif(not GPU_LOADER_BACKENDS, reason="needs a CUDA GPU with PyNvVideoCodec or TorchCodec")
@pytest.mark.parametrize("backend", GPU_LOADER_BACKENDS or ["none"])
def test_process_loader_hands_over_cuda_videos_exactly(backend, paths):
    # the CUDA IPC path: videos decoded and resized in worker processes arrive on the GPU, equal to one-process results
    import torch

    L = loaders.GpuProcessLoader(
        [paths[0]] * 4, processes=2, threads=2, batch_size=2, backend=backend, device="cuda", size=64, chunk=24
    )
    batches = list(L)
    ref = next(
        iter(loaders.GpuLoader([paths[0]], backend=backend, device="cuda", threads=1, batch_size=1, size=64, chunk=24))
    )[0]
    assert len(batches) == 2 and all(b.is_cuda and b.shape[0] == 2 for b in batches)
    assert all(torch.equal(v, ref) for b in batches for v in b)


def test_gpu_loader_threads_share_a_stream_of_their_own_where_the_library_works_on_the_current_one(monkeypatch):
    # on the default stream, TorchCodec's, PyNvVideoCodec's and DALI's work queues behind the training step's, and the step
    # waits for data; one stream for all the threads keeps one memory pool (a stream each ran 32 threads out of GPU
    # memory)
    import threading

    import torch

    made = []
    monkeypatch.setattr(torch.cuda, "Stream", lambda device: made.append(device) or f"stream {len(made)}")
    monkeypatch.setattr(torch.cuda, "stream", lambda s: s)
    L = loaders.GpuLoader([], backend="pyav", device="cpu")
    first, again = L._stream("torchcodec", "cuda:1"), L._stream("torchcodec", "cuda:1")
    other = []
    thread = threading.Thread(target=lambda: other.append(L._stream("torchcodec", "cuda:1")))
    thread.start()
    thread.join()
    assert first == again == "stream 1" and other == ["stream 1"] and made == ["cuda:1"]
    assert L._stream("torchcodec", "cuda:0") == "stream 2" and made == ["cuda:1", "cuda:0"]  # one a device
    assert L._stream("pynvvideocodec", "cuda:1") == "stream 1"  # its decoders copy out on the current stream too
    assert L._stream("dali", "cuda:1") == "stream 1"  # its output is copied out on the current stream
    for backend, device in (("torchcodec", "cpu"), ("pyav", "cuda"), ("dali", "cpu")):
        assert not isinstance(L._stream(backend, device), str), (backend, device)  # the current stream, as it is
    assert len(made) == 2


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif("torchcodec" not in available("cuda"), reason="needs TorchCodec with CUDA")
def test_torchcodec_gpu_loader_decodes_beside_a_busy_default_stream_exactly(paths, monkeypatch):
    # the threads on their stream while the default one is kept busy, as by a training step: the frames are those
    # of a plain read on the default stream
    import threading

    import torch

    from playbook_utils import transforms
    from playbook_utils.decoders import read_frames

    seen, real = set(), loaders.read_frames
    monkeypatch.setattr(
        loaders, "read_frames", lambda *a, **kw: seen.add(torch.cuda.current_stream()) or real(*a, **kw)
    )
    n = media.probe(paths[0]).num_frames
    ref = transforms.to_model_batch(
        read_frames(paths[0], list(range(n)), "torchcodec", "cuda"), 64, dtype=torch.float16
    )
    busy, stop = torch.randn(4096, 4096, device="cuda"), threading.Event()

    def keep_busy():
        while not stop.is_set():
            torch.mm(busy, busy)

    worker = threading.Thread(target=keep_busy, daemon=True)
    worker.start()  # its own thread, on the default stream: matrix products queued while the loader decodes
    try:
        L = loaders.GpuLoader([paths[0]] * 4, backend="torchcodec", device="cuda", threads=2, batch_size=2, size=64,
                              chunk=24)  # fmt: skip
        batches = [b.clone() for b in L]
    finally:
        stop.set()
        worker.join()
    assert torch.cuda.default_stream() not in seen and len(seen) == 1  # one for the threads
    assert [tuple(b.shape) for b in batches] == [(2, n, 3, 64, 64)] * 2
    assert all(torch.equal(v, ref) for b in batches for v in b)


@pytest.mark.media
def test_loader_workers_share_the_cores_among_their_decoders(paths):
    import os

    from playbook_utils import decoders
    from playbook_utils.decoders import base

    cores = len(os.sched_getaffinity(0))
    assert loaders.share_of_cores(2) == max(1, cores // 2) and loaders.share_of_cores(10 * cores) == 1
    decoders.why_unavailable("pyav")  # the parent probes PyAV's import: its workers are told so
    probed = decoders.child_env()[decoders.PROBED_ENV]
    assert "av" in probed.split(",")
    dl = loaders.make_loader(paths, backend="pyav", batch_size=2, num_workers=2, k=4)
    assert dl.worker_init_fn.args == (max(1, cores // 2), probed) and dl.timeout > 0
    assert loaders.make_loader(paths, num_workers=2, decoder_threads=3).worker_init_fn.args == (3, probed)
    saved = os.environ.get(decoders.PROBED_ENV)
    try:  # what a worker does at start-up, and the frames stay exact with one thread per decoder
        loaders._worker_start(1, probed, 0)
        assert base.CPU_THREADS == 1 and os.environ[decoders.PROBED_ENV] == probed
        for backend in ("pyav", "torchcodec"):
            got = decoders.read_frames(paths[0], [7, 0, 3], backend=backend)
            assert [media.read_stamp(f) for f in got] == [7, 0, 3], backend
    finally:
        decoders.set_cpu_threads(0)
        if saved is None:
            os.environ.pop(decoders.PROBED_ENV, None)
        else:
            os.environ[decoders.PROBED_ENV] = saved


def test_our_errors_keep_type_file_backend_and_cause_across_processes(tmp_path):
    import pickle

    from playbook_utils.errors import BackendUnavailable, DecodeError

    for e in (
        DecodeError(tmp_path / "a b.mp4", "cause: with a colon", "pyav"),
        BackendUnavailable(None, "no GPU", "dali"),
        DecodeError("x.mp4", "file is empty"),
    ):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and (back.path, back.backend, back.cause, str(back)) == (
            e.path,
            e.backend,
            e.cause,
            str(e),
        )
    # what PyTorch's DataLoader does with a worker's error: type(message), the message its formatted traceback
    import traceback

    try:
        raise DecodeError("/data/clip 7.mp4", "cannot open as a media file (InvalidDataError: x)", "decord")
    except DecodeError as e:
        text = f"Caught DecodeError in DataLoader worker process 0.\nOriginal {''.join(traceback.format_exception(e))}"
    rebuilt = DecodeError(text)
    assert (rebuilt.path, rebuilt.backend, rebuilt.cause) == (
        "/data/clip 7.mp4",
        "decord",
        "cannot open as a media file (InvalidDataError: x)",
    )
    assert str(rebuilt) == text


@pytest.mark.media
def test_a_worker_error_reaches_the_training_process_as_decode_error(paths, tmp_path):
    """A spawned DataLoader worker raises DecodeError; the parent catches DecodeError naming the file and the
    backend asked for (not the probe that found the fault)."""
    from playbook_utils import distributed
    from playbook_utils.errors import DecodeError

    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"not a video\n" * 200)
    loader = loaders.make_loader([paths[0], garbage], backend="pyav", batch_size=1, num_workers=1, k=2)
    with pytest.raises(DecodeError) as e:
        list(loader)
    with pytest.raises(DecodeError) as here:  # the same item read in this process: the cause the worker met
        loaders.VideoClipDataset([garbage], backend="pyav", k=2)[0]
    assert (e.value.path, e.value.backend, e.value.cause) == (str(garbage), "pyav", here.value.cause)
    assert "Traceback" in str(e.value)  # the worker's traceback is kept in the message
    sharded = distributed.sharded_loader(
        [paths[0], tmp_path / "gone.mp4"], "decord", rank=0, world_size=1, batch_size=1, num_workers=1, k=2
    )
    with pytest.raises(DecodeError) as e:
        list(sharded)
    assert (e.value.path, e.value.backend) == (str(tmp_path / "gone.mp4"), "decord")
    assert e.value.path in str(e.value)


def _spawned_workers(pids_before) -> list:
    import psutil

    return [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in pids_before and "spawn_main" in " ".join(p.cmdline())
    ]


def _new_threads(before: set, within_s: float = 5.0) -> list:
    """Threads alive now that were not in `before`, after up to `within_s` for them to end (a closed queue's
    feeder thread takes a moment; a leaked thread never ends)."""
    import threading
    import time

    deadline = time.monotonic() + within_s
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted(t.name for t in set(threading.enumerate()) - before)


@pytest.mark.media
def test_closing_now_ends_the_workers_mid_batch_without_a_failure_reported(paths, capfd):
    """A measurement that is over ends its workers at once (close_loader(now=True)): each ended by SIGTERM, the
    parent's watch over them lifted first (no "DataLoader worker ... is killed by signal" raised later), no
    process left behind, and a new loader works after it."""
    import time

    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    dl = loaders.make_loader([paths[1], paths[0]] * 8, backend="pyav", batch_size=2, num_workers=2, k=48)
    it = iter(dl)
    next(it)
    workers = list(it._workers)
    del it
    assert loaders.close_loader(dl, now=True) == [-15, -15] == [w.exitcode for w in workers]
    time.sleep(0.5)  # a SIGCHLD the parent still watched would raise in the next statement
    again = loaders.make_loader([paths[0]] * 2, backend="pyav", batch_size=1, num_workers=1, k=4)
    assert next(iter(again)).shape[:2] == (1, 4)
    loaders.close_loader(again)
    assert _spawned_workers(before) == []
    assert "killed by signal" not in capfd.readouterr().err


@pytest.mark.media
def test_breaking_out_early_ends_every_worker_cleanly(paths, capfd):
    """Drop or close a loader after one batch, with the next ones in flight: every worker exits 0 (no SIGABRT,
    "terminate called without an active exception"), and no process or thread is left behind."""
    import gc
    import threading

    import psutil

    from playbook_utils import distributed

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    threads = set(threading.enumerate())
    codes = []
    for trial, backend in enumerate(("pyav", "decord", "pyav", "decord")):
        items = [paths[1], paths[0]] * 6
        if trial == 2:
            dl = distributed.sharded_loader(items, backend, batch_size=3, num_workers=2, k=24)
            it = iter(dl.loader)
        else:
            dl = loaders.make_loader(items, backend=backend, batch_size=3, num_workers=2, k=24)
            it = iter(dl)
        next(it)
        workers = list(it._workers)
        del it
        if trial % 2:
            assert loaders.close_loader(dl) == [w.exitcode for w in workers]
        elif trial == 2:
            assert dl.close() == [w.exitcode for w in workers]
        else:
            del dl
            gc.collect()
        codes += [(backend, w.exitcode) for w in workers]
    assert codes == [(b, 0) for b, _ in codes]
    err = capfd.readouterr().err
    assert "terminate called" not in err and "Aborted" not in err, err[-2000:]
    assert _spawned_workers(before) == [] and _new_threads(threads) == []
    # the cause, shown directly: a closed queue's feeder thread is done once finish_sending returns
    import multiprocessing

    q = multiprocessing.get_context("spawn").Queue()
    q.put(b"x" * 100_000)  # more than a pipe holds: the feeder is still writing
    q.close()
    assert any(t.name == "QueueFeederThread" for t in threading.enumerate())
    # read through a copy of the pipe's end: the feeder closes the queue's own reader as it exits, which a
    # thread still reading the message's last bytes from it would meet as a closed handle
    from multiprocessing.connection import Connection

    drain = Connection(os.dup(q._reader.fileno()), writable=False)
    reader = threading.Thread(target=drain.recv_bytes)
    reader.start()
    loaders.finish_sending(10)
    reader.join(10)
    drain.close()
    assert not any(t.name == "QueueFeederThread" for t in threading.enumerate())


@pytest.mark.media
def test_gpu_side_loaders_stopped_early_leave_no_thread_or_process(paths):
    """GpuLoader's threads and GpuProcessLoader's processes end when the consumer breaks out after one batch
    (with the CPU backend: the same code runs on CUDA)."""
    import threading

    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    threads = set(threading.enumerate())
    for b in loaders.GpuLoader([paths[0]] * 8, backend="pyav", device="cpu", threads=2, batch_size=1, size=32):
        break
    assert _new_threads(threads) == []
    codes = []
    for _ in range(2):
        L = loaders.GpuProcessLoader(
            [paths[0], paths[1]] * 4,
            processes=2,
            threads=2,
            batch_size=1,
            backend="pyav",
            device="cpu",
            size=32,
            chunk=24,
        )
        for b in L:
            break
        codes += L.worker_exit_codes
    assert codes == [0, 0, 0, 0] and _spawned_workers(before) == []
    assert _new_threads(threads) == []


@pytest.fixture(scope="module")
def scraped(paths, tmp_path_factory):
    """A scraped dataset in miniature: good clips, one too short for the clip, two of another size, an empty, a
    missing and a garbage file. Returns (items, {index: what the skip record must say})."""
    d = tmp_path_factory.mktemp("scraped")
    short = media.make_clip(d / "short.mp4", "h264", 256, 144, num_frames=6, gop=6)
    wide = media.make_clip(d / "wide.mp4", "h264", 320, 180, num_frames=24, gop=12)
    (d / "empty.mp4").write_bytes(b"")
    (d / "garbage.mp4").write_bytes(b"<html>not found</html>\n" * 50)
    items = [
        paths[0],
        short,
        paths[1],
        d / "empty.mp4",
        wide,
        paths[0],
        d / "missing.mp4",
        paths[1],
        d / "garbage.mp4",
        wide,
        paths[1],
    ]
    bad = {
        1: "too short for the clip: 6 frames",
        3: "empty",
        4: "frames of 320x180 (width x height) do not fit batches of 256x144",
        6: "does not exist",
        8: "cannot open",
        9: "do not fit",
    }
    return items, bad


CLIP = {"strategy": "clip", "clip_len": 4, "stride": 3}


@pytest.mark.media
def test_skip_policy_covers_every_fault_of_the_sample_and_delivers_the_rest_once(scraped):
    from playbook_utils import distributed

    items, bad = scraped
    good = [i for i in range(len(items)) if i not in bad]
    dl = loaders.make_loader(items, backend="pyav", batch_size=3, num_workers=2, on_error="skip", **CLIP)
    delivered, skipped = 0, []
    for batch, skips in dl:
        delivered += 0 if batch is None else batch.shape[0]
        skipped += skips
    loaders.close_loader(dl)
    assert delivered == len(good) and sorted(s.index for s in skipped) == sorted(bad)
    for s in skipped:
        assert bad[s.index] in s.cause and s.path == str(items[s.index]), s
    # sharded: over two ranks, the delivered ids and the skipped ones hold every sample exactly once, and each
    # delivered clip is exactly the frames its sampler asked for
    seen, ranks = [], []
    for rank in (0, 1):
        loader = distributed.sharded_loader(
            items,
            "pyav",
            rank=rank,
            world_size=2,
            batch_size=2,
            shuffle=True,
            num_workers=rank,
            on_error="skip",
            **CLIP,
        )
        ds = loader.loader.dataset.dataset
        ids = []
        for batch_ids, frames, skips in loader:
            for i, clip in zip(batch_ids, frames if frames is not None else []):
                assert [media.read_stamp(f) for f in clip] == ds.indices(i)
            ids += batch_ids
            seen += skips
        loader.close()
        ranks.append(ids)
    assert distributed.exactly_once([*ranks, [s.index for s in seen]], len(items))["ok"]
    assert sorted(i for r in ranks for i in r) == good


@pytest.mark.media
def test_mixed_sizes_are_resized_batched_as_lists_or_named(scraped):
    from playbook_utils.errors import DecodeError

    items, bad = scraped
    fine = [items[0], items[4], items[2]]  # 144x256, 180x320, 144x256
    resized = next(iter(loaders.make_loader(fine, batch_size=3, num_workers=0, size=(72, 128), **CLIP)))
    assert tuple(resized.shape) == (3, 4, 3, 72, 128)
    listed = next(iter(loaders.make_loader(fine, batch_size=3, num_workers=0, mixed_sizes="list", **CLIP)))
    assert [tuple(v.shape) for v in listed] == [(4, 3, 144, 256), (4, 3, 180, 320), (4, 3, 144, 256)]
    ds = loaders.VideoClipDataset(fine, mixed_sizes="list", **CLIP)
    assert all([media.read_stamp(f) for f in v] == ds.indices(i) for i, v in enumerate(listed))
    with pytest.raises(
        ValueError, match=f"{items[4]}: frames of 320x180 .width x height. do not fit .*{items[0]}.*size=.*'list'"
    ):
        list(loaders.make_loader(fine, batch_size=3, num_workers=0, **CLIP))
    with pytest.raises(DecodeError, match="too short for the clip") as e:
        list(loaders.make_loader([items[0], items[1]], batch_size=2, num_workers=0, **CLIP))
    assert e.value.path == str(items[1]) and e.value.backend == "pyav"
    with pytest.raises(ValueError, match="mixed_sizes"):
        loaders.VideoClipDataset(fine, mixed_sizes="pad")


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif(not GPU_LOADER_BACKENDS, reason="needs a CUDA GPU with PyNvVideoCodec or TorchCodec")
@pytest.mark.parametrize("backend", GPU_LOADER_BACKENDS or ["none"])
def test_gpu_loaders_stopped_early_end_cleanly_and_free_gpu_memory(backend, paths):
    """On CUDA: breaking out of GpuLoader and GpuProcessLoader after one batch, three times, leaves no worker
    ended by a signal, no thread or process behind, and this process's CUDA memory where it was."""
    import threading

    import psutil
    import torch

    torch.zeros(1, device="cuda")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    threads = set(threading.enumerate())
    memory = torch.cuda.memory_allocated()
    codes, logged = [], []
    with kit.native_output(logged):  # the workers write to this process's stderr, which this catches
        for _ in range(3):
            for batch in loaders.GpuLoader(
                [paths[0]] * 8, backend=backend, device="cuda", threads=2, batch_size=1, size=64, chunk=24
            ):
                break
            L = loaders.GpuProcessLoader(
                [paths[0], paths[1]] * 4,
                processes=2,
                threads=2,
                batch_size=1,
                backend=backend,
                device="cuda",
                size=64,
                chunk=24,
            )
            for batch in L:  # the batch is the loader's copy: no worker's tensor is still mapped when they exit
                break
            del batch
            codes += L.worker_exit_codes
    torch.cuda.synchronize()
    assert codes == [0] * 6 and _spawned_workers(before) == [] and _new_threads(threads) == []
    assert torch.cuda.memory_allocated() == memory
    # 23 on the H200 (12-04) logged "Producer process has been terminated before all shared CUDA tensors released"
    assert not [line for line in logged if "Producer process has been terminated" in line], logged


class _RoundsLoader:
    """A DataLoader's timing without decoding, on a simulated clock: `num_workers` workers started together, each
    making one batch of `batch_size` items every `period` s, delivered in turn (batch n from worker n %
    num_workers), so they arrive in bursts of one per worker. Its true rate is num_workers x batch_size / period
    items per second. `clock` and `sleep` are what `measure_loader` reads and spends."""

    def __init__(self, num_workers: int, period: float, batches: int, batch_size: int = 1):
        self.num_workers, self.period, self.batches, self.batch_size = num_workers, period, batches, batch_size
        self.prefetch_factor = 2
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __iter__(self):
        import torch

        for n in range(self.batches):
            ready = (n // self.num_workers + 1) * self.period  # the worker's k-th batch, k = n // workers
            self.now = max(self.now, ready)  # the consumer waits for it
            yield torch.zeros(self.batch_size, 1)


@pytest.mark.parametrize("steps", [3, 12, 20])
@pytest.mark.parametrize("step_s", [0.0, 0.005])
def test_measure_loader_counts_whole_rounds_of_workers_and_reads_their_true_rate(steps, step_s):
    # 8 workers, one batch each per 0.12 s: 66.7 batches/s, delivered in bursts of 8. Steps inside one burst
    # read a burst, not a rate (counted as asked, 12 steps read 100 batches/s and 20 steps 83): whole rounds read
    # the rate.
    loader = _RoundsLoader(num_workers=8, period=0.12, batches=80)
    r = loader_bench.measure_loader(
        loader, step_s=step_s, steps=steps, warmup=2, clock=loader.clock, sleep=loader.sleep
    )
    assert r["steps"] % 8 == 0 and r["steps"] >= steps and r["steady"]
    assert r["samples_per_s"] == pytest.approx(8 / 0.12, rel=0.02)
    assert loader_bench.whole_rounds(steps, 8) == r["steps"]
    assert 0 < r["wait_fraction"] <= 1


def test_measure_loader_counted_as_asked_reads_a_burst():
    # the old count, for the record: 12 steps of 8 workers that deliver in bursts read well above the true rate
    loader = _RoundsLoader(num_workers=8, period=0.12, batches=80)
    real = loader_bench.whole_rounds
    try:
        loader_bench.whole_rounds = lambda steps, workers: steps
        r = loader_bench.measure_loader(loader, step_s=0.0, steps=12, warmup=2, clock=loader.clock, sleep=loader.sleep)
    finally:
        loader_bench.whole_rounds = real
    assert r["samples_per_s"] > 1.2 * 8 / 0.12


class _AheadLoader:
    """A `GpuLoader`'s timing without decoding, on a simulated clock: one video finished every 1 / `rate` s, at most
    `lookahead` videos decoded ahead of the consumer, whose first request comes once that look-ahead is full (the
    loader's start-up). Its true rate is `rate` videos per second. `clock` and `sleep` as `_RoundsLoader`'s."""

    def __init__(self, rate: float, lookahead: int, items: int, batch_size: int, handover_s: float = 0.0):
        self.rate, self.lookahead, self.items, self.batch_size = rate, lookahead, items, batch_size
        self.handover_s = handover_s  # what handing over a ready batch costs (the GIL among decoding threads)
        self.now = lookahead / rate

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __iter__(self):
        import torch

        done, taken = [], []  # when each video was finished, when it was handed out
        for first in range(0, self.items, self.batch_size):
            for k in range(first, first + self.batch_size):
                free = taken[k - self.lookahead] if k >= self.lookahead else 0.0  # a slot frees when one is taken
                done.append(max(done[-1] if done else 0.0, free) + 1 / self.rate)
            self.now = max(self.now + self.handover_s, done[-1])  # the consumer waits for the batch's last video
            taken += [self.now] * self.batch_size
            yield torch.zeros(self.batch_size, 1)


@pytest.mark.parametrize("handover_s", [0.0, 0.004])
@pytest.mark.parametrize("lookahead", [8, 32, 128])
def test_measure_loader_lets_a_look_ahead_drain_before_its_clock(lookahead, handover_s):
    # The H200 before: TorchCodec x64 threads (look-ahead 128) feeding a 100 ms step drew 2% above its own steady
    # rate, the clock starting while the loader was still refilling what the skipped steps had eaten.
    batch = 4
    steps = loader_bench.WAIT_LOOKAHEADS * lookahead // batch  # as notebook 21's wait run (`wait_steps_for`)
    runs = {}
    for drain in (True, False):
        loader = _AheadLoader(20.0, lookahead, batch * (steps + 3) + 2 * lookahead, batch, handover_s)
        runs[drain] = loader_bench.measure_loader(
            loader, step_s=0.1, steps=steps, clock=loader.clock, sleep=loader.sleep, drain=drain
        )
    assert runs[True]["samples_per_s"] == pytest.approx(20.0, rel=0.01) and runs[True]["steps"] == steps
    assert runs[True]["lookahead_batches"] == lookahead // batch
    if lookahead >= 32:  # the old count read high wherever the loader refilled its look-ahead during the skipped steps
        assert runs[False]["samples_per_s"] > 1.02 * 20.0


def test_an_item_too_large_for_a_worker_is_refused_before_decoding(paths, monkeypatch):
    # Before: no pixel or byte limit anywhere; one 50 KB file of 4096 x 4096 frames took 754 MB to 2.3 GB.
    from playbook_utils import decoders
    from playbook_utils.errors import DecodeError

    info = loaders.video_info(paths[0])
    pixels = info.width * info.height
    monkeypatch.setattr(decoders.adapter("pyav"), "read", lambda *a, **k: pytest.fail("decoded a refused item"))
    ds = loaders.VideoClipDataset(paths[:1], k=4, max_frame_pixels=pixels - 1, on_error="skip")
    s = ds[0]
    assert isinstance(s, loaders.Skipped) and str(paths[0]) in s.cause and "max_frame_pixels" in s.cause
    assert sizes(s.cause) == [(info.width, info.height)]  # the frame size the limit refused
    ds = loaders.VideoClipDataset(paths[:1], k=4, max_item_bytes=4 * 3 * pixels - 1)
    with pytest.raises(DecodeError, match=r"4 frames of .* above max_item_bytes"):
        ds[0]
    assert loaders.MAX_FRAME_PIXELS == 8192 * 8192 and loaders.MAX_ITEM_BYTES == 2 * 2**30
    monkeypatch.undo()
    exact = loaders.VideoClipDataset(paths[:1], k=4, max_item_bytes=4 * 3 * pixels, max_frame_pixels=None)
    assert tuple(exact[0].shape) == (4, 3, info.height, info.width)  # at the limit: read


def test_a_shard_sample_too_large_is_skipped_and_named(tmp_path):
    from playbook_utils import shards

    clip = media.make_clip(tmp_path / "c.mp4", "h264", 64, 48, num_frames=8, gop=4)
    shard = shards.write_shards([("a", {"mp4": clip})], tmp_path / "out", per_shard=1)
    (item,) = list(shards.ShardDataset(shard, k=2, max_frame_pixels=64 * 48 - 1))
    assert isinstance(item, loaders.Skipped) and "a.mp4" in item.path and "max_frame_pixels" in item.cause


@pytest.mark.media
def test_a_route_reads_each_file_with_the_first_backend_that_takes_it(paths):
    """28 item 2, routing per file, on the CPU: DALI's CPU decoder takes VP9 only, so the route (dali, pyav) reads
    the VP9 clip with DALI and the H.264 and HEVC ones with PyAV, every item exact; a file no entry takes is the
    item's BackendUnavailable naming every entry's reason, and with on_error='skip' a Skipped record."""
    from playbook_utils.decoders import why_unavailable
    from playbook_utils.errors import BackendUnavailable

    vp9 = media.default_media(smoke=True)["vp9_144p_gop12.webm"]
    files = [*paths, vp9]
    ds = loaders.VideoClipDataset(files, backend=("dali", "pyav@cpu"), k=6)
    want_vp9 = ("dali", "cpu") if why_unavailable("dali", "cpu", vp9) is None else ("pyav", "cpu")
    assert [ds.backend_for(i) for i in range(3)] == [("pyav", "cpu"), ("pyav", "cpu"), want_vp9]
    for i in range(3):
        assert [media.read_stamp(f) for f in ds[i]] == ds.indices(i)
    only_dali = loaders.VideoClipDataset(paths, backend=("dali", "dali@cpu"), k=6)
    with pytest.raises(BackendUnavailable, match=r"no backend of the route takes it \(dali on cpu: .*; dali on cpu"):
        only_dali[0]
    with pytest.raises(BackendUnavailable) as refused:  # a route of one entry: DALI's own refusal
        loaders.VideoClipDataset(paths, backend=["dali"], k=6)[0]
    assert (refused.value.backend, refused.value.cause) == ("dali", why_unavailable("dali", "cpu", paths[0]))
    skipped = loaders.VideoClipDataset(paths, backend=["dali"], k=6, on_error="skip")[0]
    assert isinstance(skipped, loaders.Skipped) and skipped.cause == str(refused.value)
    assert loaders.parse_route("torchcodec", "cuda") == [("torchcodec", "cuda")]
    assert loaders.parse_route(["torchcodec@cuda", "pyav@cpu"], "cuda") == [("torchcodec", "cuda"), ("pyav", "cpu")]
    with pytest.raises(ValueError, match="at least one"):
        loaders.parse_route([], "cpu")


@pytest.mark.media
def test_a_route_passes_on_a_file_its_first_entry_refuses_only_when_it_reads_it(paths, monkeypatch):
    """Some refusals come only from the read (SPDL's NVDEC windows on some open-GOP files, TorchCodec's silent
    CPU fallback): the route hands such a file to its next entry, asks the refusing one no more for it, and says
    which entry read it; a dataset of one backend raises the refusal, and a route none of whose entries reads
    the file names every entry's reason."""
    from playbook_utils.decoders import adapter
    from playbook_utils.errors import BackendUnavailable

    pyav, refused_file, calls = adapter("pyav"), str(paths[0]), []
    original = pyav.read  # on the instance: an earlier test's monkeypatch may leave the method bound there

    def read(path, indices, device, info):
        calls.append(str(path))
        if str(path) == refused_file:
            raise BackendUnavailable(path, "cannot read this one exactly", "pyav")
        return original(path, indices, device, info)

    monkeypatch.setattr(pyav, "read", read)
    ds = loaders.VideoClipDataset(paths, backend=("pyav@cpu", "torchcodec@cpu"), k=6)
    assert ds.backend_for(0) == ("pyav", "cpu")  # nothing says so before the read
    for _ in range(2):
        assert [media.read_stamp(f) for f in ds[0]] == ds.indices(0)
    assert calls.count(refused_file) == 1 and ds.backend_for(0) == ("torchcodec", "cpu")
    assert ds.backend_for(1) == ("pyav", "cpu") and [media.read_stamp(f) for f in ds[1]] == ds.indices(1)
    # a GpuLoader-style caller that chose the entry beforehand, chunk by chunk, is moved on as well
    assert ds.read(0, [0, 1], ("pyav", "cpu")).shape[0] == 2 and calls.count(refused_file) == 1
    with pytest.raises(BackendUnavailable, match="cannot read this one exactly"):
        loaders.VideoClipDataset(paths, backend="pyav", k=6)[0]
    both = loaders.VideoClipDataset(paths, backend=("pyav@cpu", "pyav@cpu"), k=6)
    with pytest.raises(BackendUnavailable, match=r"no backend of the route takes it \(pyav on cpu: refused when read"):
        both[0]


def test_drain_takes_every_message_until_each_worker_says_goodbye_or_dies():
    # GpuProcessLoader's end of epoch: what the workers sent and no one took is received and dropped (on CUDA a
    # message maps a worker's tensor, which must be released before that worker exits), up to each one's 'bye'
    import queue
    import time

    from playbook_utils.loaders import _drain

    class Proc:
        def __init__(self, alive):
            self.alive = alive

        def is_alive(self):
            return self.alive

    q = queue.Queue()
    for m in [("video", "a"), ("video", "b"), ("bye", 0), ("video", "c"), ("bye", 1)]:
        q.put(m)
    t0 = time.monotonic()
    _drain(q, {0: Proc(True), 1: Proc(True)})
    assert q.empty() and time.monotonic() - t0 < 5
    q.put(("video", "d"))  # a worker that died without a word: not waited for
    t0 = time.monotonic()
    _drain(q, {0: Proc(False)}, limit_s=5)
    assert time.monotonic() - t0 < 1

    class Broken(queue.Queue):
        def get(self, timeout=None):  # a message from a worker already gone cannot be rebuilt
            raise ConnectionRefusedError("its sender is gone")

    t0 = time.monotonic()
    _drain(Broken(), {0: Proc(True)}, limit_s=1)  # gives up at its limit, raising nothing
    assert 0.9 < time.monotonic() - t0 < 3
