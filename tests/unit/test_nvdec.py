import pytest

from playbook_utils.bench import media, nvdec
from tests.conftest import has_nvdec


@pytest.mark.media
def test_decode_check_answers_with_data_gpu_or_not(tmp_path):
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 160, 96, num_frames=8)
    for lib in nvdec.CHECK_LIBRARIES:
        r = nvdec.decode_check(lib, clip)
        if has_nvdec():  # every NVDEC generation decodes H.264
            assert r["ok"] and r["frames"] == 8 and r["wrong_frames"] == 0, r
        else:
            assert r["ok"] is False and r["error"], r


def test_decode_check_of_a_missing_file_fails_cleanly(tmp_path):
    r = nvdec.decode_check("pyav_hwaccel", tmp_path / "missing.mp4")
    assert r["ok"] is False and r["error"]


@pytest.mark.gpu
def test_nvdec_decodes_h264_frame_exact(tmp_path):
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 320, 180, num_frames=30)
    r = nvdec.decode_check("pynvvideocodec", clip)
    assert r["ok"] and r["frames"] == 30 and r["wrong_frames"] == 0


@pytest.mark.media
def test_saturation_run_without_nvdec_is_a_failed_row_not_a_crash(tmp_path):
    from playbook_utils.bench import media

    if has_nvdec():
        pytest.skip("this machine has NVDEC: the failure path cannot be shown here")
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 256, 144, num_frames=24)
    r = nvdec.saturate(clip, processes=2, threads=1, seconds=0.2)
    assert r["fps"] is None and r["frames"] == 0 and r["error"]
    c = nvdec.ceiling(clip, ((1, 1),), seconds=0.2)
    assert c["fps"] is None and c["saturated"] is False and len(c["rows"]) == 1


def test_a_run_whose_decoders_never_start_is_a_failed_row_the_sweep_can_log(monkeypatch):
    # every key of a measured row, so the sweep's log line reads it too (it had raised KeyError there)
    monkeypatch.setattr(nvdec, "_start", lambda *a: {"children": []})
    monkeypatch.setattr(nvdec, "_ready", lambda run: False)
    logged = []
    c = nvdec.ceiling("any.mp4", ((1, 1),), seconds=0.2, decoders=("pynvvideocodec",), log=logged.append)
    assert c["fps"] is None and logged == ["pynvvideocodec 1 processes x 1 threads: failed: decoders did not start "
                                          f"within {nvdec.READY_TIMEOUT_S} s"]  # fmt: skip


FAKE_NVC = """
import time
class PacketData:
    pass
class _Demuxer:
    def __iter__(self):
        return iter([PacketData() for _ in range(1000)])   # a 1,000-frame clip: a warm-up pass takes 1 s
    def GetNvCodecId(self):
        return 4
def CreateDemuxer(path):
    return _Demuxer()
class _Decoder:
    def Decode(self, packet):
        time.sleep(0.001)          # a decoder that takes 1 ms per packet and returns one frame
        return [object()]
def CreateDecoder(**kwargs):
    return _Decoder()
"""


def test_saturation_counts_only_frames_inside_the_window(tmp_path, monkeypatch):
    """The harness logic (warm-up before the clock, barrier, window, count) with a stand-in PyNvVideoCodec."""
    import sys

    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "PyNvVideoCodec.py").write_text(FAKE_NVC)
    monkeypatch.syspath_prepend(str(fake))
    monkeypatch.delitem(sys.modules, "PyNvVideoCodec", raising=False)
    r = nvdec.saturate(tmp_path / "any.mp4", processes=2, threads=2, seconds=0.6)
    assert r["error"] is None
    # 4 decoders at 1 ms a frame at best for 0.6 s: at most 4 x 600 frames, where counting the four 1,000-frame
    # warm-up passes would give more than 4,000. How far below it a loaded machine lands is timing, not asserted.
    assert 0 < r["frames"] <= 4 * 600 and r["fps"] == r["frames"] / 0.6
    assert sum(r["fps_by_part"]) * 0.6 / nvdec.WINDOW_BINS == pytest.approx(r["frames"], abs=1)


