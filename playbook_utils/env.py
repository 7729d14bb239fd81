"""What this machine is: GPU, NVDEC, CPU, memory and the five decoder libraries (notebook 00). `report()` returns a
plain dict, `format_report()` a readable table; decoder libraries are probed in child processes, never imported here."""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import platform
import subprocess
from concurrent.futures import ThreadPoolExecutor

from playbook_utils import child
from playbook_utils.device import Device, cuda_visible

__all__ = [
    "capabilities",
    "check_import",
    "cpu_and_memory",
    "driver_video_libraries",
    "ffmpeg_versions",
    "format_report",
    "gpus",
    "LIBRARIES",
    "libraries",
    "library_versions",
    "machine_facts",
    "nvml_handle",
    "report",
    "resolve_device",
]

# import name -> how people call it
LIBRARIES = {
    "av": "PyAV",
    "decord": "decord",
    "torchcodec": "TorchCodec",
    "PyNvVideoCodec": "PyNvVideoCodec",
    "nvidia.dali": "DALI",
}

_IMPORT_CHECK = (
    "import importlib, sys; from playbook_utils import child; "
    "child.reply(lambda name: {'version': str(getattr(importlib.import_module(name), '__version__', "
    "'unknown'))}, sys.argv[1])"
)


def check_import(module: str, timeout: float = 120) -> dict:
    """Import `module` in a child process; return {'importable', 'version', 'error'}."""
    found = child.call(child.python("-c", _IMPORT_CHECK, module), timeout=timeout)
    if found["status"] == "ok":
        return {"importable": True, "version": found["version"], "error": None}
    if found["status"] == "timeout":
        return {"importable": False, "version": None, "error": f"import did not finish in {timeout:.0f} s"}
    if found["status"] == "crashed":
        return {"importable": False, "version": None, "error": f"import crashed the process: {found['error'][:240]}"}
    return {"importable": False, "version": None, "error": found["error"][:300]}


def libraries(timeout: float = 120) -> dict:
    """Importability and version of torch and the five decoder libraries, each probed in its own process."""
    names = ["torch", *LIBRARIES]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda m: check_import(m, timeout), names))
    return dict(zip(names, results))


def library_versions() -> dict:
    """{import name: the installed distribution's version, or None} for torch and the decoder libraries, read from
    the installed packages' metadata without importing any (`libraries` imports each, in a process of its own,
    and takes seconds per library): what a result's environment stamp needs."""
    import importlib.metadata as md

    dists = md.packages_distributions()
    out = {}
    for name in ["torch", *LIBRARIES]:
        top = name.split(".")[0]
        found = [d for d in dists.get(top, []) if top != "nvidia" or d.startswith("nvidia-dali")]
        try:
            out[name] = md.version(found[0]) if found else None
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _load_library(names: list[str]) -> dict:
    errors = []
    for name in names:
        try:
            ctypes.CDLL(name)
            return {"loads": True, "library": name, "error": None}
        except OSError as e:
            errors.append(str(e))
    return {"loads": False, "library": names[0], "error": errors[0]}


def driver_video_libraries() -> dict:
    """Whether the driver's NVDEC (libnvcuvid) and NVENC (libnvidia-encode) libraries load. In a container both come
    only with the `video` driver capability (NVIDIA_DRIVER_CAPABILITIES=compute,utility,video)."""
    return {
        "nvcuvid": _load_library(["libnvcuvid.so.1", "libnvcuvid.so"]),
        "nvidia_encode": _load_library(["libnvidia-encode.so.1", "libnvidia-encode.so"]),
    }


