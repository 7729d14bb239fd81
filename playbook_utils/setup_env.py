"""Set up this Python environment for the playbook: `python -m playbook_utils.setup_env`.

Standard library only, so it runs before anything is installed. It
  * never installs, reinstalls or upgrades torch when torch is already importable
    (the NGC container's build stays; only a machine with no torch at all gets $TORCH_SPEC);
  * picks the TorchCodec release that matches the installed torch, and the DALI wheel that
    matches torch's CUDA major (no CUDA: cuda120);
  * installs FFmpeg's shared libraries with apt-get when they are missing and we are root,
    otherwise prints the exact command;
  * installs the project itself in editable mode;
  * prints nothing when there is nothing left to do.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TORCH = "torch==2.13.0"


def _requirement(spec: str):
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip always carries a copy
        from pip._vendor.packaging.requirements import Requirement
    return Requirement(spec)


def satisfied(spec: str) -> bool:
    """True when a distribution satisfying the requirement `spec` is installed."""
    req = _requirement(spec)
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        return False
    return not req.specifier or req.specifier.contains(version, prereleases=True)


def torch_build() -> tuple[str, str | None] | None:
    """(version, CUDA version or None) of the importable torch, or None when there is none."""
    code = "import torch; print(torch.__version__.split('+')[0]); print(torch.version.cuda or '')"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    version, cuda = (run.stdout.strip().splitlines() + [""])[:2]
    return version, (cuda or None)


def torchcodec_spec(torch_version: str, cuda: str | None) -> tuple[str | None, str]:
    """The TorchCodec requirement for this torch, and why.

    PyPI's TorchCodec 0.N is built for torch 2.N up to 0.15 (a CPU build); from 0.16 on it is
    built against CUDA torch >= 2.11 through torch's stable ABI, and fails to load on CPU torch.
    """
    major, minor = (int(x) for x in torch_version.split(".")[:2])
    if major != 2:
        return None, f"no known TorchCodec release for torch {torch_version}"
    if cuda is None:
        if minor <= 15:
            return f"torchcodec=={0}.{minor}.*", f"CPU torch 2.{minor} pairs with torchcodec 0.{minor}"
        return None, (f"PyPI has no TorchCodec built for CPU torch 2.{minor} "
                      "(0.16 and later need a CUDA build of torch)")
    if minor >= 11:
        return "torchcodec>=0.16", f"CUDA torch 2.{minor} uses the stable-ABI TorchCodec 0.16+"
    return f"torchcodec=={0}.{minor}.*", f"torch 2.{minor} pairs with torchcodec 0.{minor}"


def dali_spec(cuda: str | None) -> str:
    """nvidia-dali-cuda130 for CUDA 13 torch, else nvidia-dali-cuda120 (also on CPU-only machines)."""
    return "nvidia-dali-cuda130" if cuda and cuda.split(".")[0] == "13" else "nvidia-dali-cuda120"


def ffmpeg_libraries_present() -> bool:
    for soname in [f"libavcodec.so.{n}" for n in range(62, 57, -1)]:
        try:
            ctypes.CDLL(soname)
            return True
        except OSError:
            continue
    return False


def _extras() -> tuple[dict[str, list[str]], list[str]]:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pip carries tomli
        from pip._vendor import tomli as tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return meta["optional-dependencies"], meta["dependencies"]


def _pip(args: list[str], check: bool = True) -> bool:
    cmd = [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check", *args]
    print("setup: pip install", " ".join(args), flush=True)
    ok = subprocess.run(cmd).returncode == 0
    if check and not ok:
        sys.exit(f"setup: pip failed: {' '.join(args)}")
    return ok


def _project_installed() -> bool:
    run = subprocess.run([sys.executable, "-c", "import playbook_utils; print(playbook_utils.__file__)"],
                         capture_output=True, text=True, cwd="/")
    return run.returncode == 0 and Path(run.stdout.strip()).resolve().parent == ROOT / "playbook_utils"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-decoders", action="store_true", help="skip the optional decoder libraries")
    args = ap.parse_args(argv)

    extras, core = _extras()
    build = torch_build()
    if build is None:
        _pip([os.environ.get("TORCH_SPEC", DEFAULT_TORCH)])
        build = torch_build()
        if build is None:
            sys.exit("setup: torch was installed but does not import")
    torch_version, cuda = build

    if not ffmpeg_libraries_present():
        cmd = ["apt-get", "install", "-y", "-q", "ffmpeg"]
        if os.geteuid() == 0 and shutil.which("apt-get"):
            print("setup: FFmpeg's shared libraries are missing (TorchCodec needs them); installing ffmpeg", flush=True)
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)
        else:
            print("setup: FFmpeg's shared libraries are missing; TorchCodec needs them. Run:\n"
                  "  sudo apt-get install -y ffmpeg    (Debian/Ubuntu)", flush=True)

    required = [s for s in core + extras["pyav"] + extras["test"] if not satisfied(s)]
    if required:
        _pip(required)

    if not args.no_decoders:
        tc, why = torchcodec_spec(torch_version, cuda)
        optional = [*extras["decord"], *extras["pynvvideocodec"], *extras["spdl"], dali_spec(cuda)]
        if tc is None:
            print(f"setup: skipping TorchCodec: {why}", flush=True)
        else:
            optional.append(tc)
        for spec in optional:
            if not satisfied(spec) and not _pip([spec], check=False):
                print(f"setup: could not install {spec}; the notebooks will report it as unavailable", flush=True)

    if not _project_installed():
        _pip(["--no-deps", "--no-build-isolation", "-e", str(ROOT)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
