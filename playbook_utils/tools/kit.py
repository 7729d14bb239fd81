"""What a notebook needs besides its lesson, one import away: `nb = kit.Notebook(stem, OUTPUT_DIR, DEVICE)`.

The device and machine stamp, the media set, stamp checks, skips, figures, a rate table, matrix rows, captured
native output and the closing JSON. Notebooks 01 and 10-15. Imports nothing heavy at import.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from playbook_utils import env, folders
from playbook_utils.bench import exactness, matrix, media, timing, words
from playbook_utils.decoders import BACKENDS
from playbook_utils.device import Device
from playbook_utils.errors import describe
from playbook_utils.tools.results import NotebookResults, newest_gpu_reference

# import name -> the name a reader knows (env.LIBRARIES) plus torch
_NAMES = {"torch": "torch", **env.LIBRARIES}


def machine_line(rep: dict, device: str, libraries=()) -> str:
    """Where a notebook ran, in one line: GPU (driver, NVDEC engines), CPU cores, the versions of the imported
    `libraries`, the date and the device. Every notebook but 00, whose full report it points to."""
    g = rep["gpu"]
    if g["available"]:
        d = g["devices"][0]
        engines = f", {d['nvdec_count']} NVDEC" if d.get("nvdec_count") is not None else ""
        gpu = f"{d['name']} (driver {g['driver']}{engines})"
    else:
        gpu = "no NVIDIA GPU"
    versions = [
        f"{_NAMES.get(m, m)} {getattr(sys.modules[m], '__version__', '?')}" for m in libraries if m in sys.modules
    ]
    cpu = f"{rep['cpu_model']} x{rep['cpu_usable_cores']}"
    parts = [gpu, cpu, *versions, f"{rep['date_utc']} UTC", f"device {device}"]
    return "Ran on " + " · ".join(parts) + " (the full report: notebook 00)"


def show(fig, path=None, dpi: int = 90) -> None:
    """Save `fig` to `path` (if given), show it inline even under a non-interactive backend, and close it.
    Used by 01 and 10-15."""
    import matplotlib.pyplot as plt

    if path is not None:
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        display(Image(data=buf.getvalue()))
    plt.close(fig)


@contextlib.contextmanager
def native_output(lines: list):
    """Collect what native code writes to file descriptors 1 and 2 inside the block into `lines`, one string a line
    (Python's prints are not affected). Used by 13-15."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            libc.fflush(None)  # C stdio buffers what it writes to a file: flush it into `tmp`, not later
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            lines += [line.strip() for line in text.splitlines() if line.strip()]


def summarize(lines: list[str], what: str = "the library logged") -> str:
    """One line for many logged lines: how many, and each distinct message once (timestamps and
    [LEVEL] prefixes dropped). Used with `native_output` where the log is part of a lesson."""
    if not lines:
        return f"{what} nothing"
    msgs = list(dict.fromkeys(re.sub(r"^(\[[^\]]*\]\s*)+", "", line) for line in lines))
    shown = "; ".join(msgs[:3]) + (f"; and {len(msgs) - 3} more kinds" if len(msgs) > 3 else "")
    return f"{what} {len(lines)} line{'s' * (len(lines) != 1)}: {shown}"


def _machine() -> dict:
    """The parts of `env.report` the machine line needs, without probing libraries or importing any."""
    import datetime
    import platform

    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "host": platform.node(),
        **env.cpu_and_memory(),
        "gpu": env.gpus(),
        "driver_video_libraries": env.driver_video_libraries(),
    }


