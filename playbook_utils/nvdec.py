"""Which codecs this GPU's NVDEC engines decode, found by decoding, not by table (notebook 00).

Each probe decodes a whole stamped clip on the GPU in a child process (so a library that
crashes, or one whose FFmpeg clashes with another's, cannot hurt the caller) and checks that
every frame carries the right index. Run as a module, it is that child:
    python -m playbook_utils.nvdec LIBRARY PATH
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

PROBE_LIBRARIES = ("pynvvideocodec", "pyav_hwaccel")

# The smallest frame NVDEC decodes, per codec: NVIDIA's NVDEC programming guide (Video Codec SDK).
# Seen on the H200: DALI refused a 160x96 VP9 clip ("supported: 128x128"), TorchCodec fell back to
# the CPU for 160x96 HEVC and VP9 while H.264 at that size decoded on NVDEC.
MIN_SIZE = {"h264": (48, 16), "hevc": (144, 144), "vp9": (128, 128), "av1": (128, 128),
            "vp8": (48, 16), "mpeg4": (48, 16), "mpeg2video": (48, 16), "mjpeg": (48, 16)}


def too_small(codec: str, width: int, height: int) -> str | None:
    """Why NVDEC cannot take a `codec` stream of this size, or None when the size is fine."""
    min_w, min_h = MIN_SIZE.get(codec, (0, 0))
    if width < min_w or height < min_h:
        return f"NVDEC's smallest {codec} frame is {min_w}x{min_h}; this video is {width}x{height}"
    return None


def _decode_pynvvideocodec(path: str):
    import PyNvVideoCodec as nvc
    import torch

    dec = nvc.SimpleDecoder(path, gpu_id=0, use_device_memory=True,
                            output_color_type=nvc.OutputColorType.RGBP)
    tensors = []
    # Decoded frames borrow the decoder's surfaces: copy each one out before asking for more.
    for start in range(0, len(dec), 8):
        batch = dec.get_batch_frames_by_index(list(range(start, min(start + 8, len(dec)))))
        tensors += [torch.from_dlpack(f).clone() for f in batch]
    if tensors and not tensors[0].is_cuda:
        raise RuntimeError(f"frames came back on {tensors[0].device}, not on the GPU")
    return tensors, "decoded by NVDEC through PyNvVideoCodec"


def _decode_pyav_hwaccel(path: str):
    import av
    from av.codec.hwaccel import HWAccel

    hw = HWAccel(device_type="cuda", allow_software_fallback=False)
    with av.open(path, hwaccel=hw) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        if not stream.codec_context.is_hwaccel:
            raise RuntimeError("PyAV decoded in software: the hardware path was not used")
    return frames, "decoded through FFmpeg's CUDA hwaccel (NVDEC), frames copied to the host"


def _child(library: str, path: str) -> dict:
    from playbook_utils.media import StampError, read_stamp

    start = time.perf_counter()
    decode = {"pynvvideocodec": _decode_pynvvideocodec, "pyav_hwaccel": _decode_pyav_hwaccel}[library]
    frames, how = decode(path)
    seconds = time.perf_counter() - start
    wrong = 0
    for i, frame in enumerate(frames):
        try:
            wrong += read_stamp(frame) != i
        except StampError:
            wrong += 1
    return {"ok": len(frames) > 0 and wrong == 0, "frames": len(frames), "wrong_frames": wrong,
            "seconds": round(seconds, 3), "how": how, "error": None}


def probe(library: str, path, timeout: float = 120) -> dict:
    """Decode `path` on the GPU with `library` in a child process; return what happened.

    {'ok': all frames decoded on the GPU with the right stamps, 'frames', 'wrong_frames',
     'seconds' (including decoder start-up), 'how', 'error'}.
    """
    try:
        run = subprocess.run([sys.executable, "-m", "playbook_utils.nvdec", library, str(path)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no answer within {timeout:.0f} s"}
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "error": f"child process died (exit {run.returncode}): {tail[:300]}"}
    return json.loads(lines[-1])


def codec_matrix(clips: dict, libraries=PROBE_LIBRARIES, timeout: float = 120) -> dict:
    """{codec: {library: probe result}} for clips given as {codec: path}."""
    return {codec: {lib: probe(lib, path, timeout) for lib in libraries} for codec, path in clips.items()}


if __name__ == "__main__":
    lib, clip = sys.argv[1], sys.argv[2]
    try:
        result = _child(lib, clip)
    except BaseException as e:  # report any failure as data: this process exists to contain it
        msg = (str(e).strip().splitlines() or [""])[0]
        result = {"ok": False, "error": f"{type(e).__name__}: {msg}"[:400]}
    print(json.dumps(result), flush=True)
