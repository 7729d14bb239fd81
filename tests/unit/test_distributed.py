import pytest
import torch

from playbook_utils import distributed, env
from playbook_utils.bench import media, scaling
from playbook_utils.decoders import available


@pytest.fixture(scope="module")
def paths():
    clips = media.default_media(smoke=True)
    return [clips["h264_144p_gop12.mp4"], clips["h264_144p_gop48.mp4"]] * 5  # 10 samples


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("n", [0, 1, 5, 10, 13])
def test_shards_cover_every_item_exactly_once(n, world_size):
    shards = [distributed.shard(range(n), r, world_size) for r in range(world_size)]
    assert sorted(i for s in shards for i in s) == list(range(n))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    samplers = [distributed.ShardSampler(n, r, world_size, shuffle=True, seed=3) for r in range(world_size)]
    for epoch in (0, 1):
        for s in samplers:
            s.set_epoch(epoch)
        check = distributed.exactly_once([list(s) for s in samplers], n)
        assert check["ok"], check
        assert [len(s) for s in samplers] == [len(list(s)) for s in samplers]


def test_sampler_is_distributed_sampler_without_its_padding():
    from torch.utils.data import DistributedSampler

    data = list(range(12))
    for r in range(4):  # divisible: the same indices in the same order, shuffled per epoch
        ours, theirs = (
            distributed.ShardSampler(12, r, 4, shuffle=True, seed=5),
            DistributedSampler(data, num_replicas=4, rank=r, shuffle=True, seed=5),
        )
        for e in (0, 1):
            ours.set_epoch(e)
            theirs.set_epoch(e)
            assert list(ours) == list(theirs)
    data = list(range(10))  # not divisible: DistributedSampler repeats samples, ours does not
    padded = [list(DistributedSampler(data, num_replicas=4, rank=r, shuffle=False)) for r in range(4)]
    assert distributed.exactly_once(padded, 10)["duplicates"] == {0: 2, 1: 2}
    dropped = [list(DistributedSampler(data, num_replicas=4, rank=r, shuffle=False, drop_last=True)) for r in range(4)]
    assert distributed.exactly_once(dropped, 10)["missing"] == [8, 9]
    ours = [list(distributed.ShardSampler(10, r, 4)) for r in range(4)]
    assert distributed.exactly_once(ours, 10)["ok"]
    with pytest.raises(ValueError, match="rank"):
        distributed.ShardSampler(10, 4, 4)


def test_exactly_once_names_what_is_wrong():
    check = distributed.exactly_once([[0, 1, 1], [3, 9]], 4)
    assert not check["ok"]
    assert check["duplicates"] == {1: 2} and check["missing"] == [2] and check["unexpected"] == [9]


@pytest.mark.media
def test_one_rank_of_two_gets_its_shard_with_the_right_frames(paths):
    loader = distributed.sharded_loader(
        paths, "pyav", rank=1, world_size=2, device="cpu", batch_size=2, num_workers=0, k=4
    )
    assert loader.decode_device == "cpu" and len(loader) == 3
    seen = []
    for ids, frames in loader:
        assert frames.shape == (len(ids), 4, 3, 144, 256) and frames.dtype == torch.uint8
        for i, clip in zip(ids, frames):
            assert [media.read_stamp(f) for f in clip] == loader.loader.dataset.dataset.indices(i)
        seen += ids
    assert seen == [1, 3, 5, 7, 9]


@pytest.mark.media
def test_threaded_batches_of_a_gpu_rank_keep_sampler_order_and_frames(paths):
    # the GPU path's decoding threads, driven here by a CPU dataset: same ids, order and frames as the sampler's
    from playbook_utils.loaders import VideoClipDataset

    ds = VideoClipDataset(paths, backend="pyav", device="cpu", k=4)
    sampler = distributed.ShardSampler(len(ds), 0, 2, shuffle=True, seed=1)
    batches = distributed._ThreadedBatches(distributed._Indexed(ds), sampler, batch_size=2, threads=3)
    seen = []
    for ids, frames, skipped in batches:
        assert frames.shape == (len(ids), 4, 3, 144, 256) and skipped == []
        for i, clip in zip(ids, frames):
            assert [media.read_stamp(f) for f in clip] == ds.indices(i)
        seen += ids
    assert seen == list(sampler) and len(batches) == 3


@pytest.mark.skipif(env.capabilities()["cuda"], reason="checks the error on a machine without a GPU")
def test_cuda_rank_without_gpu_says_so():
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        distributed.rank_device("cuda")


@pytest.mark.media
def test_two_gloo_ranks_under_torchrun_see_every_sample_once(paths, tmp_path):
    r = scaling.launch(
        2,
        paths[:9],
        tmp_path / "run.json",
        backend="pyav",
        device="cpu",
        timeout=180,
        k=4,
        batch_size=2,
        num_workers=0,
        epochs=2,
    )
    assert r["world_size"] == 2 and r["process_group"] == "gloo" and len(r["ranks"]) == 2
    for e in r["epochs"]:
        assert e["exactly_once"]["ok"], e["exactly_once"]
        assert e["frames"] == 9 * 4 and e["aggregate_fps"] > 0
    last = [rank["epochs"][-1] for rank in r["ranks"]]
    assert sorted(x["samples"] for x in last) == [4, 5]
    assert all(x["bytes"] > 0 and x["fps"] > 0 for x in last)
    # shuffled per epoch: the shards change between epochs, the coverage does not
    assert [x["ids"] for x in last] != [rank["epochs"][0]["ids"] for rank in r["ranks"]]


