"""The five sparse-sampling strategies of notebooks 01 and 20: exact frames, honest decode counts."""

import pytest

from playbook_utils import sampling
from playbook_utils.bench import media, sparse, words

pytestmark = pytest.mark.media  # every test here encodes or decodes video


@pytest.fixture(scope="module")
def long_clips():
    return media.long_media(smoke=True)


def test_long_media_is_long_and_keeps_the_default_set(long_clips):
    assert sorted(long_clips) == ["h264_144p_gop12_12s.mp4", "h264_144p_gop48_12s.mp4"]
    assert media.probe(long_clips["h264_144p_gop12_12s.mp4"]).num_frames == 360
    assert "h264_144p_gop12.mp4" in media.default_media(smoke=True)  # the short set is still there


@pytest.mark.parametrize("name", ["h264_144p_gop12_12s.mp4", "h264_144p_gop48_12s.mp4"])
def test_every_strategy_returns_what_it_claims(long_clips, name):
    path = long_clips[name]
    info = media.probe(path)
    targets = sampling.uniform(info.num_frames, 16)
    r = sparse.run(path, targets, repeats=1)
    assert set(r) == set(sparse.STRATEGIES)
    assert all(x["exact"] for x in r.values())
    assert r["decode everything"]["frames_decoded"] == info.num_frames
    gop = info.gop_lengths[0]
    # seeking costs each target's distance from its keyframe; the sorted pass never decodes more than everything
    assert r["seek per frame"]["frames_decoded"] == sum(t % gop + 1 for t in targets)
    assert r["sorted forward pass"]["frames_decoded"] <= info.num_frames
    # the parallel GOPs decode each GOP that holds targets once, from its keyframe to its last target
    last_in_gop = {}
    for t in targets:
        last_in_gop[t // gop] = max(last_in_gop.get(t // gop, 0), t % gop)
    assert r["parallel GOPs"]["frames_decoded"] == sum(v + 1 for v in last_in_gop.values())
    # snapping decodes one frame per distinct keyframe and pays in offset (at most half a GOP)
    snapped = r["keyframe snapped"]
    assert snapped["frames_decoded"] <= 16 and 0 < snapped["mean_offset"] <= gop / 2
    assert all(r[s]["mean_offset"] == 0 for s in sparse.EXACT + ("decode everything",))

    def rows(result):  # each strategy's row of the table, by its label
        table = words.format_run(result).splitlines()
        return {s: next(line for line in table if s in line) for s in sparse.STRATEGIES}

    assert rows(r)["keyframe snapped"].split()[-2] == "snapped"
    assert all(rows(r)[s].split()[-2] == "exact" for s in sparse.EXACT)
    r["parallel GOPs"]["exact"] = False  # frames that are not what the strategy claims
    assert rows(r)["parallel GOPs"].split()[-2] == "WRONG"
    assert r["seek per frame"]["spread_pct"] is None  # one repeat: no spread


def test_table_speedups_pairs_each_uniform16_row_with_its_sequential_row():
    row = {"backend": "pyav", "device": "cpu", "clip": "a.mp4", "rate_spread_pct": 2.0}
    rows = [
        {**row, "workload": "sequential", "fps": 100.0, "frames_per_call": 300},  # 3 s for all
        {**row, "workload": "uniform16", "fps": 32.0, "rate_spread_pct": 3.0},  # 0.5 s for 16
        {**row, "clip": "b.mp4", "workload": "uniform16", "fps": 10.0},
    ]  # no sequential row: left out
    [s] = sparse.table_speedups(rows, {"a.mp4": 30, "b.mp4": 250})
    assert (s["clip"], s["gop"], s["all_ms"], s["k_ms"]) == ("a.mp4", 30, 3000.0, 500.0)
    assert s["speedup"] == 6.0 and s["spread_pct"] == 5.0
