"""The README's table of what the reference machine measured, made from its `summary.json` and nothing else:

    python -m playbook_utils.tools.headline                  # print the table for results/h200
    python -m playbook_utils.tools.headline --write          # put it between the README's markers
    python -m playbook_utils.tools.headline --check          # exit 1 where the README's table differs

Each row quotes the reference numbers of `summary.json` (`nvdec_ceiling_fps`, `best_loader`, `sparse_speedup`,
`harness_overhead`, which `run_notebooks` gathers from notebooks 20 and 21) or a notebook row's headline, with the
spread and the margin where the run recorded them, and ends with its source: the notebook, linked to its executed
copy, the `In [N]` of the cell whose output printed the figure (or "not found in its output", where none did),
and the date and commit it ran at. A row whose numbers the run did not record is left out, and the line under the
table names it. A test checks that the README's table is this one (issue 31: the README quotes nothing that is
not in summary.json), so adopting a part (`nightly --adopt`) is followed by `--write`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from playbook_utils import media
from playbook_utils.bench import anchor, nvdec
from playbook_utils.bench.verdicts import percent

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- headline table: made by python -m playbook_utils.tools.headline --write -->", "<!-- end -->"
CODECS = {"h264": "H.264", "hevc": "HEVC"}


class Source:
    """Where a reference figure was printed: the notebook's executed copy in the reference folder and its row."""

    def __init__(self, folder: Path, summary: dict, readme_dir: Path):
        self.folder, self.readme_dir = folder, readme_dir
        self.rows = {r["notebook"].split("_")[0]: r for r in summary.get("notebooks", [])}
        self.cells: dict = {}  # {executed copy: its cells}, each copy read once for all the figures it printed
        self.cited: set = set()  # the notebooks a row cites

    def machine(self, number: str) -> dict:
        """The machine stamp of notebook `number`'s row, {} where there is none."""
        return (self.rows.get(number) or {}).get("machine") or {}

    def date(self, number: str) -> str:
        """The UTC date and time notebook `number` ran at, '' where not recorded."""
        return self.machine(number).get("date_utc") or ""

    def media_version(self, number: str):
        """The media version notebook `number` ran with (the runner's stamp; None: before 4, or no row)."""
        return self.machine(number).get("media_version")

    def older_media(self) -> list[str]:
        """The cited notebooks that read the generated clips of another media version than today's code makes
        (`media.MEDIA_VERSION`; the runner stamps it since version 4)."""
        return sorted(n for n in self.cited if self.media_version(n) != media.MEDIA_VERSION)

    def headline(self, number: str) -> dict:
        """The headline of notebook `number` ('21'), {} where the reference has no row for it."""
        return (self.rows.get(number) or {}).get("headline") or {}

    def cite(self, number: str, *needles: str) -> str:
        """'[21, In [15]](link), 2026-12-03, `15696c4`': the notebook, the cell whose output holds the first of
        `needles` that one does (the figure as the row gives it, then as an older copy printed it), the run."""
        row = self.rows.get(number) or {}
        self.cited.add(number)
        copy = self.folder / row.get("notebook", "")
        link = Path(os.path.relpath(copy, self.readme_dir)).as_posix()
        if copy not in self.cells:
            self.cells[copy] = read_cells(copy)
        cell = next((n for n in (printed_in(self.cells[copy], x) for x in needles) if n is not None), None)
        where = f"In [{cell}]" if cell is not None else "not found in its output"
        machine = self.machine(number)
        commit = (machine.get("commit") or "")[:7]
        run = f"{(machine.get('date_utc') or 'no date')[:10]}, " + (f"`{commit}`" if commit else "no commit recorded")
        return f"[{number}, {where}]({link}), {run}"


def read_cells(path: Path) -> list:
    """The cells of the executed notebook at `path`, [] where it cannot be read."""
    try:
        return json.loads(Path(path).read_text()).get("cells", [])
    except (OSError, ValueError):
        return []


