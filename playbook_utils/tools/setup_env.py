"""Set up this Python environment for the playbook: `python -m playbook_utils.tools.setup_env` (`make setup`).

Standard library only. Installs what is missing within the baseline's constraints file (--constraints FILE,
--no-constraints), never replaces an importable torch, picks the TorchCodec and DALI that match it, installs or
prints the apt-get command for missing FFmpeg libraries, and installs the project in editable mode.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINES = {"cpu": ROOT / "results" / "cpu-2core"}  # "gpu": this machine's reference, or the newest (`baseline`)
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def machine_slug(gpu_name: str | None) -> str | None:
    """The folder name of a GPU's reference, from its name as `nvidia-smi` and NVML give it: 'NVIDIA H100 80GB
    HBM3' -> 'h100', 'NVIDIA H200' -> 'h200'; None for no GPU."""
    words = [w for w in re.split(r"[\s-]+", (gpu_name or "").strip()) if w and w.upper() not in ("NVIDIA", "TESLA")]
    return words[0].lower() if words and gpu_name.lower() not in ("none", "no gpu") else None


def gpu_reference(run=subprocess.run) -> Path:
    """This GPU machine's reference folder (results/h100 on an H100, from `nvidia-smi`'s name) where it holds the
    versions its results were measured with, else the H200 reference's; read without importing the package (it
    may not be installed yet)."""
    try:
        name = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout
    except OSError:
        name = ""
    slug = machine_slug(name.splitlines()[0] if name.strip() else None)
    own = ROOT / "results" / slug if slug else None
    return own if own is not None and (own / "constraints.txt").exists() else ROOT / "results" / "h200"


DALI_DISTRIBUTIONS = ("nvidia-dali-cuda130", "nvidia-dali-cuda120")  # DALI's, one per CUDA major

# import name (as environment stamps write it) -> distribution name; DALI's depends on the CUDA major
DISTRIBUTIONS = {
    "torch": "torch",
    "av": "av",
    "decord": "decord",
    "torchcodec": "torchcodec",
    "PyNvVideoCodec": "pynvvideocodec",
    "nvidia.dali": None,
}


def _requirement(spec: str):
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip always carries a copy
        from pip._vendor.packaging.requirements import Requirement
    return Requirement(spec)


def _version(distribution: str) -> str | None:
    try:
        return md.version(distribution)
    except md.PackageNotFoundError:
        return None


def satisfied(spec: str) -> bool:
    """True when a distribution satisfying the requirement `spec` is installed."""
    req = _requirement(spec)
    version = _version(req.name)
    return version is not None and (not req.specifier or req.specifier.contains(version, prereleases=True))


def reachable(url: str, timeout: float = 3.0) -> bool:
    """True when a TCP connection to `url`'s host and port opens within `timeout` seconds (a machine without
    internet access, or one that reaches only a mirror, would otherwise spend minutes in pip's retries)."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout=timeout):
            return True
    except OSError:
        return False


def torch_build() -> tuple[str, str | None] | None:
    """(version, CUDA version or None) of the importable torch, or None when there is none."""
    code = "import torch; print(torch.__version__.split('+')[0]); print(torch.version.cuda or '')"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    version, cuda = (run.stdout.strip().splitlines() + [""])[:2]
    return version, (cuda or None)


def torchcodec_spec(torch_version: str, cuda: str | None) -> tuple[str | None, str]:
    """The TorchCodec requirement for this torch, and why. PyPI's TorchCodec 0.N is built for torch 2.N up to 0.15
    (a CPU build); 0.16 on, for CUDA torch >= 2.11 through torch's stable ABI, and fails to load on CPU torch."""
    major, minor = (int(x) for x in torch_version.split(".")[:2])
    if major != 2:
        return None, f"no known TorchCodec release for torch {torch_version}"
    if cuda is None:
        if minor <= 15:
            return f"torchcodec==0.{minor}.*", f"CPU torch 2.{minor} pairs with torchcodec 0.{minor}"
        return None, (
            f"PyPI has no TorchCodec built for CPU torch 2.{minor} (0.16 and later need a CUDA build of torch)"
        )
    if minor >= 11:
        return "torchcodec>=0.16", f"CUDA torch 2.{minor} uses the stable-ABI TorchCodec 0.16+"
    return f"torchcodec==0.{minor}.*", f"torch 2.{minor} pairs with torchcodec 0.{minor}"


def dali_spec(cuda: str | None) -> str:
    """nvidia-dali-cuda130 for CUDA 13 torch, else nvidia-dali-cuda120 (also on CPU-only machines)."""
    return "nvidia-dali-cuda130" if cuda and cuda.split(".")[0] == "13" else "nvidia-dali-cuda120"


