"""The playbook's adapters on a few files, each frame matched to PyAV's CPU decode of the whole file: which frame
came back for each asked, or the refusal. Frames are resized to 90x160 so a size change mid-stream compares.
Usage, from the project root: python adapters_check.py DEVICE FILE ... (BACKENDS=spdl,dali to pick)"""

import os
import sys

import torch

from playbook_utils.decoders import read, video_info

device, *files = sys.argv[1:]
backends = os.environ.get("BACKENDS", "pyav,torchcodec,pynvvideocodec,dali,spdl").split(",")
for f in files:
    n = video_info(f).num_frames
    every = read(f, list(range(n)), "pyav", "cpu", size=(90, 160)).frames.float()
    asked = [3, n // 2 + 3, n // 2 + 11, n - 4]
    for b in backends:
        try:
            got = read(f, asked, b, device, size=(90, 160)).frames.float().cpu()
        except Exception as e:
            print(f"{f} {b} {device} refused {type(e).__name__}: {str(e)[:220]}")
            continue
        err = ((got[:, None] - every[None]) ** 2).mean(dim=(2, 3, 4))  # asked x every frame
        shown = err.argmin(dim=1).tolist()
        db = [round(10 * torch.log10(255**2 / e.clamp(min=1e-6)).item(), 1) for e in err.min(dim=1).values]
        verdict = "right" if shown == asked else "WRONG"
        print(f"{f} {b} {device} {verdict} asked {asked} shown {shown} dB {db}")
