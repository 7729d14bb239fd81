"""The code we hand over (`handover`): each module, loaded from its own file as a reader would, reads one whole epoch of
a folder like a reader's through its own `loader` (two DataLoader workers on the CPU, threads on a GPU): every
readable file once, each frame the one the ffmpeg tool shows at that index (upright, edit list applied), the files
its library gets wrong and the broken ones skipped and named; the usage notebook 22 prints runs as printed; and
every two paths agree on colour, tagged and untagged. The GPU modules run the same under the `gpu` marker, on a
folder built beforehand on a machine with the ffmpeg tool (`PLAYBOOK_READER_FOLDER`: `python -m tests.reader_folder
DIR`)."""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from playbook_utils import folders, handover, sampling
from playbook_utils.bench import media
from playbook_utils.bench.pixels import psnr
from playbook_utils.decoders import why_unavailable
from playbook_utils.errors import DecodeError
from playbook_utils.decoders.base import traits
from playbook_utils.decoders.isolated import run_requests
from tests import reader_folder

pytestmark = pytest.mark.media
K = 8

WMV = "sub/old.wmv"  # WMV 8: NVDEC decodes VC-1 (WMV 9), not it
WEBM_LIVE = "sub/browser_recording.webm"  # VP9, as a browser records it: no duration stored
NOT_NVDEC = "sub/camera_10bit_422.mp4"  # NVDEC before Blackwell decodes neither 10-bit nor 4:2:2 H.264
# (backend, device) -> the files of the folder its module must skip, beyond the broken ones
REFUSED = {
    ("pyav", "cpu"): set(),
    ("torchcodec", "cpu"): {"edit_list.mp4", "trimmed.mkv", "sub/camera.ts"},
    ("decord", "cpu"): {"edit_list.mp4", "trimmed.mkv", "sub/camera.ts", WEBM_LIVE, WMV},  # and AV1 with decord 0.6
    ("spdl", "cpu"): {"edit_list.mp4", "trimmed.mkv"},
    ("dali", "cpu"): (set(reader_folder.ENCODED) | set(reader_folder.DERIVED)) - {"sub/clip.webm", WEBM_LIVE},
    ("torchcodec", "cuda"): {"edit_list.mp4", "trimmed.mkv", "sub/camera.ts", NOT_NVDEC, WMV},
    ("pynvvideocodec", "cuda"): {
        "edit_list.mp4",
        "trimmed.mkv",
        "hevc_10bit.mp4",
        "sub/deeper/open_gop.mkv",
        "sub/clip.webm",
        WEBM_LIVE,  # as every Matroska file
        NOT_NVDEC,
        WMV,
    },
    ("dali", "cuda"): {"edit_list.mp4", "trimmed.mkv", NOT_NVDEC, WMV},
}
PATHS = [pytest.param(b, d, marks=[pytest.mark.gpu] if d == "cuda" else [], id=f"{b}-{d}") for b, d in REFUSED]

# errors of a module's own code, not a cause found in the file: what a file it did not expect used to give
STRAY = ("AttributeError", "TypeError", "KeyError", "IndexError", "StopIteration", "NameError", "UnboundLocalError")


def load(backend: str, device: str):
    """The module of `backend` on `device`, imported by its file's name from the folder it is in (`child` puts it on
    the path, as a reader's script beside it has it), so that DataLoader workers find it by that name."""
    return importlib.import_module(handover.module(backend, device))


def from_its_file(name: str):
    """The module `name` imported in this process from its file in the modules folder."""
    sys.path.insert(0, str(handover.FOLDER))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(handover.FOLDER))


def module_text_constants(path: Path):
    """The module file's top-level tuples of literals, read from its text (it need not import here)."""
    import types

    found = {}
    for n in ast.parse(path.read_text()).body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Tuple) and isinstance(n.targets[0], ast.Name):
            try:  # literals and starred tuples of literals only: no name is looked up
                found[n.targets[0].id] = eval(compile(ast.Expression(n.value), str(path), "eval"), {"__builtins__": {}})
            except NameError:
                continue
    return types.SimpleNamespace(**found)


def gpu_module_here(name: str, monkeypatch):
    """The GPU module `name` imported in this process, with a stand-in PyNvVideoCodec where none is installed."""
    import types

    if name == "pynvvideocodec_clips" and importlib.util.find_spec("PyNvVideoCodec") is None:
        monkeypatch.setitem(sys.modules, "PyNvVideoCodec", types.ModuleType("PyNvVideoCodec"))  # not installed here
        monkeypatch.setitem(sys.modules, name, None)  # imported with the stand-in, taken out afterwards
        del sys.modules[name]
    return from_its_file(name)


