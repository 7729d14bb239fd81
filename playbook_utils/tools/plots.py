"""The pictures the notebooks share: a grid of stamped frames (01, 10-14), a sampling timeline (01, 15), and
grouped bars and lines with reference lines for the measurements (20, 21). Each returns the figure; show and
save it with `kit.show`."""

from __future__ import annotations

import math
import re

from playbook_utils.bench import faults, media


def stamped_grid(frames, asked, title: str, columns: int = 4):
    """uint8 (N, 3, H, W) or (N, H, W, 3) frames (any device) in a grid, each titled 'asked i · stamp s' (the index
    requested, the one read from its pixels): the picture shows whether the loader was exact. Returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    stamps = media.read_stamps(frames)
    titles = [f"asked {a} · stamp {'none' if s is None else s}" for a, s in zip(asked, stamps)]
    frames = frames.detach().cpu().numpy() if hasattr(frames, "detach") else np.asarray(frames)
    if frames.ndim == 4 and frames.shape[1] == 3 and frames.shape[-1] != 3:
        frames = frames.transpose(0, 2, 3, 1)
    n = len(frames)
    columns = min(columns, n) or 1
    rows = max(1, -(-n // columns))
    aspect = frames.shape[1] / frames.shape[2] if n else 0.56
    fig, axes = plt.subplots(rows, columns, figsize=(3 * columns, 3 * aspect * rows + 0.9), squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k < n:
            ax.imshow(frames[k])
            if titles:
                ax.set_title(titles[k], fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def sampling_timeline(strategies: dict, keyframes, num_frames: int, title: str = ""):
    """Which frames each sampling strategy ({label: indices}) asks for, against the keyframes (red lines); each
    label says how many GOPs it touches, since each costs a decode from its keyframe. Returns the figure."""
    import bisect

    import matplotlib.pyplot as plt

    keys = sorted(keyframes)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * len(strategies)))
    for k in keys:
        ax.axvline(k, color="tab:red", alpha=0.4, lw=1)
    labels = []
    for row, (label, idx) in enumerate(strategies.items()):
        idx = list(idx)
        gops = len({bisect.bisect_right(keys, i) for i in idx})
        distinct = len(set(idx))  # random clips may overlap: their dots coincide
        count = f"{len(idx)} frames" + (f" ({distinct} distinct)" if distinct < len(idx) else "")
        labels.append(f"{label}\n{count}, {gops} of {len(keys)} GOPs")
        ax.scatter(idx, [row] * len(idx), s=12)
    ax.set_yticks(range(len(strategies)), labels, fontsize=8)
    ax.set_ylim(len(strategies) - 0.5, -0.5)
    ax.set_xlim(-1, num_frames)
    ax.set_xlabel("frame index (red lines: keyframes)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _legend_outside(ax) -> None:
    """A legend right of the axes, where it covers no data."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _short(value: float) -> str:
    """A bar's value in a few characters: 6,640 -> '6.6k', 893 -> '893', 12.5 -> '12.5'."""
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1_000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _wrapped(name: str, room: int) -> str:
    """A long clip name broken after its underscores into lines of about `room` characters."""
    lines = [""]
    for part in re.split(r"(?<=_)", name):
        if lines[-1] and len(lines[-1]) + len(part) > room:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def grouped_bars(
    values: dict,
    categories,
    ylabel: str,
    title: str,
    reference: dict | None = None,
    width_in: float = 9.0,
    log: bool = False,
    per_category: dict | None = None,
    not_results: dict | None = None,
):
    """Bars of `values` ({series label: one value per category, None for none}) side by side per category, with
    optional `reference` lines, `per_category` ceilings and hatched `not_results`; `log` for a log scale.
    Returns the figure (notebooks 20, 21)."""
    import matplotlib.pyplot as plt
    import numpy as np

    categories = list(categories)
    fig, ax = plt.subplots(figsize=(width_in, 3.4))
    width = 0.8 / max(1, len(values))
    flagged = False
    labelled = sum(v is not None for vals in values.values() for v in vals) <= 32  # a number over each bar, if few
    for k, (label, vals) in enumerate(values.items()):
        xs = np.arange(len(categories)) + k * width
        bars = ax.bar(xs, [v or 0 for v in vals], width, label=label)
        if labelled:  # on a log scale a bar's height does not read as its value
            ax.bar_label(bars, [_short(v) if v else "" for v in vals], fontsize=6, padding=1)
        bad = [(x, v) for x, v, no in zip(xs, vals, (not_results or {}).get(label) or []) if no and v]
        if bad:  # hatched over the bar, so that the legend keeps the series' plain colour
            ax.bar([x for x, _ in bad], [v for _, v in bad], width, facecolor="none", edgecolor="black", hatch="xx")
            flagged = True
    if flagged:
        ax.bar([0], [0], 0, color="white", edgecolor="black", hatch="xx", label="hatched: no result (see the text)")
    for k, (label, y) in enumerate((reference or {}).items()):
        ax.axhline(y, color="black", ls="--", lw=1, alpha=0.4 + 0.6 / (k + 1), label=label)
    for k, (label, ys) in enumerate((per_category or {}).items()):
        drawn, style = False, ("--", ":", "-.")[k % 3]
        for c, y in enumerate(ys):
            if y:
                left, right = c - width / 2 - 0.05, c + width * (len(values) - 0.5) + 0.05
                ax.hlines(y, left, right, colors="black", linestyles=style, lw=1.2, label=None if drawn else label)
                drawn = True
    room = int(width_in * 8 / max(1, len(categories)))  # characters a category's label has room for at 8 pt
    names = [c if "\n" in str(c) else _wrapped(str(c), room) for c in categories]  # a caller's own lines kept
    ax.set_xticks(np.arange(len(categories)) + width * (len(values) - 1) / 2, names, fontsize=8)
    if log:
        ax.set_yscale("log")
        # bars start at the power of ten below the smallest value: from matplotlib's own bottom, just under it,
        # small differences look huge
        lowest = min((v for vals in values.values() for v in vals if v and v > 0), default=None)
        if lowest:
            ax.set_ylim(bottom=10 ** math.floor(math.log10(lowest) - 1e-9))
    ax.set_ylabel(ylabel + (" (log scale)" if log else ""))
    ax.set_title(title, fontsize=9, loc="left")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def lines(series: dict, xlabel: str, ylabel: str, title: str, reference: dict | None = None, ylim=None):
    """One line with markers per entry of `series` ({label: (xs, ys)}); `reference` ({label: (xs, ys)}) draws dashed
    lines in the colour of the series whose label theirs ends with. Returns the figure (notebooks 20, 21)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    colours = {}
    for label, (xs, ys) in series.items():
        (line,) = ax.plot(xs, ys, marker="o", label=label)
        colours[label] = line.get_color()
    for label, (xs, ys) in (reference or {}).items():
        mine = [c for k, c in colours.items() if label.endswith(k)]
        ax.plot(xs, ys, ls="--", color=mine[0] if mine else "gray", alpha=0.6 if mine else 1.0, label=label)
    ticks = sorted({x for xs, _ in series.values() for x in xs})
    if ticks and all(float(x).is_integer() for x in ticks) and len(ticks) <= 12:
        ax.set_xticks(ticks)  # counts (threads, workers, ranks): no fractional ticks
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=9)
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def soak_curves(soaks: dict, title: str, min_calls: int):
    """Resident-memory growth against `read_frames` calls since warm-up, one line per backend of {label: `faults.soak`
    result}, labelled with its growth per call. Returns the figure (notebook 23)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6))
    most, few = 0, []
    for name, r in soaks.items():
        base = faults.warmup_point(r.get("curve", []), r.get("warmup"))
        if base is None:  # failed, or never past its warm-up: no growth to draw
            continue
        slope = r.get("rss_bytes_per_call")
        if slope is not None and r["calls"] < min_calls:  # a slope, but too few calls to call it a rate: none shown
            label = name
            few.append(name)
        else:
            label = name if slope is None else f"{name} ({slope:+,.0f} B/call)"
        after = [p for p in r["curve"] if p["call"] >= base["call"]]
        calls = [p["call"] - base["call"] for p in after]
        most = max([most, *calls])
        ax.plot(calls, [p["rss_mb"] - base["rss_mb"] for p in after], label=label)
    ax.axhline(0, color="gray", lw=0.8)
    log = most > 1000  # a log scale only where there are many calls
    ax.set_xlabel(
        "read_frames calls after the warm-up"
        + (" (log scale past 100)" if log else "")
        + (f"\ntoo few calls for a leak rate ({min_calls:,} needed): {', '.join(few)}" if few else "")
    )
    if log:
        ax.set_xscale("symlog", linthresh=100)
    ax.set_xlim(left=0)
    ax.set_ylabel("resident memory since\nthe warm-up ended (MiB)")
    ax.set_title(title, fontsize=9)
    _legend_outside(ax)
    fig.tight_layout()
    return fig