def _for_reading(value):
    """`value` with every float rounded to 4 significant digits, for printing (the JSON file keeps them whole)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _for_reading(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_for_reading(v) for v in value]
    return value


def reference_for(stem: str, root: Path = Path(__file__).resolve().parents[2]) -> Path | None:
    """The executed copy of notebook `stem` in the newest GPU reference that ran it (relative to `root`), None where
    none has: where a reader finds what the sections skipped here showed on a GPU."""
    newest = newest_gpu_reference(root / "results", f"{stem}.ipynb")
    return newest.relative_to(root) / f"{stem}.ipynb" if newest is not None else None


class Notebook:
    """One notebook's run: resolves DEVICE, prints the machine stamp (unless `stamp=False`) and collects the stamp
    checks, skips, figures and rates `finish` writes to `output_dir/<stem>.json`. Introduced in notebook 01."""

    def __init__(self, stem: str, output_dir, device: str = "auto", libraries=(), stamp: bool = True):
        self.results = NotebookResults(stem, output_dir)
        self.out = Path(output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.device, note = env.resolve_device(device)
        rep = _machine()
        caps = env.capabilities(rep)
        resolved = Device.parse(self.device)
        self.gpu = resolved.is_cuda and caps["nvdec"]
        self.gpu_id = resolved.index or 0
        if self.gpu:
            self.no_gpu = None
        elif resolved.is_cuda:
            self.no_gpu = "the GPU's video decoder library (libnvcuvid) does not load here"
        else:
            self.no_gpu = "no CUDA GPU here" if device != "cpu" else "DEVICE='cpu'"
        self.checks: dict[str, bool] = {}
        self.infos: dict = {}
        self.figures: list[str] = []
        g = rep["gpu"]
        cpu = f"{rep['cpu_model'].split(' @')[0]} x{rep['cpu_usable_cores']}"
        self.machine = f"{g['devices'][0]['name']}, {cpu}" if g["available"] else cpu
        self.results.data["environment"] = {k: rep[k] for k in ("date_utc", "host", "cpu_model", "cpu_usable_cores")}
        self.results.data["environment"]["gpu"] = g
        self.results.data["environment"]["media_version"] = media.MEDIA_VERSION  # how the generated clips were made
        if stamp:  # notebook 00 prints the whole report instead
            print(machine_line(rep, self.device, libraries))
        if device not in ("auto", self.device):  # asked for a device this machine does not have
            print(note)

    def media(self, smoke: bool) -> dict:
        """Build (once) the shared stamped media set of notebook 01 and return {name: VideoInfo};
        clips this machine cannot encode are recorded as skipped."""
        clips = media.default_media(smoke=smoke)
        for name, why in media.skipped_media(smoke=smoke).items():
            self.skip(f"media {name}", why)
        self.infos = {name: media.probe(path) for name, path in clips.items()}
        return self.infos

    def pick(self, codec: str, long_gop: bool = False):
        """The `VideoInfo` of the media set's `codec` clip nearest 1080p with the shortest (or longest)
        GOP, or None where the set has no such clip (`media.pick_clip`). Call `media` first."""
        name = media.pick_clip(self.infos, codec, long_gop)
        return self.infos[name] if name else None

    def folder(self, video_dir) -> folders.VideoFolder:
        """The reader's folder `video_dir`, scanned once (`folders.scan_videos`): its report printed and its unreadable
        files kept for the run's summary. Notebooks 01 and 10-13."""
        if getattr(self, "_yours", None) is None:
            self._yours = folders.scan_videos(video_dir)
            print(self._yours.report())
            self.results.data["unreadable"] = self._yours.unreadable
        return self._yours

    def timed(self, codec: str, video_dir=None, long_gop: bool = False):
        """The `VideoInfo` of the clip a measured section times: the reader's file of `codec` in `video_dir` nearest
        1080p with the shortest (or longest) GOP, else the media set's clip (`_media_timed`)."""
        if video_dir is None:
            return self._media_timed(codec, long_gop)
        name = media.pick_clip(self.folder(video_dir).infos, codec, long_gop)
        if name is None:
            print(f"none of your files is {codec}: timing the media set's clip instead")
            return self._media_timed(codec, long_gop)
        info = self._yours.infos[name]
        self.infos[info.name] = info
        return info

    def _media_timed(self, codec: str, long_gop: bool):
        """The media set's realistic pair of short and long GOP where it has one, else `pick`'s clip."""
        short, long = (media.pick_clip(self.infos, codec, g, realistic=True) for g in (False, True))
        if short and long and short != long:
            return self.infos[long if long_gop else short]
        return self.pick(codec, long_gop)

    def gop_lesson(self, table: list[dict], short, long, k: int) -> None:
        """Print, for each device of a `rate_table`, K sampled frames on the `long`-GOP clip against the `short` one
        (`words.gop_lesson`), where both rows were measured. Notebooks 10-13."""
        if short is None or long is None or short.name == long.name:
            return
        for dev in dict.fromkeys(r["device"] for r in table):
            rows = {r["clip"]: r for r in table if r["device"] == dev and r["workload"] == f"sparse K={k}" and r["fps"]}
            if short.name in rows and long.name in rows:
                print(f"{dev}: " + words.gop_lesson(rows[short.name], rows[long.name], k, short, long))

    def check(self, label: str, frames, wanted, record: bool = True) -> None:
        """Read the stamp of every frame, compare with the indices `wanted`, print one line
        ('exact' or 'WRONG' with what came back) and record the verdict in `checks[label]`."""
        self.check_stamps(label, media.read_stamps(frames), wanted, record)

    def check_stamps(self, label: str, got, wanted, record: bool = True) -> None:
        """`check` for stamps already read (`media.read_stamps`): `got` against the indices `wanted`."""
        got, wanted = list(got), list(wanted)
        ok = got == wanted
        if record:
            self.checks[label] = ok
        if ok:
            shown = wanted if len(wanted) <= 10 else f"{wanted[:4]} ... {wanted[-2:]}"
            print(f"exact   {label}: {len(got)} frames, stamps {shown}")
        else:
            bad = sum(g != w for g, w in zip(got, wanted)) + abs(len(got) - len(wanted))
            print(
                f"WRONG   {label}: {bad} of {len(wanted)} frames are not the ones asked for\n"
                f"        asked {wanted[:12]}\n        got   {got[:12]}"
            )

    def skip(self, section: str, reason: str) -> None:
        """Record a section that cannot run here and say so in one visible line."""
        self.results.skip(section, reason)

    def needs_gpu(self, section: str, unavailable: str | None = None) -> bool:
        """True where `section` can run on the GPU; otherwise prints one SKIPPED line (with
        `unavailable`, a library's own reason, or why there is no GPU) and returns False."""
        reason = self.no_gpu or unavailable
        if reason:
            self.skip(section, reason)
            return False
        return True

    def section(self, name: str):
        """A part whose exception is printed in one line and recorded; `finish` then fails the notebook."""
        return self.results.section(name)

    def show(self, fig, name: str) -> None:
        """Save `fig` as OUTPUT_DIR/`name` and show it inline (`kit.show`)."""
        show(fig, self.out / name)
        self.figures.append(name)

    def rate_table(self, rows, min_time: float = 0.5, smoke: bool = False, video_dir=None) -> list[dict]:
        """Time each row of `rows` (device, workload, clip name, fn, wanted indices) after checking one call's frames;
        print a small table and return its rows (device, workload, clip, fps, spread_pct, exact, check, error)."""
        backend = next((b for b in BACKENDS if self.results.stem.split("_", 1)[1].startswith(b)), None)
        table = []
        for dev, workload, clip, fn, wanted in rows:
            row = dict(
                device=dev, workload=workload, clip=clip, fps=None, spread_pct=None, exact=None, check=None, error=None
            )
            try:
                path = self.infos[clip].path if clip in self.infos else clip  # the reference decode needs a path
                check = exactness.check_frames(path, list(wanted), fn(), backend)
                row["exact"], row["check"] = check.exact, check.method
                self.checks[f"table: {dev} {workload} {clip}"] = check.exact is True
                m = timing.measure(fn, items=len(wanted), min_time=min_time, sync=timing.cuda_sync(dev))
                row.update(fps=m["per_s"], spread_pct=m["spread_pct"])
            except Exception as e:  # a path this machine cannot run is a row with its reason
                row["error"] = describe(e)[:160]
            table.append(row)
        if caveat := words.smoke_caveat(smoke, video_dir):
            print(caveat)
            self._smoke_caveat = caveat  # said again above the headline's rates (`finish`)
        w = max([14] + [len(r["workload"]) for r in table])  # 10's 'sequential, kept on GPU' too
        print(f"{'device':7s} {'workload':{w}s} {'clip':30s} {'frames/s':>9s} {'spread':>7s} exact (check)")
        for r in table:
            rate = f"{r['fps']:9,.0f} {r['spread_pct']:6.0f}%" if r["fps"] else f"{'-':>9s} {'':7s}"
            print(
                f"{r['device']:7s} {r['workload']:{w}s} {r['clip'][:30]:30s} {rate} {r['exact']}"
                + (f" ({r['check']})" if r["check"] else "")
                + (f"  ({r['error']})" if r["error"] else "")
            )
        for line in words.gpu_slower_lines(table):  # said where it happens, with what one caller measures
            print(line)
        self.results.data["table"] = table
        return table

    @staticmethod
    def headline_rates(table: list[dict], clip: str, gpu_clip: str | None = None) -> dict:
        """cpu/gpu sequential and sparse frames/s of `clip` (GPU: `gpu_clip`, if given) from a `rate_table`, None where
        not measured or not exact, plus `rates_clip` (and `gpu_rates_clip`): every library notebook's headline."""

        def rate(gpu, workload):
            name = gpu_clip or clip if gpu else clip
            rows = [r for r in table if r["clip"] == name and Device.parse(r["device"]).is_cuda == gpu and r["exact"]]
            return next((r["fps"] for r in rows if r["workload"].startswith(workload)), None)

        rates = {f"{kind}_{w}_fps": rate(kind == "gpu", w) for kind in ("cpu", "gpu") for w in ("sequential", "sparse")}
        return {**rates, "rates_clip": clip, **({"gpu_rates_clip": gpu_clip} if gpu_clip not in (None, clip) else {})}

    def matrix_rows(self, backend: str, devices) -> None:
        """Run the correctness matrix for `backend` on `devices`, print the table and the reason for each non-exact
        outcome, record a check that none is WRONG, crashed or timed out; the table goes to `results.data['matrix']`."""
        table: dict = {}
        for dev in devices:
            for case, row in matrix.run([backend], dev, self.out / "matrix").items():
                table.setdefault(case, {})[f"{backend} {Device.parse(dev).kind}"] = row[backend]
        print(matrix.format_table(table))
        for line in matrix.legend(table):  # what each row's traits mean
            print("  " + line)
        reasons: dict = {}
        for case, row in table.items():
            for col, outcome in row.items():
                if outcome != "exact":
                    reasons.setdefault(f"{col}: {outcome}", []).append(case)
        for why, cases in reasons.items():
            print(f"  {' | '.join(cases)} -> {why}")
        self.checks[f"matrix: {backend} returns no wrong frame"] = not any(
            o.startswith(("WRONG", "crashed", "timeout")) for row in table.values() for o in row.values()
        )
        self.results.data["matrix"] = table

    def finish(self, **headline) -> None:
        """Write OUTPUT_DIR/<stem>.json with `headline` (plus 'exact'), the checks and figures; print the skipped
        sections, the path and the headline; raise if a check or a `section` failed."""
        headline.setdefault("exact", all(self.checks.values()) if self.checks else None)
        if self.results.skipped:  # a takeaway above that rests on a skipped section: where a GPU ran it
            copy = reference_for(self.results.stem)
            print(
                f"skipped here ({len(self.results.skipped)}): "
                + "; ".join(line.split(":")[0] for line in self.results.skipped)
                + (f". This notebook on the GPU reference: {copy}" if copy else ". No GPU reference has run it yet")
            )
        self.results.headline = headline
        self.results.data.update(checks=self.checks, figures=self.figures)
        path = self.results.write()
        if getattr(self, "_smoke_caveat", None):  # the headline's rates are the rate table's
            print(f"{self._smoke_caveat}: the rates in the headline below too")
        print(f"{path}\n{json.dumps(_for_reading(self.results.headline), indent=1, default=str)}")
        failed = [k for k, v in self.checks.items() if not v]
        self.results.raise_failures()
        if failed:
            raise AssertionError(f"stamp checks failed: {failed}")
