"""The code to paste (`recipes`): each CPU recipe, run as a reader would paste it, returns the frames asked for
(by their stamps: the frames `sampling.uniform` picks), for a clip with B-frames, a Matroska file and K larger
than the frame count; the GPU recipes the same on a GPU."""

import json
import threading
import time
import types

import pytest
import torch

from playbook_utils import media, recipes, resize, sampling
from playbook_utils.decoders import read_frames, why_unavailable

pytestmark = pytest.mark.media


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("recipes")
    return [
        media.make_clip(d / "bframes.mp4", "h264", 192, 108, num_frames=30, gop=12, bframes=2),
        media.make_clip(d / "clip.mkv", "h264", 160, 96, num_frames=24, gop=8),
    ]


@pytest.fixture(scope="module")
def vp9_clips(tmp_path_factory):
    # DALI's CPU decoder takes VP8, VP9 and MJPEG only; two sizes: a pipeline for each kind of picture
    d = tmp_path_factory.mktemp("recipes_vp9")
    return [
        media.make_clip(d / "clip.webm", "vp9", 192, 108, num_frames=30, gop=12),
        media.make_clip(d / "small.webm", "vp9", 160, 96, num_frames=24, gop=8),
    ]


def _run(backend, device, paths, k, threads=0):
    namespace = {"paths": [str(p) for p in paths]}
    code = recipes.recipe(backend, device, k=k, workers=0, threads=threads)
    exec(compile(code, f"<recipe {backend} {device}>", "exec"), namespace)
    assert isinstance(namespace["loader"], (torch.utils.data.DataLoader, types.GeneratorType))
    return namespace["VideoClips"](paths, k=k)


CPU = [(b, d) for b, d in recipes.RECIPES if d == "cpu"]
GPU = [(b, d) for b, d in recipes.RECIPES if d == "cuda"]


@pytest.mark.parametrize("backend, device", CPU, ids=[b for b, _ in CPU])
def test_every_cpu_recipe_returns_the_frames_asked_for(backend, device, clips, vp9_clips):
    if why_unavailable(backend, device):
        pytest.skip(why_unavailable(backend, device))
    clips = vp9_clips if backend == "dali" else clips  # DALI's CPU decoder: VP8, VP9 and MJPEG only
    for k in (5, 40):  # 40 > the frame count: frames repeat, as sampling.uniform's do
        ds = _run(backend, device, clips, k, threads=1 if k == 5 else 0)  # a share of the cores, then FFmpeg's choice
        for i, path in enumerate(clips):
            want = sampling.uniform(media.probe(path).num_frames, k)
            got = ds[i]
            assert got.dtype == torch.uint8 and got.shape[:2] == (k, 3), (backend, path.name, got.shape)
            assert [media.read_stamp(f) for f in got] == want, (backend, path.name)
            if k == 5:  # the pixels of the playbook's read with the same library; close to PyAV's (DALI: its own
                # FFmpeg conversion, a rounding away)
                assert torch.equal(got, read_frames(path, want, backend)), "the same pixels as the playbook's read"
                assert resize.psnr(got, read_frames(path, want, "pyav")) > 40


def test_cpu_recipes_take_the_threads_per_decoder_they_were_measured_with():
    # make_loader gives each worker's PyAV and TorchCodec decoders a share of the cores: the code to paste says so
    assert "stream.thread_count = 3  # the cores shared" in recipes.recipe("pyav", threads=3)
    assert "num_ffmpeg_threads=3,  # the cores shared" in recipes.recipe("torchcodec", "cpu", threads=3)
    assert "num_ffmpeg_threads=0,  # 0: as many as FFmpeg likes" in recipes.recipe("torchcodec", "cpu")


