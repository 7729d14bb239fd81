"""Noise-aware verdicts: "fastest", "best" and "recommended" with the margin and the spread (notebooks 12, 20-22).
Every verdict states the first's margin over the second and the measurements' spread, and calls them tied when the
margin is inside the spread."""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np


def spread_pct(values) -> float | None:
    """The spread of repeated measurements in % of their median: the interquartile range for 4 or more values, the
    whole range for 2 or 3; None for fewer than 2 (or a median of 0). Notebook 20."""
    xs = sorted(float(v) for v in values)
    if len(xs) < 2 or (med := statistics.median(xs)) == 0:
        return None
    if len(xs) >= 4:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        return 100 * (q3 - q1) / med
    return 100 * (xs[-1] - xs[0]) / med


def rounded(value, digits: int = 1):
    """`value` rounded to `digits` for a headline, None kept as None (a spread that could not be measured)."""
    return None if value is None else round(float(value), digits)


def block_rates(amounts, seconds, blocks: int = 4) -> list[float]:
    """Rates over `blocks` runs of consecutive events (amounts, seconds), to take a spread of when single events come
    in bursts (fewer blocks for fewer events). Notebook 21."""
    amounts, seconds = list(amounts), list(seconds)
    n = min(blocks, len(amounts))
    if n == 0:
        return []
    cuts = [round(k * len(amounts) / n) for k in range(n + 1)]
    return [sum(amounts[a:b]) / sum(seconds[a:b]) for a, b in zip(cuts, cuts[1:]) if sum(seconds[a:b]) > 0]


def _number(value: float) -> str:
    """A rate for a sentence: thousands separators from 10 up, 2 significant digits below (1.0, not 1)."""
    return f"{value:,.0f}" if abs(value) >= 9.5 else f"{value:#.2g}"


def percent(value: float | None) -> str:
    """A spread or margin for a sentence: one decimal under 10% (a 0.4% spread must not read "0%"), whole above."""
    value = value or 0.0
    return f"{value:.1f}%" if abs(value) < 9.95 else f"{value:.0f}%"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The first two of a ranking of rates (higher is better), with the margin between them and their spread."""

    best: str
    best_value: float
    runner_up: str | None
    runner_up_value: float | None
    margin_pct: float | None  # how much higher the best is than the runner-up, in % of the runner-up
    spread_pct: float | None  # the larger of the two measurements' spreads
    tied: bool  # margin inside the spread (or no spread known: see `rank`)
    # when tied: the entries after the runner-up tied with the best too, each (label, rate, the best's margin over it
    # in % as `margin_pct`, its spread): a margin not larger than the larger of its spread and the first two's
    also_tied: tuple = ()

    def sentence(self, unit: str = "frames/s", what: str = "the fastest") -> str:
        """One line for a notebook: the winner, its margin and the spread, or that the first two are tied."""
        if self.runner_up is None:
            return f"{self.best}: {_number(self.best_value)} {unit} (the only one measured, so nothing to compare)"
        if self.tied and self.also_tied:
            names = [self.best, self.runner_up, *(t[0] for t in self.also_tied)]
            values = [self.best_value, self.runner_up_value, *(t[1] for t in self.also_tied)]
            spread = max(self.spread_pct or 0, *(t[3] or 0 for t in self.also_tied))
            return (
                f"{', '.join(names[:-1])} and {names[-1]} are tied here: {' vs '.join(_number(v) for v in values)} "
                f"{unit}, the first {percent(self.also_tied[-1][2])} ahead of the last against a spread of "
                f"{percent(spread)} of the measurements"
            )
        if self.tied:
            spread = "an unknown spread" if self.spread_pct is None else f"a spread of {percent(self.spread_pct)}"
            return (
                f"{self.best} and {self.runner_up} are tied here: {_number(self.best_value)} vs "
                f"{_number(self.runner_up_value)} {unit}, a margin of {percent(self.margin_pct)} against {spread} "
                f"of the measurements"
            )
        margin, spread = percent(self.margin_pct), percent(self.spread_pct)
        for digits in (1, 2):  # a margin beyond the spread never reads as equal to it ("20% ... more than ... 20%")
            if margin != spread or self.spread_pct is None:
                break
            margin, spread = f"{self.margin_pct:.{digits}f}%", f"{self.spread_pct:.{digits}f}%"
        head = (
            f"{self.best} is {what} here: {_number(self.best_value)} {unit}, {margin} ahead of "
            f"{self.runner_up} ({_number(self.runner_up_value)})"
        )
        if self.spread_pct is None:
            return f"{head}; no spread was measured (one run each), so this margin is not tested against the noise"
        return f"{head}, more than a spread of {spread} of the measurements"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def rank(entries, unknown_spread_ties: bool = False) -> Verdict:
    """The verdict over `entries` of (label, rate, spread_pct or None), higher first, each label's best counted:
    tied when the margin is not above the larger spread (with no spread known, only if `unknown_spread_ties`).
    Raises ValueError for no entries. Notebook 20."""
    best_of: dict[str, tuple[float, float | None]] = {}
    for label, value, spread in entries:
        if value is not None and (label not in best_of or value > best_of[label][0]):
            best_of[label] = (float(value), spread)
    if not best_of:
        raise ValueError("rank: nothing measured to rank")
    ordered = sorted(best_of.items(), key=lambda kv: -kv[1][0])
    (b, (bv, bs)) = ordered[0]
    if len(ordered) == 1:
        return Verdict(b, bv, None, None, None, bs, False)
    (r, (rv, rs)) = ordered[1]
    margin = 100 * (bv / rv - 1) if rv > 0 else float("inf")
    spread = max((s for s in (bs, rs) if s is not None), default=None)
    tied = (margin <= spread) if spread is not None else unknown_spread_ties
    also = []
    for label, (value, s) in ordered[2:] if tied and spread is not None else ():
        ahead = 100 * (bv / value - 1) if value > 0 else float("inf")  # the best's margin over it, as `margin`
        if s is None or ahead > max(spread, s):
            break
        also.append((label, value, ahead, s))
    return Verdict(b, bv, r, rv, margin, spread, tied, tuple(also))


def growth_per_item(curve, skip: int = 1) -> tuple[float, float]:
    """(MiB per item, twice its standard error): the slope of a line fitted to a memory `curve` (curve[i]: growth
    after item i + 1) after the first `skip` items. Notebook 11."""
    y = np.asarray(curve[skip:], dtype=float)
    x = np.arange(skip + 1, skip + 1 + len(y), dtype=float)
    if len(y) < 3:
        raise ValueError(f"growth_per_item: {len(y)} points after the first {skip}; a fit with its error needs 3")
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (slope * x + intercept)
    se = float(np.sqrt(residuals @ residuals / (len(y) - 2) / ((x - x.mean()) @ (x - x.mean()))))
    return float(slope), 2 * se


def grows(slope: float, error: float, whole_mib: float) -> bool:
    """Whether `growth_per_item`'s slope less its error is above 10% of `whole_mib` (a whole decoded clip): wide,
    because allocator steps are not independent."""
    return slope - error > 0.10 * whole_mib


def growth_words(slope: float, error: float, whole_mib: float) -> str:
    """What `growth_per_item`'s slope says: each reader's share of `whole_mib` where it `grows`, else no growth."""
    if grows(slope, error, whole_mib):
        return f"each reader holds about {slope / whole_mib:.0%} of the whole clip decoded ({whole_mib:.0f} MiB)"
    return f"no growth per reader beyond allocator steps ({slope:+.1f} ± {error:.1f} MiB; clip {whole_mib:.0f} MiB)"