def printed_in(cells: list, needle: str) -> int | None:
    """The execution count of the first code cell of an executed notebook's `cells` whose printed output holds
    `needle`, the closing cell that prints the headline left out (it repeats every figure); None where none does."""
    for c in cells:
        if c.get("cell_type") != "code" or "finish(" in "".join(c.get("source", "")):
            continue
        for o in c.get("outputs", []):
            text = o.get("text") or (o.get("data") or {}).get("text/plain") or ""
            if needle in ("".join(text) if isinstance(text, list) else text):
                return c.get("execution_count")
    return None


def clip_words(name: str, mbps: float | None) -> str:
    """'H.264 1080p GOP 30, 9.7 Mbit/s' from a media-set clip's name and its measured bitrate."""
    codec = CODECS.get(name.split("_")[0], name.split("_")[0])
    size = re.search(r"_(\d+p)_", name)
    gop = re.search(r"_gop(\d+)", name)
    words = " ".join(x for x in (codec, size and size.group(1), gop and f"GOP {gop.group(1)}") if x)
    words += " open" if "_open" in name else ""
    return words + (f", {mbps:.1f} Mbit/s" if mbps else "")


def _pm(spread) -> str:
    """' ± 1.2%' beside a rate or a ceiling, '' where no spread was recorded."""
    return f" ± {percent(spread)}" if spread is not None else ""


OLD_COUNT = (
    "counted with each decoder's last 32-frame chunk whole, as TorchCodec's count was before 2026-12-05: high by up "
    "to 32 frames per decoder over its window"
)


def old_count(decoder, counted) -> bool:
    """Whether a ceiling was counted by TorchCodec's decoders before their last chunks were counted by their share."""
    return decoder == "torchcodec" and not counted


def ceilings_row(summary: dict, src: Source):
    mbps = src.headline("20").get("nvdec_ceiling_mbps") or {}
    parts = []
    for codec, clips in (summary.get("nvdec_ceiling_fps") or {}).items():
        for name, c in clips.items():
            if media.is_light(name):
                continue
            state = (
                "saturated"
                if c.get("saturated")
                else (
                    "a lower bound: the host held it back"
                    if (c.get("nvdec_util_median") or 0) < nvdec.SATURATED_PCT
                    else "a lower bound: more decoders still gained"
                )
            )
            procs, _, threads = str(c.get("layout")).partition("x")
            parts.append(
                f"{clip_words(name, mbps.get(name))}: {c['fps']:,} frames/s"
                + _pm(c.get("spread_pct"))
                + (
                    f", decoders {c['nvdec_util_median']}% busy"
                    if c.get("nvdec_util_median") is not None
                    else ", decoder utilization not measured"
                )
                + f", {state} ({procs} processes x {threads} "
                f"{c.get('decoder')} decoders"
                + (f"; {OLD_COUNT}" if old_count(c.get("decoder"), c.get("counted")) else "")
                + ")"
            )
    if not parts:
        return None
    first = next(iter(next(iter(summary["nvdec_ceiling_fps"].values())).values()))
    needle = f"{first['fps']:,}"
    return (
        "NVDEC ceiling on the realistic clips (notebook 20's generated clips, encoded at the bitrates of filmed "
        "footage): raw decoding, processes x decoders, the most frames/s",
        "; ".join(parts) + f" ({src.cite('20', needle)})",
    )