def available(backend: str, device: str) -> None:
    why = why_unavailable(backend, device)
    if why:
        pytest.skip(f"{backend} on {device}: {why}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """{name: path} of the reader's folder: the one named by PLAYBOOK_READER_FOLDER (built with its references on
    a machine with the ffmpeg tool), else one built here."""
    given = os.environ.get("PLAYBOOK_READER_FOLDER")
    if given:
        root = Path(given).resolve()  # the tests run modules from other folders
        return {n: root / n for n in (*reader_folder.ENCODED, *reader_folder.DERIVED, *reader_folder.NOT_VIDEO)}
    if not shutil.which("ffmpeg"):
        pytest.skip("needs the ffmpeg command-line tool to make the reader's folder")
    return reader_folder.build(tmp_path_factory.mktemp("my videos"))


def shown_at(frames, ref) -> list[int]:
    """For each frame, the index of the reference frame it is closest to."""
    return [max(range(len(ref)), key=lambda j: psnr(f, ref[j])) for f in frames]


@pytest.mark.parametrize("backend, device", list(REFUSED), ids=lambda x: x)
def test_each_module_imports_nothing_of_the_playbook(backend, device):
    tree = ast.parse(handover.path(backend, device).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names and not [n for n in names if n.startswith(("playbook_utils", "tests"))]


def test_the_parts_the_modules_share_are_the_same_text_in_each():
    # each module is self-contained, so its sampler, batching, probe and thread loader are copies: kept identical,
    # a fix in one goes to all
    parts = {}
    for name in sorted({handover.module(b, d) for b, d in REFUSED}):
        source = (handover.FOLDER / f"{name}.py").read_text()
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in (
                "uniform",
                "collate",
                "probe",
                "ThreadLoader",
                "rank_gpu",
                "video_stream",
                "shown_size",
                "check_order",
                "size_change",
                "listed",
                "sizes",
                "why",
                "this_rank",
            ):
                parts.setdefault(node.name, {})[name] = ast.get_source_segment(source, node)
    assert len(parts["uniform"]) == 6 and len(parts["probe"]) >= 4 and len(parts["ThreadLoader"]) >= 3
    assert len(parts["rank_gpu"]) == 3  # the GPU modules: torchrun's rank picks the GPU in each alike
    assert len(parts["video_stream"]) == 6  # each says alike why a file has no video to read
    assert len(parts["shown_size"]) == 6  # each shapes the picture as a player shows it alike
    assert len(parts["check_order"]) == 6  # each finds alike the B-frames an AVI remux left in decode order
    assert len(parts["size_change"]) == 3  # the GPU modules name alike a picture size that changes mid-stream
    assert len(parts["listed"]) == 6  # each refuses alike an empty list of paths
    assert len(parts["sizes"]) == 6 and len(parts["why"]) == 6  # each checks k and size, and words a failure, alike
    assert len(parts["this_rank"]) == 6  # each finds alike its rank's share, or says torchrun's group is missing
    # a folder given: each lists the files 22's scan takes for video, no fewer (one would skip a file 22 counted)
    assert all(
        module.VIDEOS == folders.VIDEO_SUFFIXES for module in map(module_text_constants, handover.FOLDER.glob("*.py"))
    )
    assert all(len(set(copies.values())) == 1 for copies in parts.values()), {k: list(v) for k, v in parts.items()}


@pytest.mark.parametrize("name", sorted({handover.module(b, d) for b, d in REFUSED}))
def test_no_paths_or_one_path_is_an_error_not_an_epoch_of_nothing_and_a_folder_gives_its_videos(
    name, tmp_path, monkeypatch
):
    # a glob for *.mp4 over a folder of .MOV files gives []: training would run with no data, in silence
    try:
        mod = from_its_file(name)
    except ImportError as e:
        pytest.skip(f"{name}: {e}")
    with pytest.raises(ValueError):
        mod.VideoClips([], k=4, size=32)
    with pytest.raises(ValueError):
        mod.VideoClips(iter(()), k=4, size=32)
    for one in ("clip.mp4", Path("clip.mp4")):  # one path, not a list: not read as a list of its characters
        with pytest.raises(ValueError):
            mod.VideoClips(one, k=4, size=32)
    on_cpu = {"device": "cpu"} if "device" in inspect.signature(mod.VideoClips).parameters else {}
    assert len(mod.VideoClips((p for p in ["a.mp4", Path("b.mp4")]), k=4, size=32, **on_cpu)) == 2
    # a folder: its video files of every kind and case, in its subfolders too, as the code 22 prints gives it
    folder = tmp_path / "videos"
    for name in ("b.MP4", "a.mov", "class1/c.mkv", "class2/c.mkv", "notes.txt", "d.webm/e.mp4", "._a.mov"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"")
    found = ["a.mov", "b.MP4", "class1/c.mkv", "class2/c.mkv", "d.webm/e.mp4"]  # a folder named .webm is not a file
    for given in (folder, str(folder)):
        assert mod.VideoClips(given, k=4, size=32, **on_cpu).paths == [str(folder / n) for n in found]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no video file in"):
        mod.VideoClips(tmp_path / "empty", k=4, size=32, **on_cpu)
    (tmp_path / "more" / "f.mp4").parent.mkdir()
    (tmp_path / "more" / "f.mp4").write_bytes(b"")
    (folder / "linked").symlink_to(tmp_path / "more")  # a linked class folder: read, once; a loop: not followed
    (folder / "linked_again").symlink_to(tmp_path / "more")
    (folder / "class1" / "up").symlink_to(folder)
    found = [*found, "linked/f.mp4"]
    assert mod.VideoClips(folder, k=4, size=32, **on_cpu).paths == [str(folder / n) for n in found]
    monkeypatch.setenv("HOME", str(tmp_path))  # "~/videos", as a reader writes it
    assert mod.VideoClips("~/videos", k=4, size=32, **on_cpu).paths == [str(folder / n) for n in found]
    listed = ["~/videos/a.mov", b"~/videos/b.MP4", Path("~/videos/class1/c.mkv")]  # a list as a reader writes it
    assert mod.VideoClips(listed, k=4, size=32, **on_cpu).paths == [str(folder / n) for n in found[:3]]
    with pytest.raises(ValueError, match=str(tmp_path / "gone")):  # named as looked for, not as "one file"
        mod.VideoClips("~/gone", k=4, size=32, **on_cpu)


@pytest.mark.parametrize("name", sorted({handover.module(b, d) for b, d in REFUSED}))
def test_a_frame_count_or_size_that_is_not_a_whole_number_of_at_least_1_is_an_error_at_once(name, tmp_path):
    # before: size=(64, 96) failed inside loader(); k=0 or size=0 gave empty frames as if read, or a skip per file
    try:
        mod = from_its_file(name)
    except ImportError as e:
        pytest.skip(f"{name}: {e}")
    on_cpu = {"device": "cpu"} if "device" in inspect.signature(mod.VideoClips).parameters else {}
    for k, size in ((0, 32), (4, 0), (4, (64, 96)), (2.5, 32), (True, 32)):
        with pytest.raises(ValueError, match="whole number"):
            mod.VideoClips(["a.mp4"], k=k, size=size, **on_cpu)
    import numpy as np

    clips = mod.VideoClips(["a.mp4"], k=np.int64(4), size=32, **on_cpu)  # a count numpy gave
    assert clips.k == 4 and type(clips.k) is int


@pytest.mark.media
def test_the_gpu_modules_thread_loader_takes_workers_0_as_one_thread(folder):
    mod = from_its_file("torchcodec_clips")  # the three GPU modules' ThreadLoader is one text (test above)
    clips = mod.VideoClips([str(folder["h264_bframes.mp4"])] * 3, k=2, size=32, device="cpu")
    batches = list(mod.ThreadLoader(clips, 2, 0, range(3)))
    assert [tuple(b[0].shape) for b in batches] == [(2, 2, 3, 32, 32), (1, 2, 3, 32, 32)]


@pytest.mark.parametrize("name", ["pyav_clips", "torchcodec_clips"])
def test_a_cpu_loader_gives_its_workers_a_share_of_the_cores_without_changing_the_readers_clips(name):
    # before: the first loader() set clips.threads, and a later loader() with other workers kept that share
    try:
        mod = from_its_file(name)
    except ImportError as e:
        pytest.skip(f"{name}: {e}")
    on_cpu = {"device": "cpu"} if "device" in inspect.signature(mod.VideoClips).parameters else {}
    clips = mod.VideoClips(["a.mp4"], k=2, size=32, **on_cpu)
    cores = len(os.sched_getaffinity(0))
    for workers in (2, 0):
        assert mod.loader(clips, workers=workers).dataset.threads == max(1, cores // max(1, workers))
        assert clips.threads is None
    clips.threads = 3  # the reader's own choice is kept
    assert mod.loader(clips, workers=2).dataset.threads == 3


@pytest.mark.parametrize("name", sorted({handover.module(b, d) for b, d in REFUSED}))
def test_under_torchrun_a_loader_made_before_the_process_group_is_an_error_not_every_file_on_every_rank(
    name, monkeypatch, tmp_path
):
    try:
        mod = from_its_file(name)
    except ImportError as e:
        pytest.skip(f"{name}: {e}")
    on_cpu = {"device": "cpu"} if "device" in inspect.signature(mod.VideoClips).parameters else {}
    clips = mod.VideoClips([tmp_path / f"{i}.mp4" for i in range(4)], k=4, size=32, **on_cpu)
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets it
    with pytest.raises(RuntimeError, match="init_process_group"):
        mod.loader(clips, batch_size=2, workers=0)
    monkeypatch.setenv("WORLD_SIZE", "1")  # one rank: all four files
    assert len(mod.loader(clips, batch_size=2, workers=0).sampler) == 4


def child(*args, timeout: float = 600):
    """This file run as a script in a child process (`main`), its JSON answer: each path in a process of its own,
    as TorchCodec and PyNvVideoCodec must not share one (their FFmpeg libraries clash)."""
    root = Path(__file__).resolve().parents[2]
    path = [str(root), str(handover.FOLDER), os.environ.get("PYTHONPATH")]  # the modules as files beside a script
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    run = subprocess.run(
        [sys.executable, __file__, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def nvdec_decodes_av1() -> bool:
    """Whether this GPU's NVDEC decodes AV1: Ampere's GA10x, Ada, Blackwell; not Turing, GA100 or Hopper (NVIDIA's
    NVDEC application note)."""
    cap = torch.cuda.get_device_capability()
    return cap >= (8, 6) and cap != (9, 0)


def options(backend: str, device: str) -> dict:
    return {"device": device} if backend in ("torchcodec", "dali") else {}


def epoch(backend: str, device: str, paths: list[str]) -> dict:
    """One epoch of the module's own loader (2 workers or threads, batches of 3) over `paths`: the files read, in
    order, the ones skipped with why, and for each file read the reference frames its frames are closest to."""
    mod, gpu = load(backend, device), device == "cuda"
    clips = mod.VideoClips(paths, k=K, size=reader_folder.SIZE, **options(backend, device))
    out = {"seen": [], "skipped": {}, "shown_at": {}, "want": {}, "low_db": {}, "shapes": set(), "devices": set()}
    batches = list(mod.loader(clips, batch_size=3, workers=2))
    broken = [p for p in paths if Path(p).name in ("notes.txt", "empty.mp4")]
    if broken:  # a batch of nothing but them: B = 0, the rest of the shape as ever
        alone = mod.VideoClips(broken, k=K, size=reader_folder.SIZE, **options(backend, device))
        threads = gpu or backend == "dali"  # DALI's loader runs threads on either device
        batches += mod.loader(alone, batch_size=2, workers=int(threads))  # one thread, or no worker process
    for frames, names, failed in batches:
        out["shapes"].add(str((frames.dtype, tuple(frames.shape[1:]))))  # every batch, with or without files read
        out["devices"].add(frames.device.type)
        for name, video in zip(names, frames.cpu()):
            ref = torch.from_numpy(reader_folder.reference(name))
            want = mod.uniform(len(ref), K)
            out["shown_at"][name], out["want"][name] = shown_at(video, ref), want
            out["low_db"][name] = min(psnr(v, ref[j]) for v, j in zip(video, want))
        out["seen"] += names
        out["skipped"].update(failed)
    version = getattr(getattr(mod, backend, None), "__version__", "")  # the library's, where the module imports it
    return {**out, "shapes": sorted(out["shapes"]), "devices": sorted(out["devices"]), "version": version}


@pytest.mark.slow
@pytest.mark.parametrize("backend, device", PATHS)
def test_one_epoch_over_the_readers_folder_reads_every_file_right_or_names_it(backend, device, folder):
    available(backend, device)
    got = child("epoch", backend, device, *folder.values())
    assert got["shapes"] == [str((torch.uint8, (K, 3, reader_folder.SIZE, reader_folder.SIZE)))]
    assert got["devices"] == ["cuda" if device == "cuda" else "cpu"]
    for name in got["seen"]:  # the frames the ffmpeg tool shows at the sampled indices, upright
        assert got["shown_at"][name] == got["want"][name], f"{backend} on {device}: {name}"
        assert got["low_db"][name] > 22, (name, got["low_db"][name])
    expected_skips = REFUSED[(backend, device)] | reader_folder.BROKEN
    if backend == "decord" and got["version"].startswith("0."):  # decord 0.6's FFmpeg 4 has no AV1 decoder
        expected_skips |= {"sub/av1.mp4"}
    if device == "cuda" and not nvdec_decodes_av1():
        expected_skips |= {"sub/av1.mp4"}
    by_name = {str(p): n for n, p in folder.items()}
    for p, why in got["skipped"].items():  # on a GPU, read right (above), or refused with the two sizes named
        if device == "cuda" and by_name[p] in reader_folder.SWITCHES:
            assert f"refused: its picture size changes mid-stream ({reader_folder.SWITCHES[by_name[p]]}" in why, why
            expected_skips |= {by_name[p]}
    assert sorted(got["seen"]) == sorted(str(folder[n]) for n in folder if n not in expected_skips)  # each once
    assert {by_name[p] for p in got["skipped"]} == expected_skips
    assert "0 bytes" in got["skipped"][str(folder["empty.mp4"])]  # said to be empty, not FFmpeg's "invalid data"
    for why in got["skipped"].values():  # what is wrong with the file, not an error of the module's own code
        kind, _, cause = why.partition(": ")
        assert kind not in STRAY and cause.strip(), why


@pytest.mark.slow
def test_the_usage_notebook_22_prints_runs_as_printed(folder, tmp_path):
    # the module written beside the reader's script, the lines pasted as printed, with the files and epochs theirs
    available("pyav", "cpu")
    handover.write("pyav", "cpu", tmp_path)
    paths = sorted(str(p) for p in folder.values())
    lines = handover.usage("pyav", "cpu", k=4, workers=2, batch_size=4)
    assert handover.GUARD in lines.splitlines()  # worker processes: the loop under the guard
    assert lines.count(": ...") == 1  # the training step goes there
    step = 'print(f"{tuple(frames.shape)} {len(names) + len(skipped)}")'
    script = lines.replace(": ...", ": " + step).replace(f"{handover.PATHS}, 10", f"{paths!r}, 2") + "\n"
    (tmp_path / "train.py").write_text(script)
    run = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    batches = [line.rsplit(" ", 1) for line in run.stdout.splitlines()]  # a batch of files with no video: (0, 4, ...)
    assert all(shape.endswith("4, 3, 224, 224)") for shape, _ in batches), run.stdout
    assert sum(int(n) for _, n in batches) == 2 * len(paths)  # every file, read or skipped, in each epoch
    # why the guard: without it each worker, importing the script, runs the loop again, and the epoch fails
    unguarded = "\n".join(line.removeprefix("    ") for line in script.splitlines() if line != handover.GUARD)
    (tmp_path / "train.py").write_text(unguarded)
    run = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and not run.stdout
    for backend, device, workers in (("torchcodec", "cuda", 16), ("pyav", "cpu", 0), ("pynvvideocodec", "cuda", 8)):
        assert handover.GUARD not in handover.usage(backend, device, workers=workers)  # no process imports the script
    route = handover.route_usage([("torchcodec", "cuda", 16), ("pyav", "cpu", 4)]).splitlines()
    assert route[1] == handover.GUARD and all(line.startswith("    ") for line in route[2:])


@pytest.mark.parametrize("backend", ["torchcodec", "dali", "pynvvideocodec"])
def test_under_torchrun_a_gpu_module_decodes_on_its_ranks_gpu(backend):
    # torchrun's 8 ranks on one machine: "cuda" (or no gpu) would put every rank's decoding on GPU 0's engines
    name = handover.module(backend, "cuda")
    asked = [{}] if backend == "pynvvideocodec" else [{"device": "cuda"}, {"device": "cuda:1"}]
    got = "[(lambda c: getattr(c, 'device', None) or c.gpu)(VideoClips(['a.mp4'], **kw)) for kw in asked]"
    seen = "import torch; torch.cuda.is_available = lambda: True"  # on a CPU machine: a GPU torch sees, as ranks have
    code = f"{seen}; import json; from {name} import VideoClips; asked = {asked!r}; print(json.dumps({got}))"
    found = {}
    for rank in ("3", None):
        env = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"} | ({"LOCAL_RANK": rank} if rank else {})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(handover.FOLDER), os.environ.get("PYTHONPATH")]))
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        if run.returncode and "Error" in run.stderr and "import" in run.stderr.lower():
            pytest.skip(f"{name} does not import here: {run.stderr.strip().splitlines()[-1]}")
        assert run.returncode == 0, run.stderr[-2000:]
        found[rank] = json.loads(run.stdout.splitlines()[-1])
    if backend == "pynvvideocodec":  # its `gpu` argument: a number, this rank's where none is given
        assert found == {"3": ["cuda:3"], None: ["cuda:0"]}
    else:
        assert found == {"3": ["cuda:3", "cuda:1"], None: ["cuda", "cuda:1"]}


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for a GPU where torch sees none")
def test_a_gpu_torch_cannot_use_or_a_torchcodec_without_cuda_is_an_error_not_every_file_skipped(monkeypatch):
    mod = from_its_file("torchcodec_clips")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        mod.VideoClips(["a.mp4"], device="cuda")
    clips = mod.VideoClips(["a.mp4", "b.mp4"], device="cpu")
    monkeypatch.setattr(clips, "read", lambda p: (_ for _ in ()).throw(ValueError("cut short")))
    assert clips[0][0] is None and clips[0][2] == "ValueError: cut short"  # the file's fault: skipped, named
    monkeypatch.setattr(clips, "read", lambda p: (_ for _ in ()).throw(RuntimeError("Unsupported device: cuda")))
    with pytest.raises(RuntimeError):  # the library's: no file would be read, so the epoch stops at the first
        clips[1]


@pytest.mark.parametrize("name", ["torchcodec_clips", "dali_clips", "pynvvideocodec_clips"])
def test_a_gpu_modules_threads_decode_on_one_cuda_stream_of_their_own(name, monkeypatch):
    # on the default stream, the library's work queues behind the training step's, and the step waits for data;
    # one stream for all the threads keeps one memory pool
    import contextlib
    import threading

    mod = gpu_module_here(name, monkeypatch)
    events, current = [], ["default"]

    class Stream:
        cuda_stream = 1234  # the handle PyNvVideoCodec's decoders are given

        def __init__(self, device):
            self.name = f"stream {sum(e[0] == 'made' for e in events)}"
            events.append(("made", device))

        def synchronize(self):
            events.append(("synchronize", self.name))

    class Frames:
        device = "cuda:0"

        def record_stream(self, stream):
            events.append(("kept for", stream))

    @contextlib.contextmanager
    def on(stream):
        current.append(stream.name)
        yield
        current.pop()

    for attr, fake in (("is_available", lambda: True), ("Stream", Stream), ("stream", on),
                       ("device", lambda gpu: contextlib.nullcontext()),
                       ("default_stream", lambda device: "default")):  # fmt: skip
        monkeypatch.setattr(mod.torch.cuda, attr, fake)
    monkeypatch.setattr(mod, "STREAMS", {})
    gpu = {"gpu": 0} if name == "pynvvideocodec_clips" else {"device": "cuda"}
    clips = mod.VideoClips(["a.mp4", "b.mp4"], **gpu)
    monkeypatch.setattr(clips, "read", lambda p, *handle: events.append(("read", p, current[-1], *handle)) or Frames())
    assert clips[0][1:] == ("a.mp4", None) and clips[1][1:] == ("b.mp4", None)
    other = threading.Thread(target=clips.__getitem__, args=(0,))
    other.start()
    other.join()
    if name != "pynvvideocodec_clips":  # TorchCodec's and DALI's work on the current stream; ready when handed out
        read, one = [], [("synchronize", "stream 0"), ("kept for", "default")]
    else:  # PyNvVideoCodec's decoders copy out on the stream they are given; `read` waits for it
        read, one = [1234], [("kept for", "default")]
    assert events == [("made", *gpu.values()), ("read", "a.mp4", "stream 0", *read), *one,
                      ("read", "b.mp4", "stream 0", *read), *one, ("read", "a.mp4", "stream 0", *read), *one]  # fmt: skip


# what each library raised on an H100 for gray (4:0:0) H.264 (results/h100/2026-12-07/checks-70ba227)
NVDEC_801 = {
    "torchcodec_clips": RuntimeError(
        "create_decoder, /__w/torchcodec/torchcodec/meta-pytorch/torchcodec/src/torchcodec/_core/"
        "BetaCudaDeviceInterface.cpp:273, Failed to create NVDEC decoder: 801"
    ),
    "pynvvideocodec_clips": RuntimeError(
        "HandleVideoSequence : \nError code : 801\nError Type : Codec not supported on this GPU\n"
        "at /project/src/VideoCodecSDKUtils/helper_classes/NvCodec/NvDecoder/NvDecoder.cpp:274\n"
    ),
}


@pytest.mark.parametrize("name", list(NVDEC_801))
def test_a_format_nvdec_lacks_is_skipped_as_a_refusal_by_name_not_the_librarys_error_code(name, monkeypatch):
    import contextlib
    import types

    mod = gpu_module_here(name, monkeypatch)
    if name == "pynvvideocodec_clips":  # its reads run on a CUDA stream of its own: stood in for here
        for attr, fake in (("Stream", lambda gpu: types.SimpleNamespace(cuda_stream=1)),
                           ("stream", lambda s: contextlib.nullcontext()),
                           ("device", lambda gpu: contextlib.nullcontext())):  # fmt: skip
            monkeypatch.setattr(mod.torch.cuda, attr, fake)
        monkeypatch.setattr(mod, "STREAMS", {})
        clips = mod.VideoClips(["gray.mp4", "cut.mp4"], gpu=0)
    else:  # its check does not depend on the device
        clips = mod.VideoClips(["gray.mp4", "cut.mp4"], device="cpu")
    errors = {"gray.mp4": NVDEC_801[name], "cut.mp4": ValueError("cut short")}
    monkeypatch.setattr(clips, "read", lambda path, *stream: (_ for _ in ()).throw(errors[path]))
    assert clips[0] == (None, "gray.mp4", mod.NVDEC_LACKS)
    assert mod.NVDEC_LACKS.startswith("refused: ") and "801" in mod.NVDEC_LACKS
    assert clips[1] == (None, "cut.mp4", "ValueError: cut short")  # another error: the library's own, as before


def shards(backend: str, device: str, paths: list[str], world: int, init: str, epochs: int = 2) -> dict:
    """Each rank's files, epoch by epoch, from the module's loader under an initialized torch.distributed (gloo),
    `world` ranks as threads of this process would not do: one process each (`torch.multiprocessing.spawn`)."""
    import torch.multiprocessing as mp

    got = mp.get_context("spawn").Manager().dict()
    mp.spawn(_rank, (backend, device, paths, world, init, epochs, got), nprocs=world)
    return dict(got)


def _rank(rank, backend, device, paths, world, init, epochs, got):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    sys.path.insert(0, str(handover.FOLDER))
    mod = load(backend, device)
    batches = mod.loader(mod.VideoClips(paths, k=1, size=16, **options(backend, device)), batch_size=2, workers=0)
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        got[(rank, epoch)] = [n for _, names, failed in batches for n in [*names, *(p for p, _ in failed)]]
    dist.destroy_process_group()


@pytest.mark.slow
def test_a_file_whose_frames_share_a_time_is_named_by_the_scan_and_skipped_by_every_module(tmp_path):
    # two recordings joined with `cat` whose times overlap: the PyAV adapter raised mid-epoch (notebooks 21 and 22
    # failed on the folder) and decord's module returned frames 2 away from those asked for
    if not shutil.which("ffmpeg"):
        pytest.skip("needs the ffmpeg command-line tool")
    args, src = reader_folder.ENCODED["sub/camera.ts"]
    reader_folder.ffmpeg("-f", "lavfi", "-i", src, "-t", 1, *args, tmp_path / "part.ts")
    (tmp_path / "joined.ts").write_bytes((tmp_path / "part.ts").read_bytes() * 2)
    (tmp_path / "part.ts").unlink()
    with pytest.raises(
        DecodeError, match=r"no readable video: joined\.ts: some of its frames share a presentation time"
    ):
        folders.scan_videos(tmp_path)  # alone in its folder: named in the error
    # PyAV's and TorchCodec's modules check it in their own code; the other four in their one shared `probe`
    for backend, device in (("pyav", "cpu"), ("torchcodec", "cpu"), ("decord", "cpu")):
        if not why_unavailable(backend, device):
            got = child("epoch", backend, device, tmp_path / "joined.ts")
            assert not got["seen"] and "share a presentation time" in got["skipped"][str(tmp_path / "joined.ts")]


def test_the_scan_keeps_a_video_with_its_thumbnail_and_names_a_podcast_and_a_file_starting_between_keyframes(folder):
    # a cover picture is a video stream to FFmpeg: the podcast's was read as a one-frame video (PyAV's module raised
    # an IndexError), and decord was refused the thumbnailed video as one of several streams
    scanned = folders.scan_videos(folder["notes.txt"].parent)
    assert scanned.infos["thumbnail.mp4"].video_streams == 1 and "several-streams" not in traits(
        scanned.infos["thumbnail.mp4"]
    )
    assert "podcast.mp4" in scanned.unreadable
    assert "sub/joined_mid_gop.ts" in scanned.unreadable  # its first frames cannot be decoded: named, not read


def test_a_file_damaged_in_its_middle_passes_the_scan_and_the_adapters_refuse_it_not_read_it_wrong(folder):
    # its packets are whole; one fails in the decoder. SPDL 0.8 went on and returned frame 34 for frame 33 (its module
    # and the playbook's adapter); the modules skip it in the epoch above (BROKEN)
    # Each read in a process of its own: on the GPU machine, with the six modules imported into this one (their
    # libraries' several copies of FFmpeg), TorchCodec 0.17 crashed opening it; in a process of its own it raises
    damaged = folder["sub/damaged_mid.mp4"]
    assert damaged.name in folders.scan_videos(damaged.parent).videos
    for backend in ("pyav", "torchcodec", "decord", "spdl"):
        if not why_unavailable(backend, "cpu"):
            ask = {"path": str(damaged), "indices": sampling.uniform(60, K), "backend": backend, "device": "cpu"}
            got = run_requests([ask])[0]
            assert got["status"] == "error" and got["error"].startswith("DecodeError"), (backend, got)


@pytest.mark.slow
def test_a_script_with_spdls_worker_processes_ends_without_a_word_on_stderr(folder, tmp_path):
    # the workers are still alive when the script ends and get SIGTERM; SPDL's logger printed a stack trace for each
    available("spdl", "cpu")
    handover.write("spdl", "cpu", tmp_path)
    paths = [str(folder[n]) for n in ("h264_bframes.mp4", "sub/clip.webm", "film_640x272.mp4")]
    lines = handover.usage("spdl", "cpu", k=2, workers=2, batch_size=2).replace(": ...", ": print(len(names))")
    (tmp_path / "train.py").write_text(lines.replace(f"{handover.PATHS}, 10", f"{paths!r}, 1") + "\n")
    run = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and sum(map(int, run.stdout.split())) == 3 and run.stderr == "", run.stderr[-2000:]


@pytest.mark.slow
def test_spdls_module_logs_a_damaged_file_to_stderr_not_to_a_new_file_in_the_temporary_folder(folder, tmp_path):
    # SPDL's glog wrote two files to /tmp for each process that read a damaged file
    available("spdl", "cpu")
    handover.write("spdl", "cpu", tmp_path)
    script = f"from spdl_clips import VideoClips\nprint(VideoClips([{str(folder['sub/damaged_mid.mp4'])!r}])[0][2])\n"
    (tmp_path / "read.py").write_text(script)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}  # where glog writes its files
    run = subprocess.run(
        [sys.executable, "read.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() != "None", run.stderr[-2000:]  # skipped, with its cause
    assert list((tmp_path / "tmp").iterdir()) == [] and run.stderr


def test_decords_module_skips_a_damaged_file_without_ffmpegs_lines_on_stderr(folder, tmp_path):
    # decord's FFmpeg printed a dozen '[h264 @ 0x...] error while decoding MB' lines a read of it
    available("decord", "cpu")
    handover.write("decord", "cpu", tmp_path)
    script = f"from decord_clips import VideoClips\nprint(VideoClips([{str(folder['sub/damaged_mid.mp4'])!r}])[0][2])\n"
    (tmp_path / "read.py").write_text(script)
    run = subprocess.run([sys.executable, "read.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("DECORDError"), run.stderr[-2000:]  # skipped, with its cause
    assert " @ 0x" not in run.stderr, run.stderr[-2000:]


def test_the_modules_know_a_codec_by_its_name_not_by_the_decoder_ffmpeg_picks(tmp_path):
    # PyAV decodes AV1 with libdav1d: a check of the decoder's name never saw "av1" (decord 0.6 then failed the file
    # with "cannot find video stream" instead of its refusal)
    available("decord", "cpu")
    if not importlib.import_module("decord").__version__.startswith("0."):
        pytest.skip("decord2 reads AV1: no refusal to see")
    path = media.make_clip(tmp_path / "av1.mp4", "av1", 128, 72, num_frames=8, gop=4)
    frames, _, why = from_its_file("decord_clips").VideoClips([str(path)], k=2, size=32)[0]
    assert frames is None and why.startswith("ValueError: refused") and "AV1" in why


@pytest.mark.slow
def test_each_rank_reads_its_own_share_shuffled_by_the_epoch(folder, tmp_path):
    available("pyav", "cpu")
    paths = sorted(str(p) for p in folder.values())
    got = shards("pyav", "cpu", paths, 2, f"file://{tmp_path / 'rendezvous'}")
    share = -(-len(paths) // 2)  # DistributedSampler pads an odd count by repeating a file, so ranks step together
    for epoch in (0, 1):
        a, b = got[(0, epoch)], got[(1, epoch)]
        assert len(a) == len(b) == share and set(a) | set(b) == set(paths) and len(a + b) - len(set(a + b)) < 2
    assert got[(0, 0)] != got[(0, 1)]  # another order, and share, each epoch


@pytest.fixture(scope="module")
def colour_clips(tmp_path_factory):
    """media.colour_clips: smooth gradients, each encoded with the matrix and range its tags name, one untagged."""
    given = os.environ.get("PLAYBOOK_COLOUR_CLIPS")
    clips = media.colour_clips(given or tmp_path_factory.mktemp("colour"), smoke=True)
    if not clips:
        pytest.skip("needs the ffmpeg command-line tool to make the colour clips")
    return clips


def colours(backend: str, device: str, files: list[str], out: str) -> dict:
    """Two frames of each file at the modules' default size by the module of `backend` on `device`, saved to `out`
    (None where it refused the file)."""
    clips = load(backend, device).VideoClips(files, k=2, **options(backend, device))
    torch.save([None if f is None else f.cpu() for f, _, _ in (clips[i] for i in range(len(files)))], out)
    return {"saved": out}


@pytest.mark.slow
def test_every_two_paths_agree_on_colour_tagged_and_untagged(colour_clips, tmp_path):
    # the playbook's one rule (tags, else BT.601 limited) on every path: 35 dB or better between any two
    paths = [(b, d) for b, d in REFUSED if why_unavailable(b, d) is None and not (b == "dali" and d == "cpu")]
    files = [str(p) for p in colour_clips.values()]
    got = {}
    for b, d in paths:
        child("colours", b, d, tmp_path / f"{b}-{d}.pt", *files)
        got[(b, d)] = torch.load(tmp_path / f"{b}-{d}.pt")
    assert len(got) >= 2
    low = {}
    for a, b in itertools.combinations(got, 2):
        for name, fa, fb in zip(colour_clips, got[a], got[b]):
            if fa is not None and fb is not None:
                low[(a, b, name)] = psnr(fa, fb)
    assert low and min(low.values()) >= 35, sorted(low.items(), key=lambda kv: kv[1])[:5]


if __name__ == "__main__":  # a child process of `child`: what it asks, answered as one line of JSON
    what, backend, device, *rest = sys.argv[1:]
    if what == "epoch":
        print(json.dumps(epoch(backend, device, rest)))
    else:
        print(json.dumps(colours(backend, device, rest[1:], rest[0])))
