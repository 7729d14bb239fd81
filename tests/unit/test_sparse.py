"""The five sparse-sampling strategies of notebooks 01 and 20: exact frames, honest decode counts."""

import pytest

from playbook_utils import media, sampling
from playbook_utils.bench import sparse, words

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
    table = words.format_run(r).splitlines()
    assert next(line for line in table if "keyframe snapped" in line).split()[-2] == "snapped"
    assert all(next(line for line in table if s in line).split()[-2] == "exact" for s in sparse.EXACT)
    r["parallel GOPs"]["exact"] = False  # frames that are not what the strategy claims
    assert "WRONG" in next(line for line in words.format_run(r).splitlines() if "parallel GOPs" in line)
    assert r["seek per frame"]["spread_pct"] is None  # one repeat: no spread


def test_gop_pass_counts_what_asking_for_frames_still_decodes():
    # 16 frames spread over 300 at GOP 30 lie in every GOP: asking decodes 212 of the 300 frames
    assert sparse.gop_pass(sampling.uniform(300, 16), list(range(0, 300, 30))) == (212, 10)
    assert sparse.gop_pass([5, 7, 40], [0, 30]) == (8 + 11, 2)  # each GOP up to its last target
    assert sparse.gop_pass([3], [0, 30]) == (4, 1)
