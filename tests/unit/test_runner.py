import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from playbook_utils import run_notebooks

pytestmark = pytest.mark.notebook


def _write_nb(path, body, requires=()):
    params = new_code_cell('SMOKE = True\nDEVICE = "auto"\nVIDEO_DIR = None\nOUTPUT_DIR = "."')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["playbook"] = {"requires": list(requires)}
    nbformat.write(nb, path)


GOOD = """import json, pathlib
pathlib.Path(OUTPUT_DIR, "90_good.json").write_text(json.dumps(
    {"headline": {"smoke": SMOKE, "answer": 42}, "skipped": ["gpu part: no GPU"]}))"""


def test_runner_runs_every_notebook_and_reports_failures(tmp_path):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD, requires=["cuda"])
    _write_nb(nbs / "91_broken.ipynb", "raise RuntimeError('planted failure')")
    _write_nb(nbs / "92_silent.ipynb", "x = 1")  # runs, but writes no results
    code = run_notebooks.main(["--notebooks", str(nbs), "--output", str(out)])
    assert code == 1
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["notebook"]: r for r in summary["notebooks"]}
    assert list(rows) == ["90_good.ipynb", "91_broken.ipynb", "92_silent.ipynb"]
    assert rows["90_good.ipynb"]["status"] == "passed"
    assert rows["90_good.ipynb"]["headline"] == {"smoke": True, "answer": 42}
    assert rows["90_good.ipynb"]["requires"] == ["cuda"]
    assert rows["91_broken.ipynb"]["status"] == "failed"
    assert "planted failure" in rows["91_broken.ipynb"]["error"]
    assert rows["92_silent.ipynb"]["status"] == "failed" and "without writing" in rows["92_silent.ipynb"]["error"]
    md = (out / "summary.md").read_text()
    assert "1 passed, 2 failed" in md and "answer: 42" in md and "gpu part: no GPU" in md
    assert (out / "90_good.ipynb").exists()


def test_runner_selects_by_pattern_and_passes_mode(tmp_path):
    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_good.ipynb", GOOD)
    _write_nb(nbs / "91_broken.ipynb", "raise RuntimeError('must not run')")
    assert [p.name for p in run_notebooks.select(nbs, ["90*"])] == ["90_good.ipynb"]
    assert [p.name for p in run_notebooks.select(nbs, ["broken"])] == ["91_broken.ipynb"]
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--mode", "full", "--pattern", "90"]) == 0
    assert json.loads((out / "90_good.json").read_text())["headline"]["smoke"] is False
    assert run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--pattern", "nothing"]) == 2


def test_a_cell_that_hangs_fails_its_notebook_and_the_run_goes_on(tmp_path):
    # 21 once hung for 20 minutes on a GPU machine: with a per-cell time limit the run records a failure and goes on
    import time

    nbs, out = tmp_path / "nbs", tmp_path / "out"
    nbs.mkdir()
    _write_nb(nbs / "90_hangs.ipynb", "import time\ntime.sleep(600)")
    _write_nb(nbs / "91_good.ipynb", GOOD.replace("90_good", "91_good"))
    start = time.perf_counter()
    code = run_notebooks.main(["--notebooks", str(nbs), "--output", str(out), "--timeout", "3"])
    assert code == 1 and time.perf_counter() - start < 120
    rows = {r["notebook"]: r for r in json.loads((out / "summary.json").read_text())["notebooks"]}
    assert rows["90_hangs.ipynb"]["status"] == "failed" and "3 seconds" in rows["90_hangs.ipynb"]["error"]
    assert rows["91_good.ipynb"]["status"] == "passed"