@pytest.mark.media
def test_a_missing_file_fails_the_run_and_one_that_fails_as_it_is_read_is_skipped_and_named(paths, tmp_path):
    from playbook_utils.errors import DecodeError

    with pytest.raises(DecodeError, match="not_there.mp4.*cannot read"):  # caught before any rank starts
        scaling.launch(2, [paths[0], tmp_path / "not_there.mp4"], tmp_path / "run.json")
    garbage = tmp_path / "garbage.mp4"  # as a file damaged after the folder was scanned: the epoch goes on
    garbage.write_bytes(b"not a video" * 100)
    r = scaling.launch(2, [paths[0], garbage, paths[1]], tmp_path / "run.json", backend="pyav", timeout=180, k=4,
                       batch_size=1, num_workers=0, epochs=1)  # fmt: skip
    assert r["epochs"][0]["exactly_once"]["ok"] and r["epochs"][0]["frames"] == 2 * 4
    skipped = {p: why for rank in r["ranks"] for p, why in rank["epochs"][0]["skipped"].items()}
    assert list(skipped) == [str(garbage)] and "garbage.mp4" in skipped[str(garbage)]


GPU = [b for b in available("cuda") if b in distributed.GPU_BACKENDS] if torch.cuda.is_available() else []


@pytest.mark.media
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU with a GPU decoding backend")
@pytest.mark.parametrize("backend", GPU or ["none"])
def test_nccl_ranks_decode_on_their_own_gpu_and_see_every_sample_once(backend, paths, tmp_path):
    ranks = min(2, torch.cuda.device_count())
    r = scaling.launch(
        ranks,
        paths[:9],
        tmp_path / "run.json",
        backend=backend,
        device="cuda",
        timeout=300,
        k=4,
        batch_size=2,
        epochs=2,
    )
    assert r["process_group"] == "nccl"
    assert sorted((x["device"], x["decode_device"]) for x in r["ranks"]) == [
        (f"cuda:{i}", f"cuda:{i}") for i in range(ranks)
    ]
    assert all(e["exactly_once"]["ok"] and e["frames"] == 9 * 4 for e in r["epochs"])


def test_notebook_30_chooses_its_backend_by_a_stated_rule(monkeypatch):
    # notebook 21's best GPU-side loader first, where it ran into the folder
    assert distributed.choose_backend("auto", "cuda", ["pyav", "torchcodec", "pynvvideocodec"], "pynvvideocodec") == (
        "pynvvideocodec",
        "notebook 21's best GPU-side loader here",
        None,
    )
    backend, why, on_cpu = distributed.choose_backend("auto", "cuda", ["pyav", "torchcodec", "pynvvideocodec"])
    # without notebook 21's pick, the role's order, and notebook 21 named as the missing source
    assert backend == "torchcodec" and on_cpu is None
    assert all(b in why for b in distributed.GPU_BACKENDS) and "21" in why
    assert distributed.choose_backend("auto", "cpu", ["pyav", "decord"])[:2] == (
        "pyav",
        "the first available of torchcodec, pyav, decord",
    )
    # a GPU machine without a GPU decoder decodes on the CPU, and says so
    monkeypatch.setattr(distributed, "why_unavailable", lambda b, d: None)
    backend, _, on_cpu = distributed.choose_backend("auto", "cuda", ["pyav"])
    assert backend == "torchcodec" and on_cpu is not None and "pyav" in on_cpu  # what the machine had
    monkeypatch.setattr(distributed, "why_unavailable", lambda b, d: f"{b} is not installed")
    with pytest.raises(ValueError, match="BACKEND='dali' cannot run here: dali is not installed"):
        distributed.choose_backend("dali", "cuda", [])


def test_one_rank_context_sets_the_rank_beside_21s_loader_alone_in_a_table():
    """Notebook 30 on a GPU: one rank's rate beside 21's section 4 (the same library where 21 measured it, else its
    fastest), each row with the library, K, threads and files, so what differs is in plain sight."""
    from playbook_utils.bench import words

    row = {"loader": "torchcodec x16 threads", "backend": "torchcodec", "threads": 16, "frames_per_s": 269.0}
    nb21 = {
        "k": 16,
        "video_dir": None,
        "gpu_sampled": [row, {**row, "backend": "pynvvideocodec", "frames_per_s": 300.0}],
    }
    table = words.one_rank_context(178.0, "torchcodec", 8, 16, nb21, "/data/v").splitlines()
    assert len(table) == 3
    assert table[1].split()[-5:] == ["torchcodec", "16", "8", "178", "/data/v"]
    assert table[2].split()[5:9] == ["torchcodec", "16", "16", "269"]  # 21's row of the same library
    other = words.one_rank_context(178.0, "dali", 16, 16, nb21).splitlines()
    assert other[2].split()[5:9] == ["pynvvideocodec", "16", "16", "300"]  # else 21's fastest
    for nothing in (None, {"k": 16, "gpu_sampled": []}):  # no row of 21's: the rank's row, and no second one
        table = words.one_rank_context(178.0, "torchcodec", 8, 16, nothing).splitlines()
        assert len(table) == 3 and "178" in table[1].split() and "torchcodec" not in table[2]