def loaders_row(summary: dict, src: Source):
    best = summary.get("best_loader") or {}
    margins = src.headline("21").get("best_gpu_loader") or {}
    parts = []
    for codec, b in best.items():
        pct, ceiling = 100 * (b.get("fraction_of_ceiling") or 0), b.get("ceiling_fps")
        c_spread = _pm(b.get("ceiling_spread_pct"))
        if not pct or not ceiling:
            share = "no ceiling to put it against"
        elif b.get("ceiling_saturated"):
            share = f"{pct:.1f}% of the ceiling 21 measured beside it ({ceiling:,}{c_spread}, saturated)"
        else:
            share = (
                f"at most {pct:.1f}% of the ceiling 21 measured beside it ({ceiling:,}{c_spread}, only a lower bound)"
            )
        if pct and old_count(b.get("ceiling_decoder"), b.get("ceiling_counted")):
            share += f" (that ceiling {OLD_COUNT}, so the share is low by as much)"
        spread = _pm(b.get("spread_pct"))
        margin = (margins.get(b["clip"]) or {}).get("margin")
        needle = f"{b['fps']:,}"
        other = ((summary.get("nvdec_ceiling_fps") or {}).get(codec) or {}).get(b["clip"]) or {}
        beyond = max(b.get("spread_pct") or 0, other.get("spread_pct") or 0)  # as nvdec.against_ceiling judges
        if other.get("saturated") and b["fps"] > other["fps"] * (1 + beyond / 100):
            share += (
                f"; above the {other['fps']:,} that notebook 20 measured as saturated on this clip in another run "
                f"({str(other.get('layout')).replace('x', ' x ')}), so that ceiling was too low: no loader beats "
                "the engines"
            )
        parts.append(
            f"{clip_words(b['clip'], b.get('clip_mbps'))}: {b['loader']}, {needle} frames/s{spread}, "
            f"{share}" + (f" ({margin})" if margin else "") + f" ({src.cite('21', needle)})"
        )
    if not parts:
        return None
    return (
        "best GPU-side loader, every frame model-ready on the GPU, in steady state over distinct files (what it "
        "decoded before its clock started left out)",
        "; ".join(parts),
    )


def sampled_row(summary: dict, src: Source):
    h = src.headline("21")
    if h.get("gpu_sampled_videos_per_s") is None:
        return None
    spread = _pm(h.get("gpu_sampled_spread_pct"))
    cpu = h.get("videos_per_s_flat_out")
    cpu_spread = _pm(h.get("videos_per_s_flat_out_spread_pct"))
    text = (
        f"{h['gpu_sampled_loader']} on the GPU {h['gpu_sampled_videos_per_s']} videos/s{spread}"
        + (f" ({h['gpu_sampled_margin']})" if h.get("gpu_sampled_margin") else "")
        + f" ({src.cite('21', str(h['gpu_sampled_videos_per_s']) + ' videos/s')})"
        + (
            f"; the best CPU loader 21 measured ({h.get('best_cpu_loader')}) {cpu} videos/s{cpu_spread}, flat out "
            f"({src.cite('21', f'{cpu} videos/s')})"
            if cpu
            else ""
        )
    )
    return "16 sampled frames per realistic 1080p video (notebook 21's K), whole loaders", text


def training_row(summary: dict, src: Source):
    h = src.headline("21")
    if h.get("train_step_ms") is None:
        return None
    cost = h.get("train_step_cost_pct")
    spread = h.get("train_step_spread_pct")
    judged = ""
    if cost is not None and spread is not None:
        judged = f" ({cost:+.1f}%, {'inside' if abs(cost) <= spread else 'beyond'} the {percent(spread)} spread)"
    text = (
        f"median step {h['train_step_ms']} ms with {h.get('train_loader') or 'the loader'} decoding beside it, "
        f"{h['train_step_held_ms']} ms on the same batches decoded beforehand{judged}; waiting for data took "
        f"{h.get('train_wait_pct')}% of the wall time besides"
        + (
            f"; peak GPU memory of a step {h['train_peak_mem_mb']:,.0f} MB"
            if h.get("train_peak_mem_mb") is not None
            else ""
        )
        + f" ({src.cite('21', str(h['train_step_ms']) + ' ms', 'decoding beside it')})"
    )
    return "a small video transformer training on the GPU, with and without decoding beside it", text


