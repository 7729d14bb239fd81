"""A stand-in for a reader's own footage: frames that carry no stamp."""

import numpy as np


def footage_frame(index: int, width: int, height: int, num_frames: int = 300):
    """The (Y, U, V) planes of frame `index` of an unstamped clip standing for a reader's own footage: a random
    texture panning under a slow brightness wave, nothing in it saying which frame it is (the tests of notebooks 20-22)."""
    rng = np.random.default_rng(width * 7919 + height)
    texture = rng.integers(40, 216, size=(height + 64, width + 64), dtype=np.uint8)
    dx, dy = (3 * index) % 64, index % 64
    y = texture[dy : dy + height, dx : dx + width].astype(np.int16)
    y += (20 * np.sin(2 * np.pi * (np.arange(width) / width + index / 45.0))).astype(np.int16)[None, :]
    y = np.clip(y, 16, 235).astype(np.uint8)
    h2, w2 = height // 2, width // 2
    u = np.full((h2, w2), 128 + int(30 * np.sin(index / 20.0)), dtype=np.uint8)
    v = np.full((h2, w2), 128 + int(30 * np.cos(index / 20.0)), dtype=np.uint8)
    return y, u, v
