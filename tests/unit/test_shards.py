"""WebDataset-style shards: samples read in place, a broken member skipped and named, every sample once
across ranks x workers."""

import json
from collections import Counter

import pytest

from playbook_utils import distributed, media, shards, sources

pytestmark = pytest.mark.media  # every test here encodes or decodes video


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """5 shards of 2 samples; sample 'v03' is a broken video (bytes that are no media file)."""
    d = tmp_path_factory.mktemp("shards")
    clips = {n: media.make_clip(d / f"c{n}.mp4", "h264", 64, 48, num_frames=n, gop=8) for n in (12, 16, 20)}
    samples = []
    for i in range(10):
        n = (12, 16, 20)[i % 3]
        video = b"\x00not a video" * 64 if i == 3 else clips[n]
        samples.append((f"v{i:02d}", {"mp4": video, "json": {"frames": n, "i": i}}))
    return shards.write_shards(samples, d / "out", prefix="train", per_shard=2)


def test_write_and_list(dataset):
    assert [p.name for p in dataset] == [f"train-{i:06d}.tar" for i in range(5)]
    refs = shards.list_samples(dataset)
    assert [r.key for r in refs] == [f"v{i:02d}" for i in range(10)]
    assert [r.id for r in refs] == list(range(10))
    assert refs[4].members == {"mp4": "v04.mp4", "json": "v04.json"}
    assert shards.split_name("a/b.c.mp4") == ("a/b", "c.mp4") and shards.split_name("README") is None


def test_webdataset_reads_our_shards_the_same(dataset):
    wds = pytest.importorskip("webdataset")
    got = [
        (s["__key__"], sorted(k for k in s if not k.startswith("__")))
        for s in wds.WebDataset([str(p) for p in dataset], shardshuffle=False)
    ]
    assert got == [(f"v{i:02d}", ["json", "mp4"]) for i in range(10)]


def test_one_pass_skips_the_broken_member_and_finishes(dataset):
    ds = shards.ShardDataset(dataset, k=4)
    items = list(ds)
    skipped = [x for x in items if not isinstance(x, dict)]
    good = [x for x in items if isinstance(x, dict)]
    assert len(items) == 10 and len(good) == 9
    assert len(skipped) == 1 and skipped[0].path.startswith("tar://v03.mp4::") and "train-000001.tar" in skipped[0].path
    assert "cannot open as a media file" in skipped[0].cause
    for x in good:
        n = x["meta"]["frames"]
        assert x["frames"].shape == (4, 3, 48, 64)
        assert [media.read_stamp(f) for f in x["frames"]] == [(2 * j + 1) * n // 8 for j in range(4)]
    with pytest.raises(Exception, match="v03.mp4"):
        list(shards.ShardDataset(dataset, k=4, on_error="raise"))


def test_vlm_strategy_takes_qwen_frames(dataset):
    from playbook_utils import sampling

    ds = shards.ShardDataset(dataset[:1], strategy="vlm", fps=4.0)
    x = next(iter(ds))
    want = sampling.vlm_indices(12, 30, fps=4.0)
    assert [media.read_stamp(f) for f in x["frames"]] == want


@pytest.mark.parametrize("split", ["shard", "sample"])
def test_assign_covers_every_sample_once(dataset, split):
    refs = shards.list_samples(dataset)
    for parts in (1, 2, 3, 4, 7, 16):
        seen = Counter(r.id for p in range(parts) for r in shards.assign(refs, p, parts, split))
        assert seen == Counter(range(10)), (split, parts)


def test_shard_loader_two_ranks_two_workers_every_sample_once(dataset):
    """world_size 2 x 2 workers each, on the CPU: the ids of both ranks are range(10) less the broken one,
    each once; the broken member is named once. Workers are forked here to keep the test short (four
    spawned workers import torch anew: ~50 s on a 2-core CI machine); the split does not depend on it."""
    ids, skipped = [], {}
    for rank in range(2):
        loader = shards.shard_loader(
            dataset, rank=rank, world_size=2, batch_size=2, num_workers=2, k=4, start_method="fork"
        )
        out = shards.epoch(loader)
        ids.append(out["ids"])
        skipped.update(out["skipped"])
        del loader
    assert all(ids), "both ranks read something"
    check = distributed.exactly_once(ids + [[3]], 10)
    assert check["ok"], check
    assert list(skipped) == [f"tar://v03.mp4::{dataset[1]}"]


def test_sharded_loader_takes_tar_members(dataset):
    """The existing per-rank loader over tar members (by their tar:// names): each sample once."""
    refs = [r for r in shards.list_samples(dataset) if r.key != "v03"]
    names = [str(sources.TarMember(r.shard, shards.video_member(r))) for r in refs]
    ids = []
    for rank in range(2):
        loader = distributed.sharded_loader(names, rank=rank, world_size=2, num_workers=0, batch_size=3, k=4)
        for batch_ids, frames in loader:
            ids.append(batch_ids)
            assert frames.shape[1:] == (4, 3, 48, 64)
    assert distributed.exactly_once([sum(ids, [])], len(names))["ok"]


def test_metadata_is_read_from_the_json_member(dataset):
    x = next(iter(shards.ShardDataset(dataset[2:3])))
    raw = sources.resolve(f"tar://v04.json::{dataset[2]}").read_bytes()
    assert x["meta"] == json.loads(raw) == {"frames": 16, "i": 4}