@pytest.mark.parametrize("backend, device", CPU, ids=[b for b, _ in CPU])
def test_every_cpu_recipe_batches_as_it_was_measured(backend, device):
    # notebook 22 hands over 21's batch size: every CPU recipe's DataLoader takes it (PyAV's, decord's and SPDL's
    # said batch_size=None beside a note saying "batches of 2 videos", 2026-12-05)
    code = recipes.recipe(backend, device, workers=0, batch=2)
    assert "batch_size=2," in code and "batch_size=None" not in code
    assert "batch_size=None," in recipes.recipe(backend, device, workers=0)  # one video at a time by default
    if why_unavailable(backend, device):
        pytest.skip(why_unavailable(backend, device))
    namespace = {"paths": ["a.mp4", "b.mp4"]}  # nothing is read until the loader is iterated
    exec(compile(code, f"<recipe {backend} {device}>", "exec"), namespace)
    assert namespace["loader"].batch_size == 2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend, device", GPU, ids=[b for b, _ in GPU])
def test_every_gpu_recipe_returns_the_frames_asked_for(backend, device, clips):
    if why_unavailable(backend, device):
        pytest.skip(why_unavailable(backend, device))
    path = clips[0]  # MP4: PyNvVideoCodec's adapter refuses MKV
    for k in (5, 40):  # 40 > the frame count: repeats
        ds = _run(backend, device, [path], k)
        want = sampling.uniform(media.probe(path).num_frames, k)
        got = ds[0]
        assert got.is_cuda and [media.read_stamp(f) for f in got.cpu()] == want, (backend, k)


@pytest.fixture(scope="module")
def open_gop_clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("recipes_open_gop")
    made = [
        media.make_clip(d / "h264_open.mp4", "h264", 256, 144, num_frames=96, gop=12, bframes=3, closed_gop=False),
        media.make_clip(d / "hevc_open.mkv", "hevc", 256, 144, num_frames=96, gop=24, bframes=3, closed_gop=False),
        media.make_clip(d / "hevc_open.mp4", "hevc", 256, 144, num_frames=72, gop=12, bframes=3, closed_gop=False),
    ]
    assert all(media.probe(p).open_gop for p in made)
    return made


def _forward_recipe(device, k, threads=4):
    """TorchCodec's CUDA recipe for a folder with open-GOP files, its device replaced by `device` (the CPU here)."""
    code = recipes.recipe("torchcodec", "cuda", k=k, gpu_threads=threads, open_gop=True)
    return code if device == "cuda" else code.replace('device="cuda"', f'device="{device}"')


def test_the_open_gop_recipe_reads_open_gop_hevc_forward_and_the_others_by_seeking(clips, open_gop_clips):
    # TorchCodec's CUDA recipe with open_gop: a frame table from the packets (PyAV) whose only keyframe is frame 0
    # for open-GOP HEVC (one forward pass, as the playbook's adapter reads it on NVDEC), the file's own index for
    # the others; run on the CPU here, the frames checked by their stamps; the frame table is checked on every file
    if why_unavailable("torchcodec", "cpu"):
        pytest.skip(why_unavailable("torchcodec", "cpu"))
    code = _forward_recipe("cpu", 5)
    assert "frame_table" in code and "import av" in code and "frame_table" not in recipes.recipe("torchcodec", "cuda")
    assert recipes.recipe("torchcodec", "cpu", open_gop=True) == recipes.recipe("torchcodec", "cpu")  # seeks are exact
    namespace = {"paths": []}
    exec(compile(code, "<recipe torchcodec cuda, open GOP, on the CPU>", "exec"), namespace)
    for path in [*open_gop_clips, clips[0]]:
        forward, table = namespace["frame_table"](path)
        frames = json.loads(table)["frames"]
        info = media.probe(path)
        assert forward == (info.open_gop and info.codec == "hevc") and len(frames) == info.num_frames, path.name
        assert [f["key_frame"] for f in frames] == [1] + [0] * (info.num_frames - 1)
        for k in (5, 16, 40):
            got = namespace["VideoClips"]([path], k=k)[0]
            assert [media.read_stamp(f) for f in got] == sampling.uniform(info.num_frames, k), (path.name, k)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_open_gop_recipe_is_exact_on_nvdec(open_gop_clips):
    if why_unavailable("torchcodec", "cuda"):
        pytest.skip(why_unavailable("torchcodec", "cuda"))
    namespace = {"paths": []}
    exec(compile(_forward_recipe("cuda", 16), "<recipe torchcodec cuda, open GOP>", "exec"), namespace)
    for path in open_gop_clips:
        got = namespace["VideoClips"]([path], k=16)[0]
        want = sampling.uniform(media.probe(path).num_frames, 16)
        assert got.is_cuda and [media.read_stamp(f) for f in got.cpu()] == want, path.name