def nvidia_driver_present(load=ctypes.CDLL, which=shutil.which) -> bool:
    """True when this machine has an NVIDIA driver: its libcuda.so.1 loads, or nvidia-smi is on the PATH."""
    try:
        load("libcuda.so.1")
        return True
    except OSError:
        return which("nvidia-smi") is not None


def _name(requirement_name: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement_name).lower()


def constraint_lines(versions: dict) -> list[str]:
    """Constraint lines ('av==19.0.2') for library versions keyed by import name, as environment stamps write them;
    build labels (+cu130) are dropped, and DALI is named by torch's CUDA major, or where torch's version has no label
    (PyPI's CUDA build), by the DALI distribution of that version installed here."""
    flat = {k: (v.get("version") if isinstance(v, dict) else v) for k, v in versions.items()}
    label = (flat.get("torch") or "").partition("+")[2]
    cuda = f"{label[2:-1]}.{label[-1]}" if re.fullmatch(r"cu\d{3,}", label) else None
    dali = dali_spec(cuda)
    if not label:  # PyPI's CUDA build of torch: the DALI of that version installed here, where there is one
        dali = next((d for d in DALI_DISTRIBUTIONS if _version(d) == flat.get("nvidia.dali")), dali)
    lines = []
    for module, version in flat.items():
        if module in DISTRIBUTIONS and version and version != "unknown":
            lines.append(f"{DISTRIBUTIONS[module] or dali}=={version.split('+')[0]}")
    return lines


def installed_versions() -> dict:
    """{import name: version} of torch and the decoder libraries installed here, read from their distribution
    metadata (nothing is imported); the runner stamps summary.json with it."""
    out = {}
    for module, dist in DISTRIBUTIONS.items():
        found = [v for name in ([dist] if dist else DALI_DISTRIBUTIONS) if (v := _version(name))]
        if found:
            out[module] = found[0]
    return out


def stamped_versions(folder) -> tuple[dict, Path] | None:
    """(library versions, the file they came from) from a results folder's environment stamp: notebook 00's
    JSON, else any JSON there whose 'environment' or 'stamp' names libraries; None when there is none."""
    folder = Path(folder)
    for path in [
        folder / "00_hardware_and_environment.json",
        *sorted(folder.glob("*.json")),
        *sorted(folder.glob("*/bench.json")),
    ]:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for holder in (
            (doc.get("environment"), doc.get("stamp"), doc.get("machine"), doc) if isinstance(doc, dict) else ()
        ):
            if isinstance(holder, dict) and isinstance(holder.get("libraries"), dict) and holder["libraries"]:
                return holder["libraries"], path
    return None


def write_constraints(folder, versions: dict, source: str) -> Path:
    """Write `folder`/constraints.txt for `versions` (import name -> version), saying where they came from."""
    path = Path(folder) / "constraints.txt"
    path.write_text(
        f"# The library versions of this run ({source}).\n"
        "# `make setup` installs within them: python -m playbook_utils.tools.setup_env --help\n"
        + "".join(line + "\n" for line in constraint_lines(versions))
    )
    return path


def read_constraints(path) -> dict:
    """{distribution name: constraint line} from a constraints file (comments and blank lines skipped)."""
    lines = [line.split("#")[0].strip() for line in Path(path).read_text().splitlines()]
    return {_name(_requirement(line).name): line for line in lines if line}


def conflicts(spec: str, constraints: dict) -> str | None:
    """The constraint line that `spec` cannot be installed within (its version outside spec's range), or None."""
    try:
        req = _requirement(spec)
    except Exception:  # a path or URL (the project itself): nothing to hold it to
        return None
    line = constraints.get(_name(req.name))
    if not line or not req.specifier:
        return None
    pinned = [s.version for s in _requirement(line).specifier if s.operator in ("==", "===")]
    return line if pinned and not req.specifier.contains(pinned[0], prereleases=True) else None


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


