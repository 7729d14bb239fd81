"""What a notebook hands back: headline numbers, skipped sections, data (used by every notebook).

The runner's summary and the tests read `OUTPUT_DIR/<stem>.json`, never the notebook's printed text.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

from playbook_utils import env
from playbook_utils.bench import sparse, verdicts
from playbook_utils.errors import first_line
from playbook_utils.tools.setup_env import machine_slug

RESULTS = Path(__file__).resolve().parents[2] / "results"
CPU_REFERENCE = RESULTS / "cpu-2core"  # the CI machine's kind: the smoke reference `make test` compares with


def machine_reference(gpu_name: str | None = None) -> Path | None:
    """results/<slug>/ of this machine's first GPU (or of `gpu_name`): where its reference run goes, whether or
    not one exists yet; None without a GPU. Notebook runs on an H100 and on an H200 never share one folder."""
    if gpu_name is None:
        g = env.gpus()
        gpu_name = g["devices"][0]["name"] if g.get("available") and g.get("devices") else None
    slug = machine_slug(gpu_name)
    return RESULTS / slug if slug else None


def gpu_references(results=RESULTS) -> list[tuple[str, Path, set[str]]]:
    """(date, folder, notebooks passed) of every GPU reference under `results` (a folder whose summary.json names
    a GPU), the newest first by its summary's date."""
    found = []
    for summary in Path(results).glob("*/summary.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(summary.read_text())
            machine = data.get("machine") or {}
            passed = {r.get("notebook") for r in data.get("notebooks", []) if r.get("status") == "passed"}
            if machine_slug(machine.get("gpu")):
                found.append((machine.get("date_utc") or "", summary.parent, passed))
    return sorted(found, key=lambda f: f[0], reverse=True)


def newest_gpu_reference(results=RESULTS, notebook: str | None = None) -> Path | None:
    """The GPU reference that ran last (with `notebook`, e.g. '20_decode_benchmarks.ipynb': the newest whose run of
    it passed); None where there is none."""
    return next((f for _, f, passed in gpu_references(results) if notebook is None or notebook in passed), None)


def quoted_reference(results=RESULTS) -> Path | None:
    """The reference the README quotes: the newest whose summary holds every notebook of notebooks/, passed; while
    none is complete, the one holding the most (a machine's first parts do not replace a fuller reference)."""
    notebooks = {p.name for p in (Path(results).parent / "notebooks").glob("[0-9]*.ipynb")}
    refs = gpu_references(results)
    complete = [f for _, f, passed in refs if notebooks <= passed]
    fullest = max(refs, key=lambda r: (len(r[2] & notebooks), r[0]), default=(None, None))[1]
    return complete[0] if complete else fullest


def reference_for(kind: str = "gpu") -> Path:
    """The reference a run compares with: on a GPU machine its own (`machine_reference`) where it exists, else the
    one the README quotes (`quoted_reference`); `kind='cpu'`: the CPU reference."""
    if kind == "cpu":
        return CPU_REFERENCE
    own = machine_reference()
    if own is not None and (own / "summary.json").exists():
        return own
    return quoted_reference() or RESULTS / "h200"


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


class NotebookResults:
    """Collects one notebook's results and writes them to `<output_dir>/<stem>.json`."""

    def __init__(self, stem: str, output_dir):
        self.stem = stem
        self.output_dir = Path(output_dir)
        self.headline: dict = {}
        self.skipped: list[str] = []
        self.failures: list[str] = []
        self.data: dict = {}

    def skip(self, section: str, reason: str) -> None:
        """Record and print, in one visible line, a section that cannot run here."""
        line = f"{section}: {reason}"
        self.skipped.append(line)
        print(f"SKIPPED  {line}")

    @contextlib.contextmanager
    def section(self, name: str):
        """Run one part of a notebook: an exception is printed and recorded, the notebook goes on to the
        next part, and `raise_failures` (in its last cell) fails it. Nothing is hidden."""
        try:
            yield
        except Exception as e:
            line = f"{name}: {type(e).__name__}: {first_line(e)[:300]}"
            self.failures.append(line)
            print(f"FAILED   {line}")

    def raise_failures(self) -> None:
        """Raise if any `section` failed (after `write`, so the JSON says what did run)."""
        if self.failures:
            raise RuntimeError("parts of this notebook failed:\n" + "\n".join(self.failures))

    def write(self) -> Path:
        """Write the JSON file and return its path."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        path = self.output_dir / f"{self.stem}.json"
        doc = {"notebook": self.stem, "headline": self.headline, "skipped": self.skipped, **self.data}
        if self.failures:
            doc["failures"] = self.failures
        path.write_text(json.dumps(_jsonable(doc), indent=1))
        return path


def _sparse_times(n20: dict) -> dict:
    """The seconds and spreads behind notebook 20's sparse speed-up (its strategy and decoding everything) and the
    strategies tied with the quickest, from its 'sparse_strategies' record; {} where 20 recorded none."""
    s = n20["sparse_speedup"]
    clip = next((v for v in (n20.get("sparse_strategies") or {}).values() if v.get("gop") == s.get("gop")), None)
    if not clip or s.get("strategy") not in clip or "decode everything" not in clip:
        return {}
    best, everything = clip[s["strategy"]], clip["decode everything"]
    v = verdicts.rank((k, 1 / clip[k]["seconds"], clip[k].get("spread_pct")) for k in sparse.EXACT if k in clip)
    tied = [v.runner_up, *(t[0] for t in v.also_tied)] if v.tied else []  # as 20's ranking of its GOP's strategies
    return {
        "seconds": best["seconds"],
        "spread_pct": best.get("spread_pct"),
        "everything_seconds": everything["seconds"],
        "everything_spread_pct": everything.get("spread_pct"),
        "frames": clip.get("frames"),
        "tied_with": tied,
    }


def reference_numbers(folder) -> dict:
    """The headline numbers of a full run from notebooks 20 and 21's JSON in `folder`: {'nvdec_ceiling_fps',
    'best_loader', 'sparse_speedup', 'harness_overhead'}, a key left out where not measured. Used by summary.json."""
    folder = Path(folder)

    def load(stem):
        try:
            return json.loads((folder / f"{stem}.json").read_text())
        except (OSError, ValueError):
            return {}

    n20, n21 = load("20_decode_benchmarks"), load("21_training_loader_benchmarks")
    out: dict = {}
    clips = n20.get("clips", {})

    def codec_of(name):  # as 20 recorded it, else the media set's naming (<codec>_<height>p_...)
        return clips.get(name, {}).get("codec") or name.split("_")[0]

    ceilings = {}
    for name, c in (n20.get("nvdec_ceiling") or {}).items():
        if c.get("fps"):
            best = c.get("best") or {}
            ceilings.setdefault(codec_of(name), {})[name] = {
                "fps": round(c["fps"]),
                "layout": f"{best.get('processes')}x{best.get('threads')}",
                "decoder": best.get("decoder", "pynvvideocodec"),
                "nvdec_util_median": best.get("nvdec_util_median"),
                "saturated": c.get("saturated"),
                "counted": best.get("counted"),  # None: counted the old way (its last chunks whole)
                "spread_pct": c.get("spread_pct"),  # across its window's parts; None from a run that kept no parts
            }
    if ceilings:
        out["nvdec_ceiling_fps"] = ceilings
    best = (n21.get("headline") or {}).get("best_gpu_loader") or {}
    for name, b in best.items():
        c21 = (n21.get("gpu_ceilings") or {}).get(name) or {}  # the ceiling 21 judged this loader by (its own, or 20's)
        out.setdefault("best_loader", {})[name] = {  # by clip: HEVC's open and closed GOP each have theirs
            "clip": name,
            "loader": b["loader"],
            "backend": b["backend"],
            "fps": b["fps"],
            "ceiling_fps": b.get("ceiling_fps"),
            "ceiling_saturated": b.get("ceiling_saturated"),
            "fraction_of_ceiling": round(b["pct_of_ceiling"] / 100, 3) if b.get("pct_of_ceiling") else None,
            "spread_pct": b.get("spread_pct"),
            "clip_mbps": b.get("clip_mbps"),
            "lookahead_items": b.get("lookahead_items"),
            "ceiling_decoder": (c21.get("best") or {}).get("decoder"),
            "ceiling_counted": (c21.get("best") or {}).get("counted"),
            "ceiling_spread_pct": c21.get("spread_pct"),
        }
    if isinstance(n20.get("sparse_speedup"), dict):
        out["sparse_speedup"] = {**n20["sparse_speedup"], **_sparse_times(n20)}
    if n20.get("harness"):
        out["harness_overhead"] = n20["harness"]
    return out
