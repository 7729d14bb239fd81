"""The two pictures every decoder notebook shows (10-14): a frame grid and a sampling timeline."""

from __future__ import annotations


def frame_grid(frames, titles=None, title: str = "", columns: int = 4, path=None):
    """Show uint8 (N, 3, H, W) frames (any device) in a grid; save to `path` if given. Returns the figure."""
    import matplotlib.pyplot as plt

    frames = frames.detach().cpu() if hasattr(frames, "detach") else frames
    n = len(frames)
    rows = max(1, -(-n // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3 * columns, 1.9 * rows + 0.5), squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k < n:
            ax.imshow(frames[k].permute(1, 2, 0).numpy() if hasattr(frames[k], "permute")
                      else frames[k].transpose(1, 2, 0))
            if titles:
                ax.set_title(titles[k], fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=80)
    return fig


def sampling_timeline(strategies: dict, keyframes, num_frames: int, title: str = "", path=None):
    """Sampled indices of each strategy ({label: indices}) against the keyframes. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 0.5 + 0.45 * len(strategies)))
    for k in keyframes:
        ax.axvline(k, color="tab:red", alpha=0.35, lw=1)
    for row, (label, idx) in enumerate(strategies.items()):
        ax.scatter(list(idx), [row] * len(idx), s=9)
    ax.set_yticks(range(len(strategies)), list(strategies), fontsize=8)
    ax.set_xlim(-1, num_frames)
    ax.set_xlabel("frame index (red lines: keyframes)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=80)
    return fig
