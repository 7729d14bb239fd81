"""A loader's rate is a rate: what `loader_bench.measure_flat_out` reports for a loader that decodes ahead is the
rate it produces at, whatever its look-ahead, and a rate above a saturated ceiling is never a result."""

import time

import pytest

from playbook_utils.bench import loader_bench, nvdec
from playbook_utils.loaders import decode_ahead

CHUNK_S = 0.001  # seconds of the fake decode engine per chunk of a video
CHUNKS = 5  # chunks per video
FRAMES = 10  # frames per video
ITEMS_PER_S = 1 / (CHUNK_S * CHUNKS)  # what the engine makes when it is never idle, before its own overhead


class Engine:
    """One shared decode engine, as NVDEC is to the threads of a loader: it serves chunk requests first come,
    first served, so every video in flight advances at an equal share of its rate (the more videos in flight,
    the longer each takes). It records when each video was finished, so the rate it really made is known."""

    def __init__(self):
        import queue
        import threading

        self.requests, self.finished, self.served, self.busy_s = queue.Queue(), [], 0, 0.0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            done = self.requests.get()
            t = time.perf_counter()
            time.sleep(CHUNK_S)
            self.busy_s += time.perf_counter() - t
            self.served += 1
            done.set()

    def decode(self, i):
        import threading

        import torch

        for _ in range(CHUNKS):
            done = threading.Event()
            self.requests.put(done)
            done.wait()
        self.finished.append(time.perf_counter())
        return torch.zeros(FRAMES, 1)

    def frames_per_s(self, a: float, b: float) -> float:
        """The rate the engine finished videos at between the times `a` and `b`."""
        return FRAMES * sum(a <= x <= b for x in self.finished) / (b - a)

    def ceiling(self) -> float:
        """The most it can make: frames per second of its busy time (its saturated ceiling)."""
        return FRAMES * self.served / CHUNKS / self.busy_s


class FakeLoader:
    """Decodes ahead the way `GpuLoader` does (`decode_ahead`: `threads` decoder threads, `2 x threads` videos in
    flight, videos delivered in order, in batches) on one shared `Engine`."""

    def __init__(self, n: int, threads: int, batch_size: int = 4):
        self.n, self.threads, self.batch_size = n, threads, batch_size
        self.lookahead = 2 * threads
        self.engine = Engine()
        self.paths = range(n)  # its epoch's length, as GpuProcessLoader says it

    def __iter__(self):
        batch = []
        for video in decode_ahead(self.engine.decode, range(self.n), self.threads, self.lookahead):
            batch.append(video)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch


TOLERANCE = 0.1  # the fake's own timing jitters when the test shares two cores with others (make test's workers)


def true_rate(loader: FakeLoader, r: dict, threads: int) -> float:
    """What the fake really made: with 16 or more threads in flight the engine is never idle, so its saturated rate;
    with fewer, the videos it finished inside the measured window."""
    if threads >= 16:
        return loader.engine.ceiling()
    return loader.engine.frames_per_s(r["clock_start"], r["clock_end"])


def naive_rate(deliveries, warmup_batches: int) -> float:
    """What the measurement did before: the clock starts when the warm-up batches have arrived and every later
    frame counts, to the end of the epoch."""
    start = deliveries[warmup_batches - 1][0]
    return sum(d[2] for d in deliveries[warmup_batches:]) / (deliveries[-1][0] - start)


@pytest.mark.parametrize("threads", [1, 4, 16, 64])
def test_steady_rate_is_the_production_rate_at_every_lookahead(threads):
    warm = 4
    n = loader_bench.steady_epoch(2 * threads, warm * 4, 1.0, ITEMS_PER_S, batch_size=4)
    loader = FakeLoader(n, threads)
    r = loader_bench.measure_flat_out(loader, warmup_batches=warm, stop_when_steady=False)
    assert r["steady"], r["why"]
    assert r["lookahead_items"] == 2 * threads and r["epoch_items"] == n and not r["stopped_early"]
    assert r["frames_per_s"] == pytest.approx(true_rate(loader, r, threads), rel=TOLERANCE)
    assert r["seconds"] >= 1.0 and r["frames_per_s"] <= 1.05 * loader.engine.ceiling()


@pytest.mark.parametrize("threads", [4, 32])
def test_a_run_stopped_once_steady_measures_the_same_rate_sooner(threads):
    # an epoch twice as long as needed: the run stops after a 1 s window, while a look-ahead is still to come
    n = 2 * loader_bench.steady_epoch(2 * threads, 16, 1.0, ITEMS_PER_S, batch_size=4)
    loader = FakeLoader(n, threads)
    r = loader_bench.measure_flat_out(loader, warmup_batches=4, min_window_s=1.0)
    assert r["stopped_early"] and r["steady"] and r["epoch_items"] < n - 2 * threads
    assert 1.0 <= r["seconds"] < 1.5
    assert r["frames_per_s"] == pytest.approx(true_rate(loader, r, threads), rel=TOLERANCE)


@pytest.mark.parametrize("threads", [64])
def test_the_old_clock_counts_work_done_before_it_started(threads):
    # notebook 21's old epoch: 96 videos, the clock after 4 batches of 4. The old rule reports more than the
    # engine can make at all (above its saturated ceiling); the steady rule finds no steady window in so short an
    # epoch and says so.
    loader, deliveries = FakeLoader(96, threads), []
    for batch in loader:
        deliveries.append((time.perf_counter(), len(batch), sum(v.shape[0] for v in batch)))
    assert naive_rate(deliveries, 4) > 1.2 * loader.engine.ceiling()
    r = loader_bench.steady_rate(deliveries, 16, 2 * threads)
    assert not r["steady"] and "epoch of at least" in r["why"]


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
        (4400.0, 3.0, {"fps": 4000.0, "saturated": False}, "above", None),  # over a lower bound
        (3000.0, 2.0, None, None, None),
    ],
)
def test_no_share_of_the_ceiling_above_100_is_a_result(fps, spread, ceiling, verdict, pct):
    j = nvdec.against_ceiling(fps, spread, ceiling)
    assert j["verdict"] == verdict and j["pct_of_ceiling"] == pct
    if verdict == "above":
        assert ("measurements is wrong" in j["words"]) == ceiling["saturated"]
        assert "lower bound" in j["words"] or ceiling["saturated"]


def test_rows_above_the_ceiling_or_not_steady_are_not_the_best():
    base = {"clip": "a.mp4", "backend": "torchcodec", "frames_per_s_spread_pct": 2.0, "utilization": {}}
    rows = [
        {**base, "loader": "x64", "frames_per_s": 7500.0, "steady": True, "verdict": "above", "pct_of_ceiling": None},
        {**base, "loader": "x48", "frames_per_s": 6000.0, "steady": False, "verdict": "below", "pct_of_ceiling": 90.0},
        {**base, "loader": "x16", "frames_per_s": 3800.0, "steady": True, "verdict": "below", "pct_of_ceiling": 85.0},
    ]
    best = loader_bench.best_gpu_loaders(rows, {"a.mp4": {"fps": 4460.0, "saturated": True}})["a.mp4"]
    assert best["loader"] == "x16" and best["pct_of_ceiling"] == 85.0 and best["rows_not_results"] == 2
