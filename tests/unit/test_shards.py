"""WebDataset-style shards: samples read in place, a broken member skipped and named, every sample once
across ranks x workers."""

import json
from collections import Counter

import pytest

from playbook_utils import distributed, shards, sources
from playbook_utils.bench import media
from tests.sentences import numbers

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
    assert skipped[0].path in skipped[0].cause and "InvalidDataError" in skipped[0].cause  # the member, PyAV's error
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


def test_a_video_the_vlm_rule_refuses_is_skipped_and_named(tmp_path):
    # Before: sampling.vlm_indices' ValueError (a 1-frame video is below the rule's 2 frames) escaped the skip
    # policy and ended the pass.
    one = media.make_clip(tmp_path / "one.mp4", "h264", 64, 48, num_frames=1, gop=1)
    ok = media.make_clip(tmp_path / "ok.mp4", "h264", 64, 48, num_frames=12, gop=6)
    shard = shards.write_shards([("a", {"mp4": one}), ("b", {"mp4": ok})], tmp_path / "out", per_shard=2)
    items = list(shards.ShardDataset(shard, strategy="vlm", fps=4.0))
    skipped = [x for x in items if not isinstance(x, dict)]
    assert [x["key"] for x in items if isinstance(x, dict)] == ["b"]
    assert len(skipped) == 1 and skipped[0].path.startswith("tar://a.mp4::")
    assert skipped[0].cause.startswith(skipped[0].path)
    why = skipped[0].cause.split("]: ", 1)[1]  # the rule named, with the frames it needs, the video's 1 frame at 30 fps
    assert "'vlm'" in why and numbers(why) == ["2", "1", "1", "30.0", "0"]
    with pytest.raises(Exception, match=r"a\.mp4.*sampling rule refuses"):
        list(shards.ShardDataset(shard, strategy="vlm", fps=4.0, on_error="raise"))


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


def test_a_shard_rebuilt_as_rsync_does_is_read_afresh(tmp_path):
    # rsync -a writes a new file (new inode) and keeps the size and mtime: two same-size members swapped. On the
    # code before one identity (766cffa~1) the tar index and the probe keyed on (path, size, mtime) and
    # tar://a.mp4 gave the old member's frame count (12 for 20).
    import os

    short = media.make_clip(tmp_path / "short.mp4", "h264", 64, 48, num_frames=12, gop=6)
    long_ = media.make_clip(tmp_path / "long.mp4", "h264", 64, 48, num_frames=20, gop=6)
    media.pad_mp4(short, long_.stat().st_size)
    first = shards.write_shards([("a", {"mp4": short}), ("b", {"mp4": long_})], tmp_path / "one", per_shard=2)[0]
    again = shards.write_shards([("a", {"mp4": long_}), ("b", {"mp4": short})], tmp_path / "two", per_shard=2)[0]
    assert first.stat().st_size == again.stat().st_size
    member = f"tar://a.mp4::{first}"
    from playbook_utils.probe import video_info

    assert video_info(member).num_frames == 12
    before = first.stat()
    os.utime(again, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(again, first)  # a new inode at the same path, same size, same mtime
    assert (first.stat().st_size, first.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert video_info(member).num_frames == 20
    item = next(iter(shards.ShardDataset([first], k=2)))
    assert item["key"] == "a" and [media.read_stamp(f) for f in item["frames"]] == [5, 15]


def test_the_tar_index_keeps_at_most_tar_indexes_shards(dataset, monkeypatch):
    # Before (766cffa~1) every shard a long-running worker touched stayed indexed.
    monkeypatch.setattr(sources, "TAR_INDEXES", 2)
    monkeypatch.setattr(sources, "_tar_index", {})  # the other tests' shards, indexed under the real bound
    for shard in dataset:
        sources.tar_index(shard)
        assert len(sources._tar_index) <= 2
    assert len(sources._tar_index) == 2