def sparse_row(summary: dict, src: Source):
    s = summary.get("sparse_speedup") or {}
    if not s.get("speedup"):
        return None

    def ms(seconds, spread):
        return f"{1e3 * seconds:.0f} ms" + _pm(spread)

    every = "decoding every frame" + (f" of {s['frames']:,}" if s.get("frames") else "")
    if s.get("seconds") is not None:
        every += f", {ms(s['everything_seconds'], s.get('everything_spread_pct'))}"
    took = f" {ms(s['seconds'], s.get('spread_pct'))}," if s.get("seconds") is not None else ""
    tied = f"; tied with {', '.join(s['tied_with'])}" if s.get("tied_with") else ""
    x = s["speedup"]
    how, needle = (f"{x:.1f}x faster than", f"1/{x:.1f}") if x >= 1 else (f"{1 / x:.1f}x slower than", f"{1 / x:.1f}x")
    text = f"{s['strategy']}:{took} {how} {every}{tied} ({s.get('backend')} on the {s.get('device')}; {src.cite('20', needle)})"
    return f"16 exact frames of a {s.get('clip_s', 0):.0f} s GOP-{s.get('gop')} 1080p clip", text


def harness_row(summary: dict, src: Source):
    h = summary.get("harness_overhead") or {}
    if h.get("overhead_pct") is None:
        return None
    o, spread = h["overhead_pct"], h.get("spread_pct") or 0
    if not h.get("readable", anchor.harness_readable(o, spread)):  # an older record has no flag: the same rule
        judged = (
            "the row ran faster than the bare loop beyond the spread: the two ran under other conditions, no cost read"
        )
    elif abs(o) <= spread:
        rate = 100 * (h["harness_fps"] / h["bare_fps"] - 1)  # the row's rate against the bare loop's
        judged = f"no cost measurable (the row {abs(rate):.1f}% {'faster' if rate > 0 else 'slower'}, inside the {percent(spread)} spread)"
    else:
        judged = f"the harness costs {o:.1f}%, beyond the {percent(spread)} spread"
    others = anchor.costs_line(h.get("by_library") or {})  # every CPU library's row against its own loop
    return (
        "notebook 20's benchmark harness against a bare PyAV loop, every frame of the same clip on the CPU",
        f"the harness's row {h['harness_fps']:,.0f} frames/s, the bare loop {h['bare_fps']:,.0f}: {judged} "
        f"({src.cite('20', 'the harness:')})" + (f"; {others} ({src.cite('20', 'each library')})" if others else ""),
    )


def choice_row(summary: dict, src: Source):
    h = src.headline("22")
    if not h.get("recommended"):
        return None
    fps = h.get("recommended_fps")
    text = (
        f"{h['recommended']}"
        + (f", {fps} frames/s" if fps is not None else "")
        + (
            f" ({h['margin_note']})"
            if h.get("margin_note")
            else (f"; runner-up {h['runner_up']}" if h.get("runner_up") else "")
        )
        + (f"; the call: `{h['recommended_how']}`" if h.get("recommended_how") else "")
        + f" ({src.cite('22', h['recommended'])})"
    )
    later = [n for n in ("20", "21") if src.date(n) > src.date("22")]
    if later:  # 22 ranks what 20 and 21 measured: a 22 older than them ranked an earlier run's numbers
        text += f"; made from an earlier run of {' and '.join(later)} than the one above: stale until 22 runs again"
    mixed = sorted({n for n in ("20", "21") if src.media_version(n) != src.media_version("22")} - set(later))
    if mixed:  # 22 ran after them, but they read the generated clips as another media version made them
        text += (
            f"; {' and '.join(mixed)} ran on the generated clips of another media version than 22 "
            f"(the same names over other bytes): stale until {'they run' if len(mixed) > 1 else 'it runs'} again, then 22"
        )
    return f"notebook 22's recommendation for the {h.get('workload', '')} workload on the reference media", text


