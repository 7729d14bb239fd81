"""How busy the machine is while something runs: CPU, RSS, NVDEC, SMs and GPU memory (notebooks 20, 21)."""

from __future__ import annotations

import threading
import time
from statistics import median

from playbook_utils import env

MIN_SAMPLES = 20  # fewer samples than this over a window: no utilization figure, "not measured (window too short)"
BUSY_KEYS = ("cpu_pct", "nvdec_pct", "sm_pct")  # medians: what a window's utilization figure is made of
SUMMARY = {"cpu_pct": median, "rss_mb": max, "nvdec_pct": median, "sm_pct": median, "gpu_mem_mb": max}  # per window
LIST_EVERY_S = 1.0  # how often the monitor lists the measured process's children again (`_tree_cpu_s`)


class UtilizationMonitor:
    """Samples, every `period` s in a background thread while the `with` block runs, the CPU use of this
    process and its children, its RSS and, for GPU `gpu` where NVML answers, NVDEC and SM utilization and GPU memory.
    `summary(since, until)` summarises a window. Notebooks 20 and 21."""

    def __init__(self, period: float = 0.1, gpu: int | None = None):
        import psutil

        self.period, self.proc = period, psutil.Process()
        self._cpu_s: dict = {}  # psutil.Process -> its CPU seconds at the last sample (this process, its children)
        self._procs, self._listed = [self.proc], -float("inf")
        self.samples: list[dict] = []
        self.nvml_period_s: float | None = None
        self._stop = threading.Event()
        self._nvml = env.nvml_handle(gpu) if gpu is not None else None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree_cpu_s(self) -> float:
        """CPU seconds used since the last call by this process and all its descendants, relisted every LIST_EVERY_S;
        each process known by pid and start time, so a reused pid is another process."""
        import psutil

        now = time.perf_counter()
        if now - self._listed >= LIST_EVERY_S:
            try:
                self._procs = [self.proc, *self.proc.children(recursive=True)]
                self._listed = now
            except (psutil.Error, OSError):  # keep the last list (e.g. too many open files): its baselines stay
                pass
        used, seen = 0.0, {}
        for p in self._procs:
            try:
                t = p.cpu_times()
            except (psutil.Error, OSError):  # exited since it was listed
                continue
            seen[p] = t.user + t.system
            used += max(0.0, seen[p] - self._cpu_s.get(p, 0.0))
        self._cpu_s = seen
        return used

    def _run(self):
        self._tree_cpu_s()
        last = time.perf_counter()
        while not self._stop.wait(self.period):
            used, now = self._tree_cpu_s(), time.perf_counter()
            s = {"t": now, "cpu_pct": 100 * used / max(now - last, 1e-6), "rss_mb": self.proc.memory_info().rss / 2**20}
            last = now
            if self._nvml:
                nv, h = self._nvml
                try:
                    dec, period_us = nv.nvmlDeviceGetDecoderUtilization(h)
                    s["nvdec_pct"] = dec
                    self.nvml_period_s = period_us / 1e6
                    s["sm_pct"] = nv.nvmlDeviceGetUtilizationRates(h).gpu  # some kernel running, share of time
                    s["gpu_mem_mb"] = nv.nvmlDeviceGetMemoryInfo(h).used / 2**20
                except Exception:
                    pass
            self.samples.append(s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self, since: float | None = None, until: float | None = None) -> dict:
        """Over the samples between `since` and `until`: {'cpu_pct', 'nvdec_pct', 'sm_pct' (medians), 'rss_mb',
        'gpu_mem_mb' (maxima), 'samples', 'window_s', 'busy_why'}; busy figures are None, with 'busy_why', under
        MIN_SAMPLES samples or three NVML periods. Notebook 20."""
        samples = [s for s in self.samples if (since is None or s["t"] >= since) and (until is None or s["t"] <= until)]
        window = samples[-1]["t"] - samples[0]["t"] if len(samples) > 1 else 0.0
        short = len(samples) < MIN_SAMPLES
        nvml_short = self.nvml_period_s is not None and window < 3 * self.nvml_period_s
        out: dict = {"samples": len(samples), "window_s": round(window, 2), "busy_why": None}
        for key, agg in SUMMARY.items():
            values = [s[key] for s in samples if key in s]
            if key in BUSY_KEYS and (short or (key != "cpu_pct" and nvml_short)):
                values = []
            out[key] = round(agg(values), 1) if values else None
        if short:
            out["busy_why"] = (
                f"not measured (window too short: {len(samples)} samples of {self.period:g} s, {MIN_SAMPLES} needed)"
            )
        elif nvml_short:
            out["busy_why"] = (
                f"GPU utilization not measured (window too short: {window:.1f} s, NVML averages over "
                f"{self.nvml_period_s:.2f} s)"
            )
        return out
