"""The pictures the early notebooks share: a grid of stamped frames (01, 10-14) and a sampling timeline
(01, 15). Each returns the figure; show and save it with `kit.show`."""

from __future__ import annotations


def frame_grid(frames, titles=None, title: str = "", columns: int = 4, path=None):
    """Show uint8 (N, 3, H, W) or (N, H, W, 3) frames (any device) in a grid, one title per frame; save to
    `path` if given. Returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    frames = frames.detach().cpu().numpy() if hasattr(frames, "detach") else np.asarray(frames)
    if frames.ndim == 4 and frames.shape[1] == 3 and frames.shape[-1] != 3:
        frames = frames.transpose(0, 2, 3, 1)
    n = len(frames)
    columns = min(columns, n) or 1
    rows = max(1, -(-n // columns))
    aspect = frames.shape[1] / frames.shape[2] if n else 0.56
    fig, axes = plt.subplots(rows, columns, figsize=(3 * columns, 3 * aspect * rows + 0.9), squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k < n:
            ax.imshow(frames[k])
            if titles:
                ax.set_title(titles[k], fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=90, bbox_inches="tight")
    return fig


def stamped_grid(frames, asked, title: str, columns: int = 4):
    """`frame_grid` with each frame titled 'asked i · stamp s': the index requested and the index read
    from its pixels (`media.read_stamps`), so the picture itself shows whether the loader was exact."""
    from playbook_utils import media

    stamps = media.read_stamps(frames)
    titles = [f"asked {a} · stamp {'none' if s is None else s}" for a, s in zip(asked, stamps)]
    return frame_grid(frames, titles, title, columns)


def sampling_timeline(strategies: dict, keyframes, num_frames: int, title: str = "", path=None):
    """Which frames each sampling strategy ({label: indices}) asks for, against the keyframes (red lines);
    each label says how many GOPs the strategy touches, since each costs a decode from its keyframe.
    Returns the figure."""
    import bisect

    import matplotlib.pyplot as plt

    keys = sorted(keyframes)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * len(strategies)))
    for k in keys:
        ax.axvline(k, color="tab:red", alpha=0.4, lw=1)
    labels = []
    for row, (label, idx) in enumerate(strategies.items()):
        idx = list(idx)
        gops = len({bisect.bisect_right(keys, i) for i in idx})
        labels.append(f"{label}\n{len(idx)} frames, {gops} of {len(keys)} GOPs")
        ax.scatter(idx, [row] * len(idx), s=12)
    ax.set_yticks(range(len(strategies)), labels, fontsize=8)
    ax.set_ylim(len(strategies) - 0.5, -0.5)
    ax.set_xlim(-1, num_frames)
    ax.set_xlabel("frame index (red lines: keyframes)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=90, bbox_inches="tight")
    return fig