def test_a_recipe_that_does_not_exist_names_those_that_do():
    with pytest.raises(KeyError, match="no recipe for decord on cuda; there are: pyav on cpu"):
        recipes.recipe("decord", "cuda")
    assert "DataLoader" not in recipes.recipe("torchcodec", "cuda:0", workers=8)  # threads in the training process
    assert 'device="cuda:0"' in recipes.recipe("torchcodec", "cuda:0")


def test_a_gpu_recipes_threads_deliver_every_video_once_with_a_bounded_look_ahead(clips):
    # the GPU recipes' loader (decode_ahead) is plain Python around the Dataset: run here with TorchCodec's
    # Dataset on the CPU in place of CUDA, its __getitem__ watched for how many videos are in flight at once
    if why_unavailable("torchcodec", "cpu"):
        pytest.skip(why_unavailable("torchcodec", "cpu"))
    paths = [str(p) for p in clips] * 4
    code = recipes.recipe("torchcodec", "cuda", k=5, gpu_threads=2).replace('device="cuda"', 'device="cpu"')
    namespace = {"paths": paths}
    exec(compile(code, "<recipe torchcodec, its GPU loader on the CPU>", "exec"), namespace)
    ds_type, lock, inside, most, started = namespace["VideoClips"], threading.Lock(), [0], [0], [0]
    real = ds_type.__getitem__

    def watched(self, i):
        with lock:
            inside[0] += 1
            started[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.05)  # long enough for the threads to overlap
            return i, real(self, i)
        finally:
            with lock:
                inside[0] -= 1

    ds_type.__getitem__ = watched
    got, ahead = [], 0
    for item in namespace["loader"]:  # a slow training step: the threads run ahead of it, up to the bound
        got.append(item)
        time.sleep(0.1)
        ahead = max(ahead, started[0] - len(got))
    assert ahead + 1 == 2 * 2  # at most 2 x threads videos in flight: the one the step holds and those begun after it
    assert sorted(i for i, _ in got) == list(range(len(paths)))  # every video once, in a shuffled order
    for i, frames in got:
        assert [media.read_stamp(f) for f in frames] == sampling.uniform(media.probe(paths[i]).num_frames, 5)
    assert most[0] == 2  # its 2 threads decoded side by side, and no more at once


def test_dalis_recipe_converts_colour_again_as_the_playbooks_adapter_does():
    # DALI's NVDEC path converts every file as BT.601; its recipe's bt601_to (plain torch, run here on the CPU)
    # converts again by the file's matrix, as the adapter's colour.reconvert does, to within rounding
    from playbook_utils import colour

    code = recipes.recipe("dali", "cuda")
    assert recipes._DALI_GPU["colour"] in code and "self.lock" in code and "DataLoader" not in code
    namespace = {"torch": torch}
    exec(compile(recipes._DALI_GPU["colour"], "<dali recipe: colour>", "exec"), namespace)
    rgb = torch.randint(30, 220, (2, 3, 16, 16), dtype=torch.uint8)
    again = namespace["bt601_to"](rgb, "bt709")
    want = colour.reconvert(rgb, ("bt601", "limited"), ("bt709", "limited"))
    assert (again.int() - want.int()).abs().max() <= 2
    assert (again.int() - rgb.int()).abs().max() > 5  # the matrices differ: the conversion did something
    assert (namespace["bt601_to"](rgb, "bt601").int() - rgb.int()).abs().max() <= 1
