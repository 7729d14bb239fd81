"""decord adapter: a C++ video reader with batched random access; CPU only from PyPI (notebook 11).

decord's PyPI wheel (0.6.0, 2021) has no GPU path; a source build with CUDA is used when present.
Known problems, shown in notebook 11: frame-inaccurate seeks on some streams and memory that
grows with each reader. This adapter checks decord's frame count against the packets and refuses
the file traits that the correctness matrix found decord to get wrong.
"""

from __future__ import annotations

from functools import lru_cache

DEVICES = ("cpu", "cuda")
ROTATES = True   # returns frames turned as the display matrix says

# File traits decord was seen to get wrong in the correctness matrix: refused, never guessed.
KNOWN_WRONG = {
    "open-gop": "after a seek it returns a neighbouring frame (seen with H.264 and HEVC, off by 1-3)",
    "codec:av1": "its bundled FFmpeg 4 has no AV1 decoder ('cannot find video stream')",
    "container:avi": "random access returns frames of the first GOP (seen with and without B-frames)",
    "edit-list": "it counts the frames an MP4 edit list hides, and returns frames other than those a player shows",
    "several-streams": ("its bundled FFmpeg 4 picks the video stream by another rule than FFmpeg 5 and later "
                        "(which prefer the stream flagged default): it read a 204x114 stream where the others "
                        "read the 256x144 default one"),
}


def device_unavailable(device: str) -> str | None:
    """Why decord cannot decode on `device` here (None when it can).

    Never imports decord into this process: its bundled FFmpeg 4 libraries, once loaded, break
    PyAV's VP9 encoder in the same process (shown in notebook 11). The answer for 'cuda' comes from
    a child process, once per process.
    """
    if device != "cuda":
        return None
    return _cuda_unavailable()


@lru_cache(maxsize=None)
def _cuda_unavailable() -> str | None:
    import subprocess
    import sys

    check = "import decord; print(decord.gpu(0).exist)"  # in a child: see the clash above
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    if run.stdout.strip() != "True":
        return "this decord was built without CUDA (the PyPI wheel is CPU-only)"
    return None


def refuses(info, device: str) -> str | None:
    from playbook_utils.decoders.matrix import traits

    for trait in traits(info):
        if trait in KNOWN_WRONG:
            return f"decord cannot be trusted with {trait} video: {KNOWN_WRONG[trait]}"
    return None


def read_file(fileobj, indices: list[int], device: str, info):
    """`read` from an open binary file object: decord's VideoReader takes it, and reads it whole into
    memory before decoding (notebook 24)."""
    return read(fileobj, indices, device, info)


def read(path: str, indices: list[int], device: str, info):
    import decord
    import torch

    from playbook_utils.decoders import device_index

    ctx = decord.cpu(0) if device == "cpu" else decord.gpu(device_index(device))
    vr = decord.VideoReader(path, ctx=ctx)
    if len(vr) != info.num_frames:
        raise RuntimeError(f"decord counts {len(vr)} frames, the packets say {info.num_frames}: "
                           "its frame indices cannot be trusted for this file")
    # get_batch is several times slower on unsorted indices: fetch each frame once, in order.
    unique = sorted(set(indices))
    batch = vr.get_batch(unique)
    frames = torch.from_dlpack(batch.to_dlpack()) if device != "cpu" else torch.from_numpy(batch.asnumpy())
    position = {i: k for k, i in enumerate(unique)}
    order = torch.tensor([position[i] for i in indices], device=frames.device)
    return frames[order].permute(0, 3, 1, 2).contiguous()
