"""How busy the machine is while something runs: CPU, RSS, NVDEC, SMs and GPU memory (notebooks 20, 21)."""

from __future__ import annotations

import statistics
import threading
import time

from playbook_utils import env


class UtilizationMonitor:
    """Samples this process's CPU use and RSS and, for a GPU (`gpu`: its CUDA index; where NVML answers), NVDEC and
    SM utilization and GPU memory, every `period` s in a background thread while the `with` block runs;
    `summary(since=...)` keeps only the samples taken after a `time.perf_counter()` value."""

    def __init__(self, period: float = 0.1, gpu: int | None = None):
        import psutil

        self.period, self.proc = period, psutil.Process()
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._nvml = None
        if gpu is not None:
            self._nvml = env.nvml_handle(gpu)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        self.proc.cpu_percent(None)
        while not self._stop.wait(self.period):
            s = {
                "t": time.perf_counter(),
                "cpu_pct": self.proc.cpu_percent(None),
                "rss_mb": self.proc.memory_info().rss / 2**20,
            }
            if self._nvml:
                nv, h = self._nvml
                try:
                    s["nvdec_pct"] = nv.nvmlDeviceGetDecoderUtilization(h)[0]
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

    def summary(self, since: float | None = None) -> dict:
        """{'cpu_pct', 'nvdec_pct', 'sm_pct': medians; 'rss_mb', 'gpu_mem_mb': maxima} over the samples (None
        where nothing was sampled)."""
        samples = [s for s in self.samples if since is None or s["t"] >= since]
        out = {}
        for key, agg in (
            ("cpu_pct", statistics.median),
            ("rss_mb", max),
            ("nvdec_pct", statistics.median),
            ("sm_pct", statistics.median),
            ("gpu_mem_mb", max),
        ):
            values = [s[key] for s in samples if key in s]
            out[key] = round(agg(values), 1) if values else None
        return out