class Installer:
    """pip install within a constraints file ({name: line}, or None): a spec they cannot hold (a TorchCodec matched
    to this torch) is installed outside them, and a line says so; a failure shows pip's last error lines."""

    def __init__(self, constraints: dict | None):
        self.constraints = constraints

    def __call__(self, specs: list[str], check: bool = True, options: tuple = ()) -> bool:
        cmd = [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check", *options, *specs]
        keep = dict(self.constraints or {})
        for spec in specs:
            line = conflicts(spec, keep)
            if line:
                print(
                    f"setup: {spec} is installed outside the baseline's {line} (it must match this machine)", flush=True
                )
                keep.pop(_name(_requirement(spec).name))
        print("setup: pip install", " ".join([*options, *specs]), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            if keep:
                (Path(tmp) / "constraints.txt").write_text("\n".join(keep.values()) + "\n")
                cmd[4:4] = ["-c", str(Path(tmp) / "constraints.txt")]
            run = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        if run.returncode == 0:
            return True
        errors = [line for line in run.stderr.splitlines() if line.strip()]
        cause = "\n  ".join(errors[-6:]) or f"pip exited with status {run.returncode}"
        message = f"setup: pip could not install {' '.join(specs)}:\n  {cause}"
        if check:
            sys.exit(message)
        print(message, flush=True)
        return False


def install_ffmpeg(apt: bool) -> None:
    """FFmpeg's shared libraries (TorchCodec loads them): with apt-get, its command and output shown and its
    exit status checked, when `apt` and we are root with apt-get; otherwise the command is printed."""
    cmd = ["apt-get", "install", "-y", "-q", "ffmpeg"]
    if apt and os.geteuid() == 0 and shutil.which("apt-get"):
        print(
            "setup: FFmpeg's shared libraries are missing (TorchCodec needs them); running, as root:\n"
            "  apt-get update -q && " + " ".join(cmd),
            flush=True,
        )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for step in (["apt-get", "update", "-q"], cmd):
            code = subprocess.run(step, env=env).returncode
            if code != 0:
                print(
                    f"setup: `{' '.join(step)}` failed (exit {code}); TorchCodec will report itself unavailable "
                    "until FFmpeg's libraries are installed",
                    flush=True,
                )
                return
    else:
        print(
            "setup: FFmpeg's shared libraries are missing; TorchCodec needs them. Run:\n"
            "  sudo apt-get install -y ffmpeg    (Debian/Ubuntu)",
            flush=True,
        )


def install_lean(install: Installer, spec: str) -> list[str] | None:
    """Install `spec` (DALI on a CPU-only machine) without the NVIDIA libraries it depends on, its other dependencies
    as usual; return the left-out requirement names, or None when pip failed (it said why)."""
    if not install([spec], check=False, options=("--no-deps",)):
        return None
    dist = _requirement(spec).name
    left, others = [], []
    for line in md.requires(dist) or []:
        req = _requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if _name(req.name).startswith("nvidia-"):
            left.append(req.name)
        else:
            others.append(line)
    missing = [r for r in others if not satisfied(r)]
    if missing:
        install(missing, check=False)
    return left


def _project_installed() -> bool:
    run = subprocess.run(
        [sys.executable, "-c", "import playbook_utils; print(playbook_utils.__file__)"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    return run.returncode == 0 and Path(run.stdout.strip()).resolve().parent == ROOT / "playbook_utils"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Environment: TORCH_SPEC, the torch requirement to install where none is "
        "importable (e.g. torch==2.13.0); TORCH_INDEX_URL, where from (default: "
        f"{CPU_TORCH_INDEX} on a CPU-only machine, PyPI otherwise).",
    )
    ap.add_argument(
        "--no-decoders",
        action="store_true",
        help="skip the optional decoder libraries (decord, SPDL, TorchCodec, PyNvVideoCodec, DALI)",
    )
    ap.add_argument(
        "--constraints",
        default=None,
        metavar="FILE",
        help="install within this constraints file (default: the current baseline's: this GPU's reference's, "
        "e.g. results/h100/constraints.txt, on a GPU machine, results/cpu-2core/constraints.txt on a CPU-only one)",
    )
    ap.add_argument(
        "--no-constraints", action="store_true", help="install the newest releases instead of the baseline's versions"
    )
    ap.add_argument(
        "--gpu-libraries",
        choices=["auto", "yes", "no"],
        default="auto",
        help="yes: install the libraries that need an NVIDIA driver (PyNvVideoCodec, DALI's GPU codecs); "
        "no: leave them out; auto: yes where there is a driver or torch is a CUDA build "
        "(default: auto)",
    )
    ap.add_argument(
        "--decord",
        choices=["decord", "decord2"],
        default=os.environ.get("DECORD") or "decord",
        help="which build of the decord module to install: decord 0.6 (PyPI's, 2021) or decord2, the maintained fork; "
        "the other goes into <venv>/decord-alt/ for notebook 11's side-by-side (default: $DECORD, else decord)",
    )
    ap.add_argument(
        "--no-apt",
        action="store_true",
        help="never run apt-get, even as root: print the command that installs FFmpeg instead",
    )
    ap.add_argument(
        "--write-constraints",
        metavar="RESULTS_DIR",
        default=None,
        help="only write RESULTS_DIR/constraints.txt from the environment stamp of the run there "
        "(notebook 00's JSON or a summary.json), then exit",
    )
    args = ap.parse_args(argv)

    if args.write_constraints:
        found = stamped_versions(args.write_constraints)
        if found is None:
            sys.exit(f"setup: {args.write_constraints}: no JSON with an environment stamp naming library versions")
        versions, source = found
        print(f"setup: wrote {write_constraints(args.write_constraints, versions, f'stamped in {source.name}')}")
        return 0

    extras, core = _extras()
    build = torch_build()
    driver = nvidia_driver_present()
    gpu = {"yes": True, "no": False}.get(args.gpu_libraries, driver or bool(build and build[1]))
    no_gpu = "--gpu-libraries no" if args.gpu_libraries == "no" else "no NVIDIA driver here"
    path = None
    if not args.no_constraints:
        path = Path(args.constraints or (gpu_reference() if gpu else BASELINES["cpu"]) / "constraints.txt")
    constraints = read_constraints(path) if path and path.exists() else None
    install = Installer(constraints)
    if constraints is not None:
        plan = (
            f"installing within {shown(path)} (the versions its results were measured with; "
            "--no-constraints for the newest)"
        )
    elif path is not None:
        plan = f"no constraints file at {shown(path)}: installing the newest releases"
    else:
        plan = "--no-constraints: installing the newest releases"
    untold = [plan]

    def say_constraints():  # once, before the first install
        while untold:
            print(f"setup: {untold.pop()}", flush=True)

    if build is None:
        say_constraints()
        spec = os.environ.get("TORCH_SPEC") or (constraints or {}).get("torch") or "torch"
        index = os.environ.get("TORCH_INDEX_URL") or (None if gpu else CPU_TORCH_INDEX)
        if index and not os.environ.get("TORCH_INDEX_URL") and not reachable(index):
            print(
                f"setup: {index} cannot be reached from here; taking torch from the configured package index",
                flush=True,
            )
            index = None
        where = f" from {index}" if index else ""
        why = "" if gpu else f" ({no_gpu}: the CPU-only build)"
        print(f"setup: no torch here; installing {spec}{where}{why}", flush=True)
        install([spec], options=("--index-url", index) if index else ())
        build = torch_build()
        if build is None:
            sys.exit(f"setup: {spec} was installed but torch does not import; run python -c 'import torch' to see why")
    torch_version, cuda = build

    if not ffmpeg_libraries_present():
        install_ffmpeg(apt=not args.no_apt)

    required = [s for s in core + extras["pyav"] + extras["test"] if not satisfied(s)]
    if required:
        say_constraints()
        install(required)

    if not args.no_decoders:
        tc, why = torchcodec_spec(torch_version, cuda)
        dali = dali_spec(cuda)
        other = "decord2" if args.decord == "decord" else "decord"
        if not satisfied(extras[args.decord][0]) and satisfied(other):  # one `decord` module per environment
            subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", other], check=False)
        optional = [*extras[args.decord], *extras["spdl"], *(extras["gpu"] if gpu else []), *([tc] if tc else [])]
        pending = [spec for spec in optional if not satisfied(spec)]
        dali_pending = not satisfied(dali)
        if pending or dali_pending:
            say_constraints()
            if tc is None:
                print(f"setup: left out TorchCodec: {why}", flush=True)
            if not gpu:
                no_driver = "this machine has no NVIDIA driver (no libcuda.so.1, no nvidia-smi)"
                reason = no_gpu if args.gpu_libraries == "no" else no_driver
                print(f"setup: left out PyNvVideoCodec: it decodes on NVIDIA GPUs only, and {reason}", flush=True)
        for spec in pending:
            if not install([spec], check=False):
                print(f"setup: {spec} is not installed; the notebooks will report it as unavailable", flush=True)
        if dali_pending:
            if gpu:
                left = [] if install([dali], check=False) else None
            else:
                left = install_lean(install, dali)
            if left is None:
                print(f"setup: {dali} is not installed; the notebooks will report DALI as unavailable", flush=True)
            elif not gpu:
                print(
                    f"setup: DALI ({dali}) installed for its CPU video decoder, which reads VP8, VP9 and MJPEG only "
                    "(the notebooks use it on the CPU)"
                    + (f"; left out its GPU libraries {', '.join(left)}: {no_gpu}" if left else ""),
                    flush=True,
                )
        install_alternative(extras[other][0])

    if not _project_installed():
        install([str(ROOT)], options=("--no-deps", "--no-build-isolation", "-e"))
    return 0


def install_alternative(spec: str) -> Path | None:
    """Install the decord build `spec` into <venv>/decord-alt/<name> (pip --target) for notebook 11's child processes
    (`decoders.decord.alternative`), once; returns the folder, or None where pip could not (it says why)."""
    name = _requirement(spec).name
    target = Path(sys.prefix) / "decord-alt" / name
    if any(target.glob(f"{name.replace('-', '_')}-*.dist-info")):
        return target
    cmd = [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check", "--no-deps", "--target"]
    print(f"setup: {spec} into {target} (notebook 11 sets it beside the decord installed here)", flush=True)
    run = subprocess.run([*cmd, str(target), spec], stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        print(f"setup: {spec} not installed beside: {run.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return target


def shown(path) -> str:
    """A path as messages show it: relative to the repository when inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


if __name__ == "__main__":
    sys.exit(main())