def _nvml_call(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def nvml_handle(cuda_index: int = 0):
    """(pynvml, handle) for the GPU that CUDA calls `cuda_index` (CUDA_VISIBLE_DEVICES honoured), or None where NVML
    cannot say, e.g. MIG. Used by notebook 20's ceiling and 23's soak."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    with contextlib.suppress(Exception):  # no pynvml, no NVML, or no such GPU
        import pynvml

        pynvml.nvmlInit()
        if visible is None or not visible.strip():
            return pynvml, pynvml.nvmlDeviceGetHandleByIndex(cuda_index)
        entry = [e.strip() for e in visible.split(",") if e.strip()][cuda_index]
        if entry.isdigit():
            return pynvml, pynvml.nvmlDeviceGetHandleByIndex(int(entry))
        if entry.startswith("GPU-"):
            return pynvml, pynvml.nvmlDeviceGetHandleByUUID(entry)
    return None


def gpus() -> dict:
    """GPUs as NVML sees them: {'available', 'error', 'driver', 'cuda_driver', 'devices': [...]}, each device with
    name, compute capability, memory, video clock and, where NVML gives them, its NVDEC/NVENC/NVJPG/OFA counts."""
    try:
        import pynvml
    except ImportError:
        return {"available": False, "error": "nvidia-ml-py (pynvml) is not installed", "devices": []}
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return {"available": False, "error": f"NVML did not initialise: {e}", "devices": []}
    try:
        driver = _nvml_call(pynvml.nvmlSystemGetDriverVersion)
        cuda = _nvml_call(pynvml.nvmlSystemGetCudaDriverVersion_v2)
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = _nvml_call(pynvml.nvmlDeviceGetMemoryInfo, h)
            cc = _nvml_call(pynvml.nvmlDeviceGetCudaComputeCapability, h)
            dev = {
                "index": i,
                "name": _nvml_call(pynvml.nvmlDeviceGetName, h),
                "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                "memory_gib": round(mem.total / 2**30, 1) if mem else None,
                "video_clock_mhz": _nvml_call(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_VIDEO),
                "video_clock_max_mhz": _nvml_call(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_VIDEO),
                "nvdec_count": None,
                "nvenc_count": None,
                "nvjpg_count": None,
                "ofa_count": None,
                "engine_count_source": None,
            }
            mig = _nvml_call(pynvml.nvmlDeviceGetMigMode, h)
            dev["mig_mode"] = mig[0] if mig else None
            for profile in ("NVML_GPU_INSTANCE_PROFILE_8_SLICE", "NVML_GPU_INSTANCE_PROFILE_7_SLICE"):
                if not hasattr(pynvml, profile):
                    continue
                info = _nvml_call(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h, getattr(pynvml, profile))
                if info is not None and getattr(info, "decoderCount", 0):
                    dev.update(
                        nvdec_count=info.decoderCount,
                        nvenc_count=info.encoderCount,
                        nvjpg_count=info.jpegCount,
                        ofa_count=info.ofaCount,
                        engine_count_source=f"NVML {profile.split('PROFILE_')[1].lower()} instance profile",
                    )
                    break
            devices.append(dev)
        return {
            "available": bool(devices),
            "error": None if devices else "NVML found no GPU",
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "devices": devices,
        }
    finally:
        _nvml_call(pynvml.nvmlShutdown)


def cpu_and_memory() -> dict:
    """CPU model, logical cores (all, and usable by this process) and RAM in GiB."""
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = {}
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            if key in ("MemTotal", "MemAvailable"):
                mem[key] = round(int(value.split()[0]) / 2**20, 1)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_model": model,
        "cpu_logical_cores": os.cpu_count(),
        "cpu_usable_cores": usable,
        "ram_total_gib": mem.get("MemTotal"),
        "ram_available_gib": mem.get("MemAvailable"),
    }


def ffmpeg_versions() -> dict:
    """FFmpeg as PyAV links it (its release, where PyAV says it, and its libavcodec), and the `ffmpeg` command's
    version if there is one."""
    out = {"pyav_ffmpeg": None, "pyav_libavcodec": None, "ffmpeg_cli": None}
    with contextlib.suppress(Exception):
        import av

        v = av.library_versions.get("libavcodec")
        out["pyav_libavcodec"] = ".".join(map(str, v)) if v else None
        out["pyav_ffmpeg"] = getattr(av, "ffmpeg_version_info", None)  # '8.1.2' (PyAV 14 and later)
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        first = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True, timeout=20).stdout
        out["ffmpeg_cli"] = first.split("\n", 1)[0].split(" Copyright")[0]
    return out


def report(probe_libraries: bool = True) -> dict:
    """The whole environment report as a JSON-ready dict (notebook 00; every notebook prints it)."""
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "host": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        **cpu_and_memory(),
        "gpu": gpus(),
        "driver_video_libraries": driver_video_libraries(),
        "ffmpeg": ffmpeg_versions(),
        "libraries": libraries() if probe_libraries else {},
    }


def machine_facts(rep: dict) -> dict:
    """Where a result was measured, from `report()`: {'date_utc', 'gpu', 'driver', 'cuda', 'cpu', 'cores'}. Used by
    the benchmark tables (notebook 20) and the runner's summary."""
    g = rep["gpu"]
    return {
        "date_utc": rep["date_utc"],
        "gpu": g["devices"][0]["name"] if g["available"] else "none",
        "driver": g.get("driver"),
        "cuda": g.get("cuda_driver"),
        "cpu": f"{rep['cpu_model']} x{rep['cpu_usable_cores']}",
        "cores": rep["cpu_usable_cores"],
    }


def format_report(rep: dict) -> str:
    """A readable, fixed-width table of `report()`."""
    rows = [
        ("date (UTC)", rep["date_utc"]),
        ("OS", rep["os"]),
        ("Python", rep["python"]),
        ("CPU", f"{rep['cpu_model']} ({rep['cpu_usable_cores']} of {rep['cpu_logical_cores']} cores usable)"),
        ("RAM", f"{rep['ram_total_gib']} GiB ({rep['ram_available_gib']} GiB available)"),
    ]
    g = rep["gpu"]
    if g["available"]:
        rows.append(("NVIDIA driver / CUDA", f"{g['driver']} / {g['cuda_driver']}"))
        for d in g["devices"]:
            engines = (
                f"{d['nvdec_count']} NVDEC, {d['nvenc_count']} NVENC, {d['nvjpg_count']} NVJPG"
                if d["nvdec_count"] is not None
                else "engine counts not reported by NVML"
            )
            clock = f"video clock {d['video_clock_mhz']} MHz (max {d['video_clock_max_mhz']})"
            rows.append((f"GPU {d['index']}", f"{d['name']}, sm {d['compute_capability']}, {d['memory_gib']} GiB"))
            rows.append((f"GPU {d['index']} video engines", f"{engines}; {clock}"))
    else:
        rows.append(("GPU", f"none ({g['error']})"))
    for lib in rep["driver_video_libraries"].values():
        rows.append((lib["library"], "loads" if lib["loads"] else f"missing: {lib['error']}"))
    ff = rep["ffmpeg"]
    release = f"libavcodec {ff['pyav_libavcodec']}"
    if ff.get("pyav_ffmpeg"):
        release = f"FFmpeg {ff['pyav_ffmpeg']} ({release})"
    rows.append(("FFmpeg", f"PyAV's own {release}; the ffmpeg command: {ff['ffmpeg_cli'] or 'not on PATH'}"))
    for mod, info in rep["libraries"].items():
        label = LIBRARIES.get(mod, mod)
        rows.append((label, info["version"] if info["importable"] else f"NOT AVAILABLE ({info['error']})"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def capabilities(rep: dict | None = None) -> dict:
    """What notebooks may require, as booleans: {'cuda': NVML sees a GPU, 'nvdec': and libnvcuvid loads}."""
    rep = rep or {"gpu": gpus(), "driver_video_libraries": driver_video_libraries()}
    cuda = bool(rep["gpu"]["available"])
    return {"cuda": cuda, "nvdec": cuda and rep["driver_video_libraries"]["nvcuvid"]["loads"]}


def resolve_device(requested: str = "auto") -> tuple[str, str]:
    """Map a notebook's DEVICE parameter to ('cuda', 'cuda:N' or 'cpu', a one-line explanation): 'auto' picks cuda
    where torch sees a GPU, 'cuda' without one falls back to 'cpu'. Raises ValueError for an unparsable device."""
    try:
        asked = None if requested == "auto" else Device.parse(requested)
    except ValueError:
        raise ValueError(f"DEVICE must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {requested!r}") from None
    if asked is not None and not asked.is_cuda:
        return "cpu", "DEVICE='cpu': GPU sections are skipped by request."
    if cuda_visible():
        name = "cuda" if asked is None else str(asked)
        return name, f"DEVICE={requested!r}: using {name}."
    return "cpu", (
        f"DEVICE={requested!r}, but torch sees no CUDA GPU here: running the CPU parts; "
        "GPU sections say they are skipped."
    )


if __name__ == "__main__":  # python -m playbook_utils.env: the report notebook 00 prints
    print(format_report(report()))