FAKE_TORCHCODEC = """
import time
class _Frames:
    def __init__(self, n):
        self.data = type("Batch", (), {"shape": (n, 3, 8, 8)})()
class VideoDecoder:
    def __init__(self, path, device=None, seek_mode=None):
        self.metadata = type("Metadata", (), {"num_frames": 64, "width": 1920, "height": 1080})()
    def get_frames_in_range(self, start, stop):
        time.sleep(0.005 * (stop - start))   # 5 ms a frame, a chunk of 32 in one call: 0.16 s
        return _Frames(stop - start)
"""


def test_a_chunk_still_decoding_at_the_windows_end_counts_only_its_share(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(nvdec.time, "perf_counter", lambda: clock[0])

    def chunks(n, seconds, count):
        for _ in range(count):
            clock[0] += seconds  # the chunk's decoding time passes inside the step
            yield n

    # chunks of 10 frames, 0.1 s each; the window ends 0.25 s in: 2 whole chunks and half of the third
    assert nvdec._frames_before(100.25, chunks(10, 0.1, 5)) == pytest.approx(25.0)
    assert nvdec._frames_before(float("inf"), chunks(10, 0.1, 5)) == 50  # a warm-up pass: every frame
    # by parts of the window: 5 parts of 0.05 s from 100.0; the chunks end at 100.1, 100.2, and the third is cut at
    # 100.25, each spread evenly over its time
    clock[0] = 100.0
    spans, bins = [], (100.0, 0.05, [0.0] * 5)
    assert nvdec._frames_before(100.25, chunks(10, 0.1, 5), spans) == pytest.approx(25.0)
    flat = [x for span in spans for x in span]
    assert flat == pytest.approx([100.0, 100.1, 10, 100.1, 100.2, 10, 100.2, 100.25, 5.0])
    for a, b, n in spans:
        nvdec._spread_into(bins, a, b, n)
    assert bins[2] == pytest.approx([5.0] * 5)
    before = clock[0]
    assert nvdec._frames_before(100.0, chunks(10, 0.1, 5)) == 0  # the window over before the pass began
    assert clock[0] == before  # and no chunk was decoded for it


def test_a_torchcodec_saturation_run_counts_no_frame_decoded_after_its_window(tmp_path, monkeypatch):
    """TorchCodec reads chunks of 32 frames: the one decoding when the window closes counts only its share
    (counted whole, a 0.5 s window at 5 ms a frame read 128 frames where at most 100 fit)."""
    import sys

    fake = tmp_path / "fake" / "torchcodec"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "decoders.py").write_text(FAKE_TORCHCODEC)
    monkeypatch.syspath_prepend(str(fake.parent))
    for name in [m for m in sys.modules if m == "torchcodec" or m.startswith("torchcodec.")]:
        monkeypatch.delitem(sys.modules, name)
    r = nvdec.saturate(tmp_path / "any.mp4", processes=1, threads=1, seconds=0.5, decoder="torchcodec")
    assert r["error"] is None
    assert 0 < r["frames"] <= 0.5 / 0.005 + 0.5, r  # each frame counted took at least 5 ms of the window
    # the window's parts hold every frame counted, at their rates: their spread says how steady the rate was
    assert sum(r["fps_by_part"]) * 0.5 / nvdec.WINDOW_BINS == pytest.approx(r["frames"], abs=1)
    assert r["fps_spread_pct"] is not None


def fake_saturate(monkeypatch, fps: dict, util: dict) -> list:
    """`nvdec.saturate` replaced by a table of (processes, threads) -> rate and NVDEC utilization; returns the
    list of the layouts it was asked for."""
    ran = []

    def fake(path, processes, threads, seconds, gpu, decoder, started=None):
        assert started == ("started", processes, threads, decoder)  # its processes were started ahead, for it
        ran.append((processes, threads, decoder))
        return {
            "fps": fps[(processes, threads)],
            "nvdec_util_median": util[(processes, threads)],
            "decoder": decoder,
            "processes": processes,
            "threads": threads,
        }

    monkeypatch.setattr(nvdec, "saturate", fake)
    monkeypatch.setattr(nvdec, "_start", lambda path, p, t, seconds, gpu, d: ("started", p, t, d))
    monkeypatch.setattr(nvdec, "_ready", lambda run: True)
    return ran