def robustness_row(summary: dict, src: Source):
    h = src.headline("23")
    if h.get("bad_outcomes_cpu") is None:
        return None
    gpu = h.get("bad_outcomes_gpu")
    text = (
        f"{h['bad_outcomes_cpu']} bad outcomes on the CPU"
        + (f", {gpu} on the GPU" if gpu is not None else "")
        + f" (wrong frames {h.get('wrong_frames')}, foreign exceptions {h.get('foreign_exceptions')}, "
        f"workers ended by a signal {h.get('worker_signals')}) ({src.cite('23', 'bad outcomes')}); up to "
        f"{h.get('soak_calls', 0):,} random-access calls per backend within a time limit ({h.get('soak_fewest_calls') or 0:,} "
        f"for the slowest): "
        f"memory grew at most {h.get('worst_rss_growth_pct')}% on the host, {h.get('worst_gpu_growth_pct')}% on "
        f"the GPU"
        + (f", {h['worst_rss_bytes_per_call']:,} bytes per call at worst" if h.get("worst_rss_bytes_per_call") else "")
        + (
            f" ({h['soak_backends_too_few_calls']} backends made too few calls to tell a leak from the allocator)"
            if h.get("soak_backends_too_few_calls")
            else ""
        )
        + f" ({src.cite('23', 'growth', 'calls')})"
    )
    return "broken files against every backend, in child processes; memory over many calls", text


def scaling_row(summary: dict, src: Source):
    h = src.headline("30")
    if not h.get("aggregate_fps"):
        return None
    ranks = ", ".join(f"{n} rank{'s' if n != '1' else ''} {fps:,.0f} frames/s" for n, fps in h["aggregate_fps"].items())
    eff = h.get("scaling_efficiency")
    text = (
        f"{ranks} ({h.get('backend')} on {h.get('device')}, {h.get('process_group')}, "
        f"{h.get('gpu_threads_per_rank')} threads per rank); every sample once per epoch: {h.get('every_sample_once')} "
        f"({src.cite('30', 'each sample once')}); "
        + (f"scaling efficiency {eff}" if eff is not None else "scaling efficiency needs two GPUs: not measured")
        + (
            f"; cold storage reads {h['storage_cold_mb_s']:,.0f} MB/s, {h['storage_ranks_fed']} times one rank's "
            f"read rate ({src.cite('30', 'such ranks', 'ranks')})"
            if h.get("storage_ranks_fed") is not None
            else ""
        )
    )
    return "one rank per GPU with torchrun, sampled frames of realistic 1080p H.264", text


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


def table(folder=ROOT / "results" / "h200", readme_dir=ROOT) -> str:
    """The markdown table (with the line under it) for the reference in `folder`, links relative to `readme_dir`."""
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    src = Source(folder, summary, Path(readme_dir))
    rows, left = [], []
    for make in ROWS:
        row = make(summary, src)
        (rows.append(row) if row else left.append(make.__name__.removesuffix("_row")))
    lines = ["| what | measured |", "|---|---|", *(f"| {w} | {m} |" for w, m in rows), ""]
    summary_md = Path(os.path.relpath(folder / "summary.md", readme_dir)).as_posix()
    lines.append(
        "Saturated: NVML's median decoder utilization at least 95% and more decoders gained under 3%; otherwise the "
        "ceiling is only a lower bound (and a share of it an upper bound). ± and spread: how much the repeated "
        "measurements of one rate differ (the middle half of them, or all of 2-3, in % of their median); tied: a margin inside "
        f"the spread. Made from `summary.json` ([{summary_md}]({summary_md}); its rows by machine, date and commit) "
        "by `python -m playbook_utils.tools.headline --write`"
        + (f"; not recorded in it, so not shown: {', '.join(left)}" if left else "")
        + "."
    )
    if older := src.older_media():  # the same paragraph: the README keeps to its length
        lines[-1] += (
            f" Notebook{'s' if len(older) > 1 else ''} {', '.join(older)} ran before today's media version "
            f"({media.MEDIA_VERSION}; before 4 the realistic clips came out at other bitrates than their names give, "
            "today's at them): rerun, their rates on those clips can move with no library changed; the rows that "
            "name a clip give the bitrate it was measured at."
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
    ap.add_argument("folder", nargs="?", default=str(ROOT / "results" / "h200"), help="the reference folder")
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
