"""The README's table of what the reference machine measured, made from its `summary.json` only.

python -m playbook_utils.tools.headline [--write | --check]   # print / put in the README / exit 1 if it differs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from playbook_utils.bench import media
from playbook_utils.bench.verdicts import percent
from playbook_utils.tools.results import quoted_reference

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- headline table: made by python -m playbook_utils.tools.headline --write -->", "<!-- end -->"
CODECS = {"h264": "H.264", "hevc": "HEVC"}


class Source:
    """The reference's notebook rows, and the executed copies of those the table cites."""

    def __init__(self, folder: Path, summary: dict, readme_dir: Path):
        self.folder, self.readme_dir = folder, readme_dir
        self.rows = {r["notebook"].split("_")[0]: r for r in summary.get("notebooks", [])}
        self.cited: set = set()  # the notebooks a row cites

    def machine(self, number: str) -> dict:
        return (self.rows.get(number) or {}).get("machine") or {}

    def headline(self, number: str) -> dict:
        """The headline of notebook `number` ('21'), {} where the reference has no row for it."""
        return (self.rows.get(number) or {}).get("headline") or {}

    def stale(self, number: str) -> bool:
        """Whether notebook `number` read the generated clips as an older version of today's code made them."""
        return self.machine(number).get("media_version") != media.MEDIA_VERSION

    def cite(self, number: str) -> str:
        """'[21](link), DATE': a link to notebook `number`'s executed copy and the date of its run."""
        self.cited.add(number)
        copy = self.folder / (self.rows.get(number) or {}).get("notebook", "")
        link = Path(os.path.relpath(copy, self.readme_dir)).as_posix()
        return f"[{number}]({link}), {(self.machine(number).get('date_utc') or 'no date')[:10]}"


def clip_words(name: str) -> str:
    """'H.264 1080p GOP 30' from a media-set clip's name ('open' where its GOPs are)."""
    codec = CODECS.get(name.split("_")[0], name.split("_")[0])
    size, gop = re.search(r"_(\d+p)_", name), re.search(r"_gop(\d+)", name)
    words = " ".join(x for x in (codec, size and size.group(1), gop and f"GOP {gop.group(1)}") if x)
    return words + (" open" if "_open" in name else "")


def _pm(spread) -> str:
    """' ± 1.2%' beside a rate, '' where no spread was recorded."""
    return f" ± {percent(spread)}" if spread is not None else ""


def _spread(spread) -> str:
    """' (spread 0.6%)' after two figures the spread belongs to together, '' where none was recorded."""
    return f" (spread {percent(spread)})" if spread is not None else ""


def ceilings_row(summary: dict, src: Source):
    parts = []
    for clips in (summary.get("nvdec_ceiling_fps") or {}).values():
        for name, c in clips.items():
            if media.is_light(name) or "_1080p_" not in name:
                continue
            busy = f"{c['nvdec_util_median']}% busy" if c.get("nvdec_util_median") is not None else "busy: ?"
            parts.append(
                f"{clip_words(name)} {c['fps']:,}{_pm(c.get('spread_pct'))} ({busy}"
                + ("" if c.get("saturated") else ", a lower bound")
                + ")"
            )
    if not parts:
        return None
    return "NVDEC ceiling, filmed-like 1080p, frames/s", "; ".join(parts) + f" ({src.cite('20')})"


def loaders_row(summary: dict, src: Source):
    parts = []
    for b in (summary.get("best_loader") or {}).values():
        pct = 100 * (b.get("fraction_of_ceiling") or 0)
        share = "" if not pct else f", {'at most ' if not b.get('ceiling_saturated') else ''}{pct:.0f}% of the ceiling"
        parts.append(f"{clip_words(b['clip'])}: {b['loader']} {b['fps']:,}{_pm(b.get('spread_pct'))}{share}")
    if not parts:
        return None
    return "best GPU loader, every frame, frames/s in steady state", "; ".join(parts) + f" ({src.cite('21')})"


def sampled_row(summary: dict, src: Source):
    h = src.headline("21")
    if h.get("gpu_sampled_videos_per_s") is None:
        return None
    gpu = h["gpu_sampled_videos_per_s"]
    text = f"GPU: {h['gpu_sampled_loader']} {gpu}{_pm(h.get('gpu_sampled_spread_pct'))}"
    cpu = h.get("videos_per_s_flat_out")
    if cpu:
        spread = _pm(h.get("videos_per_s_flat_out_spread_pct"))
        text += f"; best CPU: {h.get('best_cpu_loader')} {cpu}{spread}"
    return "16 sampled frames a 1080p video, videos/s", text + f" ({src.cite('21')})"


def training_row(summary: dict, src: Source):
    h = src.headline("21")
    if h.get("train_step_ms") is None:
        return None
    text = (
        f"compute {h['train_step_ms']} ms with the loader decoding beside it, {h['train_step_held_ms']} ms on batches "
        f"decoded beforehand{_spread(h.get('train_step_spread_pct'))}; besides, the step waited for data "
        f"{h.get('train_wait_pct')}% of the time ({src.cite('21')})"
    )
    return "a small video transformer's training step", text


def sparse_row(summary: dict, src: Source):
    s = summary.get("sparse_speedup") or {}
    if not s.get("speedup") or s.get("seconds") is None:
        return None
    x = s["speedup"]
    text = (
        f"{s['strategy']} {1e3 * s['seconds']:.0f} ms{_pm(s.get('spread_pct'))}, every frame "
        f"{1e3 * s['everything_seconds']:.0f} ms{_pm(s.get('everything_spread_pct'))}: {x:.1f}x "
        f"({s.get('backend')} on the {s.get('device')}; {src.cite('20')})"
    )
    return f"16 exact frames of a {s.get('clip_s', 0):.0f} s GOP-{s.get('gop')} 1080p clip", text


