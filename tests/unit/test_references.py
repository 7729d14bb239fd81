"""One reference per machine kind, named for it (`tools.results`): results/h100 for an H100, results/h200 for an
H200, and the README's table from the newest complete one (while none is, the fullest)."""

import json

from playbook_utils.tools import results, setup_env


def test_a_reference_folder_is_named_for_the_gpu_nvidia_smi_names():
    assert results.machine_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert results.machine_slug("NVIDIA H200") == "h200"
    assert results.machine_slug("Tesla V100-SXM2-16GB") == "v100"
    assert results.machine_slug(None) is None and results.machine_slug("no GPU") is None
    assert results.machine_reference("NVIDIA H100 80GB HBM3") == results.RESULTS / "h100"


def _ref(folder, gpu, date, notebooks):
    folder.mkdir(parents=True)
    rows = [{"notebook": n, "status": "passed"} for n in notebooks]
    (folder / "summary.json").write_text(json.dumps({"machine": {"gpu": gpu, "date_utc": date}, "notebooks": rows}))


def test_the_newest_complete_gpu_reference_is_the_one_quoted(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for n in ("00_a.ipynb", "20_b.ipynb"):
        (tmp_path / "notebooks" / n).write_text("{}")
    res = tmp_path / "results"
    _ref(res / "h200", "NVIDIA H200", "2026-12-05 03:40", ["00_a.ipynb", "20_b.ipynb"])
    _ref(res / "h100", "NVIDIA H100 80GB HBM3", "2026-12-07 01:00", ["20_b.ipynb"])  # a first part only
    _ref(res / "cpu-2core", "no GPU", "2026-12-08 00:00", ["00_a.ipynb", "20_b.ipynb"])
    assert results.newest_gpu_reference(res) == res / "h100"
    assert results.newest_gpu_reference(res, "00_a.ipynb") == res / "h200"
    assert results.quoted_reference(res) == res / "h200"  # the complete one, though older


def test_while_no_reference_is_complete_the_fullest_is_quoted(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for n in ("00_a.ipynb", "20_b.ipynb", "21_c.ipynb"):
        (tmp_path / "notebooks" / n).write_text("{}")
    res = tmp_path / "results"
    _ref(res / "h200", "NVIDIA H200", "2026-12-05 03:40", ["00_a.ipynb", "20_b.ipynb"])
    _ref(res / "h100", "NVIDIA H100 80GB HBM3", "2026-12-07 01:00", ["21_c.ipynb"])
    assert results.quoted_reference(res) == res / "h200"
    _ref(res / "a100", "NVIDIA A100", "2026-12-08 01:00", ["00_a.ipynb", "21_c.ipynb"])  # as full, newer
    assert results.quoted_reference(res) == res / "a100"


def test_setup_takes_the_versions_of_this_gpus_reference_where_it_has_them(tmp_path, monkeypatch):
    class Smi:
        stdout = "NVIDIA H100 80GB HBM3\n"

    monkeypatch.setattr(setup_env, "ROOT", tmp_path)
    assert setup_env.gpu_reference(lambda *a, **k: Smi()) == tmp_path / "results" / "h200"  # none of its own yet
    (tmp_path / "results" / "h100").mkdir(parents=True)
    (tmp_path / "results" / "h100" / "constraints.txt").write_text("torch==2.11.0\n")
    assert setup_env.gpu_reference(lambda *a, **k: Smi()) == tmp_path / "results" / "h100"