def test_the_runs_of_a_ceiling_start_side_by_side_in_batches_of_at_most_ahead_processes(monkeypatch):
    monkeypatch.setattr(nvdec, "AHEAD_PROCESSES", 24)
    todo = [(1, 1, "a"), (1, 4, "a"), (4, 2, "a"), (7, 1, "a"), (7, 2, "a"), (7, 1, "b"), (7, 2, "b"), (30, 1, "a")]
    costs = [(t[0], 0) for t in todo]
    batches, k = [], 0
    while k < len(todo):
        batches.append(nvdec._batch(costs, k))
        k = batches[-1][-1] + 1
    assert batches == [[0, 1, 2, 3, 4], [5, 6], [7]]  # 20 processes, then 14, then one run larger than the cap alone
    assert all(sum(todo[j][0] for j in b) <= nvdec.AHEAD_PROCESSES for b in batches[:-1])


def test_runs_start_side_by_side_only_while_their_gpu_memory_fits(monkeypatch):
    # the H100's 20 (2026-12-06): three HEVC clips' runs of 16 TorchCodec processes x 8 decoders started together
    # took all 80 GB, and decoders failed with CUDA out of memory
    gib = 2**30
    costs = [(16, 30 * gib), (16, 30 * gib), (16, 30 * gib)]
    assert nvdec._batch(costs, 0, budget=64 * gib) == [0, 1]
    assert nvdec._batch(costs, 2, budget=64 * gib) == [2]
    assert nvdec._batch(costs, 0) == [0, 1, 2]  # no memory reading: the process cap alone
    monkeypatch.setattr(nvdec, "_free_bytes", lambda gpu: 50 * gib)
    monkeypatch.setattr(nvdec, "_run_bytes", lambda path, p, t, d: {"4k.mp4": 120 * gib}.get(path, 10 * gib))
    started = []
    monkeypatch.setattr(nvdec, "_start", lambda path, p, t, seconds, gpu, d: started.append(path) or {"path": path})
    monkeypatch.setattr(nvdec, "_ready", lambda run: True)
    c = nvdec.ceiling("4k.mp4", ((16, 8),), 1.0, decoders=("torchcodec",))
    assert started == [] and c["fps"] is None  # too large alone: never started, a row that says why
    assert "GiB of GPU memory" in c["rows"][0]["error"]


def test_a_torchcodec_call_holds_at_most_32_frames_of_1080p():
    assert nvdec._torchcodec_chunk(1920, 1080) == 32 and nvdec._torchcodec_chunk(1280, 720) == 32
    assert nvdec._torchcodec_chunk(3840, 2160) == 8


@pytest.mark.media
def test_the_memory_estimate_grows_with_frame_size_and_decoders(tmp_path):
    small = media.make_clip(tmp_path / "s.mp4", "h264", 160, 96, num_frames=4)
    large = media.make_clip(tmp_path / "l.mp4", "h264", 640, 384, num_frames=4)
    one = nvdec._run_bytes(small, 1, 1, "torchcodec")
    assert one > nvdec.CONTEXT_BYTES and nvdec._run_bytes(small, 2, 1, "torchcodec") == 2 * one
    assert nvdec._run_bytes(small, 1, 8, "torchcodec") - nvdec.CONTEXT_BYTES == 8 * (one - nvdec.CONTEXT_BYTES)
    assert nvdec._run_bytes(large, 1, 1, "torchcodec") - nvdec.CONTEXT_BYTES == 16 * (one - nvdec.CONTEXT_BYTES)
    assert nvdec._run_bytes(small, 1, 1, "pynvvideocodec") < one  # NV12 surfaces, no RGB chunk


def test_more_concurrency_only_where_the_planned_layouts_left_the_engines_idle(monkeypatch):
    ran = fake_saturate(monkeypatch, {(7, 4): 4000.0, (14, 4): 4100.0}, {(7, 4): 90, (14, 4): 97})
    c = nvdec.ceiling("a.mp4", ((7, 4),), 1.0, decoders=("pynvvideocodec", "torchcodec"), if_unsaturated=((14, 4),))
    assert ran == [(7, 4, "pynvvideocodec"), (7, 4, "torchcodec"), (14, 4, "pynvvideocodec"), (14, 4, "torchcodec")]
    assert c["saturated"] and c["levelled"] and c["fps"] == 4100.0  # +2.5% for twice the decoders: levelled
    ran2 = fake_saturate(monkeypatch, {(7, 4): 4000.0}, {(7, 4): 96})  # busy already, one layout: nothing more runs
    c = nvdec.ceiling("a.mp4", ((7, 4),), 1.0, decoders=("pynvvideocodec",), if_unsaturated=((14, 4),))
    assert ran2 == [(7, 4, "pynvvideocodec")] and c["saturated"] and c["levelled"] is None