def harness_row(summary: dict, src: Source):
    h = summary.get("harness_overhead") or {}
    if h.get("overhead_pct") is None:
        return None
    o, spread = h["overhead_pct"], h.get("spread_pct") or 0
    judged = (
        "not comparable (the row ran faster beyond the spread)"
        if h.get("readable") is False
        else "no cost measurable"
        if abs(o) <= spread
        else f"{o:.1f}% cost"
    )
    text = f"{h['harness_fps']:,.0f} against {h['bare_fps']:,.0f} frames/s, spread {percent(spread)}: {judged}"
    return "notebook 20's harness against a bare PyAV loop", text + f" ({src.cite('20')})"


def choice_row(summary: dict, src: Source):
    h = src.headline("22")
    if not h.get("recommended"):
        return None
    fps = h.get("recommended_fps")
    text = h["recommended"] + (f", {fps} frames/s" if fps is not None else "")
    if h.get("runner_up"):
        margin = f", the choice {h['margin_pct']:.0f}% ahead" if h.get("margin_pct") and not h.get("tied") else ""
        text += f"; runner-up {h['runner_up']}{margin}" + (" (tied)" if h.get("tied") else "")
    return f"notebook 22's choice, {h.get('workload', '')}", text + f" ({src.cite('22')})"


def robustness_row(summary: dict, src: Source):
    h = src.headline("23")
    if h.get("bad_outcomes_cpu") is None:
        return None
    gpu = h.get("bad_outcomes_gpu")
    text = (
        f"{h['bad_outcomes_cpu']} on the CPU" + (f", {gpu} on the GPU" if gpu is not None else "")
        + f"; memory +{h.get('worst_rss_growth_pct')}% at most over up to "
        f"{h.get('soak_calls', 0):,} calls ({src.cite('23')})"
    )  # fmt: skip
    return "bad outcomes on broken files (wrong frames, foreign errors, crashes)", text


def scaling_row(summary: dict, src: Source):
    h = src.headline("30")
    if not h.get("aggregate_fps"):
        return None
    ranks = ", ".join(f"{n} rank{'s' if n != '1' else ''} {fps:,.0f} frames/s" for n, fps in h["aggregate_fps"].items())
    text = f"{ranks}; every sample once per epoch: {h.get('every_sample_once')} ({src.cite('30')})"
    return "torchrun, one rank a GPU", text


ROWS = (
    ceilings_row,
    loaders_row,
    sampled_row,
    training_row,
    sparse_row,
    harness_row,
    choice_row,
    robustness_row,
    scaling_row,
)


def default_folder() -> Path:
    """The reference the README quotes (`results.quoted_reference`)."""
    return quoted_reference() or ROOT / "results" / "h200"


def table(folder=None, readme_dir=ROOT) -> str:
    """The markdown table (with the line under it) for the reference in `folder`, links relative to `readme_dir`."""
    folder = Path(folder) if folder is not None else default_folder()
    summary = json.loads((folder / "summary.json").read_text())
    src = Source(folder, summary, Path(readme_dir))
    gpu = (summary.get("machine") or {}).get("gpu") or "the reference machine"
    rows, left = [], []
    for make in ROWS:
        row = make(summary, src)
        (rows.append(row) if row else left.append(make.__name__.removesuffix("_row")))
    lines = [f"| {gpu} | measured |", "|---|---|", *(f"| {w} | {m} |" for w, m in rows), ""]
    stale = sorted(n for n in src.cited if src.stale(n))
    lines.append(
        "± is the spread of repeated measurements; a lower bound is a ceiling whose engines were not saturated."
        + (f" Not recorded, so not shown: {', '.join(left)}." if left else "")
        + (f" Notebooks {', '.join(stale)} ran on an earlier encoding of the clips: rerun them." if stale else "")
    )
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """`text` with what lies between START and END replaced by `block`; ValueError naming the markers if absent."""
    if START not in text or END not in text.split(START, 1)[1]:
        raise ValueError(f"the README has no block between {START!r} and {END!r}")
    head, rest = text.split(START, 1)
    return head + START + "\n" + block + "\n" + END + rest.split(END, 1)[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("folder", nargs="?", default=None, help="the reference folder (default: `default_folder`)")
    ap.add_argument("--readme", default=str(ROOT / "README.md"), help="the README whose table --write/--check use")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--write", action="store_true", help="put the table between the README's markers")
    how.add_argument("--check", action="store_true", help="exit 1 where the README's table is not this one")
    args = ap.parse_args(argv)
    readme = Path(args.readme)
    try:
        block = table(args.folder, readme.parent)
        text = readme.read_text() if (args.write or args.check) else ""
        new = replace_block(text, block) if (args.write or args.check) else ""
    except (OSError, ValueError, KeyError) as e:
        print(f"headline: {e}", file=sys.stderr)
        return 2
    if args.write:
        readme.write_text(new)
        print(f"headline: {readme}: table written")
    elif args.check:
        if new != text:
            print(f"headline: {readme}: its table is not the one {args.folder}/summary.json gives; run --write")
            return 1
        print(f"headline: {readme}: its table is summary.json's")
    else:
        print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
