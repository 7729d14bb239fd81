"""A loader's rate is a rate: what `loader_bench.measure_flat_out` reports for a loader that decodes ahead is the
rate it produces at, whatever its look-ahead, and a rate above a saturated ceiling is never a result."""

import time

import pytest

from playbook_utils.bench import loader_bench, nvdec
from playbook_utils.loaders import decode_ahead
from tests.sentences import numbers

CHUNK_S = 0.001  # seconds the simulated decode engine takes per chunk of a video
CHUNKS = 5  # chunks per video
FRAMES = 10  # frames per video
CAPACITY = FRAMES / (CHUNKS * CHUNK_S)  # frames per second the engine makes whenever it has work: the true rate


def simulate(n: int, threads: int, batch: int = 4, startup_s: float = 0.5) -> list[tuple]:
    """The deliveries [(time, videos, frames), ...] of a loader that decodes ahead the way `GpuLoader` does
    (`threads` decoder threads, `2 x threads` videos submitted ahead of the consumer, delivered in order in
    batches of `batch`) on one shared engine, as NVDEC is to its threads: the engine serves chunk requests first
    come, first served, so every video in flight advances at an equal share of its rate, and the more are in
    flight, the longer each takes. The engine never idles while a video is in flight, so the loader makes CAPACITY
    frames per second exactly, after `startup_s` (processes, CUDA contexts). Simulated time, no threads: the
    test is exact on a loaded machine."""
    from collections import deque

    submitted = min(2 * threads, n)
    waiting, idle, queue = deque(range(submitted)), list(range(threads)), deque()
    left, item_of, done = {}, {}, set()
    t, taken, out = startup_s, 0, []

    def assign():
        while idle and waiting:
            th = idle.pop()
            item_of[th], left[th] = waiting.popleft(), CHUNKS
            queue.append(th)

    assign()
    while taken < n:
        th = queue.popleft()
        t += CHUNK_S
        left[th] -= 1
        if left[th]:
            queue.append(th)
        else:
            done.add(item_of.pop(th))
            idle.append(th)
        while taken in done:  # the consumer takes each video in order as soon as it is done, and one more is submitted
            taken += 1
            if submitted < n:
                waiting.append(submitted)
                submitted += 1
            if taken % batch == 0 or taken == n:  # a batch is delivered when it is full
                k = taken - (taken - 1) // batch * batch
                out.append((t, k, k * FRAMES))
        assign()
    return out


