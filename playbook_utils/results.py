"""What a notebook hands back: headline numbers, skipped sections, data (used by every notebook).

The runner's summary and the tests read `OUTPUT_DIR/<stem>.json`, never the notebook's printed text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


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
        self.data: dict = {}

    def skip(self, section: str, reason: str) -> None:
        """Record and print, in one visible line, a section that cannot run here."""
        line = f"{section}: {reason}"
        self.skipped.append(line)
        print(f"SKIPPED  {line}")

    def write(self) -> Path:
        """Write the JSON file and return its path."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        path = self.output_dir / f"{self.stem}.json"
        doc = {"notebook": self.stem, "headline": self.headline, "skipped": self.skipped, **self.data}
        path.write_text(json.dumps(_jsonable(doc), indent=1))
        return path