def test_a_rate_still_rising_with_concurrency_is_no_saturated_ceiling_at_99_percent(monkeypatch):
    # the H200's 1080p H.264: 28 raw decoders kept NVDEC 99% busy at 4,076 frames/s, 13.5% above 14 decoders,
    # and a loader with 64 threads got 4,169: utilization alone did not show the limit
    fps = {(7, 2): 3590.0, (7, 4): 4076.0, (16, 4): 4150.0}
    util = {(7, 2): 86, (7, 4): 99, (16, 4): 99}
    ran = fake_saturate(monkeypatch, fps, util)
    c = nvdec.ceiling("a.mp4", ((7, 2), (7, 4)), 1.0, decoders=("pynvvideocodec",), if_unsaturated=((16, 4),))
    assert ran[-1] == (16, 4, "pynvvideocodec")  # still rising at 28 decoders: 64 were tried
    assert c["fps"] == 4150.0 and c["levelled"] and c["saturated"]  # +1.8% for 64: levelled off
    fps[(16, 4)] = 4600.0  # +12.9% again: still rising at the most decoders tried, a lower bound
    c = nvdec.ceiling("a.mp4", ((7, 2), (7, 4)), 1.0, decoders=("pynvvideocodec",), if_unsaturated=((16, 4),))
    assert c["fps"] == 4600.0 and c["levelled"] is False and not c["saturated"]
    ran.clear()
    fps[(7, 4)] = 3600.0  # levelled between 14 and 28 decoders at 99%: nothing more runs
    c = nvdec.ceiling("a.mp4", ((7, 2), (7, 4)), 1.0, decoders=("pynvvideocodec",), if_unsaturated=((16, 4),))
    assert [r[:2] for r in ran] == [(7, 2), (7, 4)] and c["saturated"] and c["fps"] == 3600.0


@pytest.mark.parametrize(
    "rows, best, expected",
    [
        ([(1, 2, 100.0)], 0, None),  # one layout: not known
        ([(1, 2, 100.0), (2, 2, 102.0)], 1, True),  # +2%: levelled
        ([(1, 2, 100.0), (2, 2, 110.0)], 1, False),  # +10% at the most decoders tried: still rising
        ([(1, 2, 100.0), (2, 2, 110.0), (4, 2, 108.0)], 1, True),  # more decoders did not beat it
        ([(1, 2, 100.0), (2, 2, 110.0), (4, 2, None)], 1, False),  # a failed layout proves nothing
    ],
)
def test_levelled_compares_a_rate_with_the_layouts_of_fewer_and_more_decoders(rows, best, expected):
    rows = [{"processes": p, "threads": t, "fps": f} for p, t, f in rows]
    assert nvdec.levelled(rows, rows[best]) is expected


def test_a_run_in_which_a_decoder_failed_gives_no_rate_for_its_layout():
    import queue as q
    import threading

    class Child:
        def join(self, timeout=None):
            pass

    run = {"queue": q.Queue(), "go": threading.Event(), "children": [Child(), Child()], "warmed": True}
    run["queue"].put({"frames": 600.0, "bins": [100.0] * nvdec.WINDOW_BINS, "error": None})
    run["queue"].put({"frames": 0.0, "bins": [0.0] * nvdec.WINDOW_BINS, "error": "CUDA out of memory"})
    r = nvdec.saturate("any.mp4", processes=2, threads=1, seconds=0.2, started=run)
    assert r["fps"] is None and r["error"] == "CUDA out of memory"