class Replay:
    """The simulated deliveries as a loader `measure_flat_out` can run, with the clock they happened on."""

    def __init__(self, deliveries, threads: int, n: int):
        self.deliveries, self.lookahead, self.paths, self.now = deliveries, 2 * threads, range(n), 0.0

    def clock(self) -> float:
        return self.now

    def __iter__(self):
        import torch

        for t, videos, frames in self.deliveries:
            self.now = t
            yield [torch.zeros(frames // videos, 1) for _ in range(videos)]


def naive_rate(deliveries, warmup_batches: int) -> float:
    """What the measurement did before: the clock starts when the warm-up batches have arrived and every later
    frame counts, to the end of the epoch."""
    start = deliveries[warmup_batches - 1][0]
    return sum(d[2] for d in deliveries[warmup_batches:]) / (deliveries[-1][0] - start)


@pytest.mark.parametrize("threads", [1, 4, 16, 64])
def test_steady_rate_is_the_production_rate_at_every_lookahead(threads):
    n = loader_bench.steady_epoch(2 * threads, 16, 1.0, CAPACITY / FRAMES, batch_size=4)
    replay = Replay(simulate(n, threads), threads, n)
    r = loader_bench.measure_flat_out(replay, warmup_batches=4, stop_when_steady=False, clock=replay.clock)
    assert r["steady"], r["why"]
    assert r["lookahead_items"] == 2 * threads and r["epoch_items"] == n and not r["stopped_early"]
    assert r["seconds"] >= 1.0 and r["frames_per_s"] == pytest.approx(CAPACITY, rel=0.015)


@pytest.mark.parametrize("threads", [4, 64])
def test_a_run_stopped_once_steady_measures_the_same_rate_sooner(threads):
    # an epoch twice as long as needed: the run stops after a 1 s window, while a look-ahead is still to come
    n = 2 * loader_bench.steady_epoch(2 * threads, 16, 1.0, CAPACITY / FRAMES, batch_size=4)
    replay = Replay(simulate(n, threads), threads, n)
    r = loader_bench.measure_flat_out(replay, warmup_batches=4, min_window_s=1.0, clock=replay.clock)
    assert r["stopped_early"] and r["steady"] and r["epoch_items"] < n - 2 * threads
    assert r["seconds"] >= 1.0 and r["frames_per_s"] == pytest.approx(CAPACITY, rel=0.015)


@pytest.mark.parametrize("threads", [48, 64])
def test_the_old_clock_counts_work_done_before_it_started(threads):
    # notebook 21's old epoch: 96 videos, the clock after 4 batches of 4. The old rule reports more than the
    # engine can make at all; the steady rule finds no steady window in so short an epoch and says so.
    deliveries = simulate(96, threads)
    assert naive_rate(deliveries, 4) > 1.25 * CAPACITY
    r = loader_bench.steady_rate(deliveries, 16, 2 * threads)
    # why: the 96 items, the look-ahead, and the epoch the steady rule would need
    need = loader_bench.steady_epoch(2 * threads, 16, batch_size=deliveries[0][1])
    assert not r["steady"] and numbers(r["why"]) == ["96", str(2 * threads), str(need)] and need > 96


def test_a_real_thread_pool_is_measured_in_steady_state_too():
    # the same with real threads and sleeps (decode_ahead, as GpuLoader runs it): looser, since the machine's
    # own timing is in it
    def decode(i):
        import torch

        time.sleep(0.02)
        return torch.zeros(FRAMES, 1)

    class Pool:
        lookahead, paths = 16, range(400)

        def __iter__(self):
            batch = []
            for video in decode_ahead(decode, self.paths, 8, self.lookahead):
                batch.append(video)
                if len(batch) == 4:
                    yield batch
                    batch = []

    r = loader_bench.measure_flat_out(Pool(), warmup_batches=2, min_window_s=0.5)
    assert r["steady"] and r["stopped_early"]
    assert r["frames_per_s"] <= 1.1 * 8 * FRAMES / 0.02  # never above what 8 sleeping threads can make


def test_steady_rate_ignores_bursts_and_the_drain():
    # deliveries in bursts of 8 items every 0.1 s (80 items/s), after a prefetched head start of 32 items at t=0
    # and before a drain of 32 items at once: the head start and the drain are left out, the bursts average out
    head = [(0.0, 1, 1)] * 32
    body = [(0.1 * k + 0.1, 1, 1) for k in range(40) for _ in range(8)]
    tail = [(4.1, 1, 1)] * 32
    r = loader_bench.steady_rate(head + body + tail, 0, 32)
    assert r["steady"] and r["frames_per_s"] == pytest.approx(80, rel=0.03)
    everything = len(head + body + tail) / 4.1
    assert everything > 1.15 * 80  # what counting from the first delivery to the last would have said


def test_too_short_a_window_is_not_steady():
    deliveries = [(0.01 * k, 1, 1) for k in range(50)]
    assert not loader_bench.steady_rate(deliveries, 0, 10, min_window_s=5.0)["steady"]
    assert loader_bench.steady_rate(deliveries, 0, 30)["frames_per_s"] is None


CEILING = {"fps": 4000.0, "saturated": True}


@pytest.mark.parametrize(
    "fps, spread, ceiling, verdict, pct",
    [
        (3000.0, 2.0, CEILING, "below", 75.0),
        (4080.0, 3.0, CEILING, "at", 100.0),  # 2% over it, inside a 3% spread: at the ceiling
        (4400.0, 3.0, CEILING, "above", None),  # 10% over a saturated ceiling: one measurement is wrong
        (4200.0, 1.0, {**CEILING, "spread_pct": 6.0}, "at", 100.0),  # 5% over, inside the ceiling's own 6% spread
        (4400.0, 3.0, {"fps": 4000.0, "saturated": False}, "above", None),  # over a lower bound
        (3000.0, 2.0, {"fps": 4000.0, "saturated": False}, "below", 75.0),  # under a lower bound: at most 75%
        (3000.0, 2.0, None, None, None),
    ],
)
def test_no_share_of_the_ceiling_above_100_is_a_result(fps, spread, ceiling, verdict, pct):
    j = nvdec.against_ceiling(fps, spread, ceiling)
    assert j["verdict"] == verdict and j["pct_of_ceiling"] == pct
    if verdict is not None:  # every share of a ceiling that was not saturated is only an upper bound
        assert j["at_most"] == (j["pct_of_ceiling"] is not None and not ceiling["saturated"])
    if verdict == "above":  # the two rates; over a saturated ceiling, beyond the spread: a measurement is wrong
        spread = max(spread, ceiling.get("spread_pct") or 0)
        beyond = [f"{spread:.1f}"] if ceiling["saturated"] else []  # over a lower bound: no spread to be beyond
        assert numbers(j["words"]) == [f"{fps:.0f}", f"{ceiling['fps']:.0f}", *beyond]


def test_rows_above_the_ceiling_or_not_steady_are_not_the_best():
    base = {"clip": "a.mp4", "backend": "torchcodec", "frames_per_s_spread_pct": 2.0, "utilization": {}}
    rows = [
        {**base, "loader": "x64", "frames_per_s": 7500.0, "steady": True, "verdict": "above", "pct_of_ceiling": None},
        {**base, "loader": "x48", "frames_per_s": 6000.0, "steady": False, "verdict": "below", "pct_of_ceiling": 90.0},
        {**base, "loader": "x16", "frames_per_s": 3800.0, "steady": True, "verdict": "below", "pct_of_ceiling": 85.0},
    ]
    best = loader_bench.best_gpu_loaders(rows, {"a.mp4": {"fps": 4460.0, "saturated": True}})["a.mp4"]
    assert best["loader"] == "x16" and best["pct_of_ceiling"] == 85.0 and best["rows_not_results"] == 2


def test_dalis_reader_says_its_epoch_so_a_run_stops_once_steady(tmp_path):
    # DALI's reader, seen through _DaliVideos, tells measure_flat_out how many sequences its epoch holds (the frames
    # of each file // the sequence length, in whole batches): a run then stops after its window as a GpuLoader's
    # does, where it read to the end of an epoch sized for the NVDEC ceiling (on the H200: a 108 s window)
    from playbook_utils.bench import media

    clips = [media.make_clip(tmp_path / f"c{i}.mp4", "h264", 64, 48, num_frames=n) for i, n in enumerate((70, 100))]
    assert loader_bench.dali_sequences(clips, 32) == 2 + 3
    replay = Replay(simulate(400, 8), 8, 400)

    def batches():  # the DALI iterator's shape: one dict per batch, its 'video' the batch's sequences
        for videos in replay:
            yield [{"video": videos}]

    dali = loader_bench._DaliVideos(batches(), batch_size=4, sequences=400)
    assert loader_bench._epoch_length(dali) == 400 and dali.lookahead == 16
    r = loader_bench.measure_flat_out(dali, warmup_batches=4, min_window_s=1.0, clock=replay.clock)
    assert r["stopped_early"] and r["steady"] and r["epoch_items"] < 400 - 16
    assert loader_bench._epoch_length(loader_bench._DaliVideos(iter(()), batch_size=4)) is None
