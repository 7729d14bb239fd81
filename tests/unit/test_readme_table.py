"""The README's table of what the reference machine measured, written by hand: each figure in it is one the
reference it quotes recorded (`results.quoted_reference`: its summary.json and the JSON of the notebooks a row
cites), each row cites that reference's executed copy and date."""

import json
import re
from pathlib import Path

from playbook_utils.tools import results

ROOT = Path(__file__).resolve().parents[2]
_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_CITE = re.compile(r"\[(\d\d)\]\(([^)]+)\), (\d{4}-\d\d-\d\d)")
_CLIP = re.compile(
    r"\b(?:\d+p|GOP[ -]\d+|resized to \d+|\d+ (?:threads|workers|frames a video|s GOP-\d+)|16 (?:sampled|exact) frames)"
)


def _recorded(value, out: set) -> set:
    """Every number in a summary, as it stands, as a percentage of a fraction and in ms of seconds."""
    if isinstance(value, dict):
        for k, v in value.items():
            _recorded(k, out), _recorded(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _recorded(v, out)
    elif isinstance(value, str):
        out.update(float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", value))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.update((value, 100 * value, 1000 * value))
    return out


def recorded(*records) -> set:
    """Every number `records` (loaded JSON documents) hold, in the forms `_recorded` gives."""
    return _recorded(records, set())


def unrecorded(row: str, known: set) -> list[str]:
    """The figures of a table row's measured cell that no number of `known` (`recorded`'s) gives at the precision
    written (a clip's size and GOP, a loader's threads, a citation are no figures)."""
    cell = _CLIP.sub("", _CITE.sub("", row.split("|")[2]))
    missing = []
    for f in _FIGURE.findall(cell):
        digits = len(f.split(".")[1]) if "." in f else 0
        if not any(round(v, digits) == float(f.replace(",", "")) for v in known):
            missing.append(f)
    return missing


def _table() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## What the reference machine measured")[1].split("\n## ")[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_every_figure_of_the_readme_table_is_one_the_quoted_reference_recorded():
    ref = results.quoted_reference()
    summary = json.loads((ref / "summary.json").read_text())
    header, _, *rows = _table()
    assert header.split("|")[1].strip() == summary["machine"]["gpu"]
    dates = {r["notebook"][:2]: (r["notebook"], r["machine"]["date_utc"][:10]) for r in summary["notebooks"]}
    assert len(rows) >= 8
    known = {"summary": recorded(summary)}  # each JSON read and walked once, however many rows cite it
    for row in rows:
        cited = _CITE.findall(row)
        assert cited, row
        for number, link, date in cited:
            assert (ROOT / link).resolve() == (ref / dates[number][0]).resolve() and date == dates[number][1], row
        for n, _, _ in cited:
            if n not in known:
                known[n] = recorded(json.loads((ref / f"{Path(dates[n][0]).stem}.json").read_text()))
        assert unrecorded(row, known["summary"].union(*(known[n] for n, _, _ in cited))) == [], row
        assert len(re.sub(r"\]\([^)]*\)", "]", row).split()) <= 60, row


def test_a_figure_the_reference_does_not_hold_is_named():
    summary = {"best_loader": {"h264": {"fps": 4083, "fraction_of_ceiling": 0.958, "spread_pct": 9.7}},
               "sparse": {"seconds": 0.24808}}  # fmt: skip
    row = "| loader | H.264 1080p GOP 30, 64 threads: 4,083 frames/s ± 9.7% (96%), 248 ms ([21](x.ipynb), 2026-12-06) |"
    assert unrecorded(row, recorded(summary)) == []
    assert unrecorded(row.replace("4,083", "4,038").replace("9.7%", "9.8%"), recorded(summary)) == ["4,038", "9.8"]


def test_the_answer_above_the_table_quotes_only_figures_the_table_holds():
    text = (ROOT / "README.md").read_text()
    answer = text.split("<!-- answer -->")[1].split("<!-- /answer -->")[0]
    table = "\n".join(_table())
    figures = re.findall(r"\b\d[\d,]*\.?\d*\b", re.sub(r"`[^`]*`|\([^)]*\.(?:ipynb|md|py)[^)]*\)", "", answer))
    assert figures and [f for f in figures if f not in table and len(f) > 1] == []


def test_the_readmes_count_of_current_notebooks_is_the_audits_of_the_reference_it_links():
    from playbook_utils.tools import reference_audit

    text = (ROOT / "README.md").read_text()
    folder, done, total = re.search(r"\[(results/\w+)/\]\([^)]*\), (\d+) of (\d+) notebooks current", text).groups()
    rows = reference_audit.audit(ROOT / folder)
    assert (int(done), int(total)) == (sum(a["current"] for a in rows), len(rows))