def test_other_clips_runs_start_side_by_side_two_at_a_time_where_two_fit(monkeypatch):
    # 20's others on the H100: three HEVC clips at 16 x 8 TorchCodec decoders each; two fit the memory, not three
    gib, events = 2**30, []
    monkeypatch.setattr(nvdec, "_free_bytes", lambda gpu: 80 * gib)
    monkeypatch.setattr(nvdec, "_run_bytes", lambda path, p, t, d: 30 * gib)
    monkeypatch.setattr(
        nvdec, "_start", lambda path, p, t, seconds, gpu, d: events.append(("start", path)) or {"p": path}
    )
    monkeypatch.setattr(nvdec, "_ready", lambda run: True)

    def fake_saturate(path, processes, threads, seconds, gpu, decoder, started=None):
        events.append(("measure", path))
        return {"fps": 100.0, "nvdec_util_median": 99, "processes": processes, "threads": threads, "decoder": decoder}

    monkeypatch.setattr(nvdec, "saturate", fake_saturate)

    class Info:
        codec = "hevc"

    infos = {n: Info() for n in ("a", "b", "c", "d")}
    nvdec.ceilings({n: n for n in infos}, infos, ["a"], ["b", "c", "d"], ((16, 8),), 1.0)
    starts_before = [sum(1 for e in events[: events.index(("measure", m))] if e[0] == "start") for m in "bcd"]
    assert starts_before == [3, 3, 4]  # a; then b and c together (60 of 64 GiB); d after them
    assert events.index(("start", "d")) > events.index(("measure", "c"))


def test_a_run_short_of_memory_beside_others_runs_again_alone_once_the_batch_is_done(monkeypatch):
    # 21 on the H100: TorchCodec 1 x 64 failed to create decoders (CUDA error 2) while five runs held their memory
    events, tries = [], {}
    monkeypatch.setattr(nvdec, "_free_bytes", lambda gpu: None)
    monkeypatch.setattr(nvdec, "_start", lambda path, p, t, seconds, gpu, d: events.append(("start", p, t, d)) or {})
    monkeypatch.setattr(nvdec, "_ready", lambda run: True)

    def fake_saturate(path, processes, threads, seconds, gpu, decoder, started=None):
        key = (path, processes, threads, decoder)
        tries[key] = tries.get(key, 0) + 1
        events.append(("measure", processes, threads, decoder, started is not None) if path == "a.mp4" else path)
        oom = (processes, threads, decoder) == (1, 64, "torchcodec") and tries[key] == 1 and path != "a"  # a: swept
        error = "RuntimeError: create_decoder, Failed to create NVDEC decoder: 2" if oom else None
        return {
            "fps": None if oom else 100.0 * processes * threads,
            "error": error,
            "nvdec_util_median": 99,
            "processes": processes,
            "threads": threads,
            "decoder": decoder,
        }

    monkeypatch.setattr(nvdec, "saturate", fake_saturate)
    c = nvdec.ceiling("a.mp4", ((7, 4), (1, 64)), 1.0, decoders=("pynvvideocodec", "torchcodec"))
    assert events[-1] == ("measure", 1, 64, "torchcodec", False)  # started anew, after every run of the batch
    assert [r["fps"] for r in c["rows"]] == [2800.0, 2800.0, 6400.0, 6400.0]
    assert "decoder: 2" in c["rows"][3]["alone_after"] and c["rows"][3]["error"] is None
    assert not nvdec.short_of_memory({"fps": None, "error": "not run: needs about 90 GiB of GPU memory"})
    tries.clear()  # a run that started alone and ran out of memory has no one to make room: not run again
    c = nvdec.ceiling("a.mp4", ((1, 64),), 1.0, decoders=("torchcodec",))
    assert list(tries.values()) == [1] and c["fps"] is None and "alone_after" not in c["rows"][0]

    # 20's other clips: a clip whose run ran out of memory beside the others runs again once they are done
    class Info:
        codec = "hevc"

    infos = {n: Info() for n in ("a", "b", "c")}
    events.clear()
    out = nvdec.ceilings({n: n for n in infos}, infos, ["a"], ["b", "c"], ((1, 64, "torchcodec"),), 1.0)
    assert out["b"]["fps"] == out["c"]["fps"] == 6400.0
    measured = [e for e in events if e in ("b", "c")]
    assert measured == ["b", "c", "b", "c"]  # each once beside the other, then each alone
    assert all("alone_after" in r for n in ("b", "c") for r in out[n]["rows"])  # the rerun says why it ran alone
