"""The reader's own folder of videos: every file found by its suffix, probed, the unreadable ones named with their
cause instead of stopping the caller (`VIDEO_DIR` in notebooks 00, 20-22 and 30)."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

from playbook_utils.errors import DecodeError
from playbook_utils.probe import video_info

__all__ = ["scan_videos", "VIDEO_SUFFIXES", "VideoFolder"]

VIDEO_SUFFIXES = (
    *(".mp4", ".m4v", ".mkv", ".webm", ".mov", ".avi", ".ts", ".mts", ".m2ts", ".mpg", ".mpeg", ".vob", ".flv"),
    *(".f4v", ".wmv", ".asf", ".ogv", ".3gp", ".3g2", ".mxf", ".divx"),
)
MAX_FILES = 200  # a folder of more video files is sampled: each file is probed, its every packet read


@dataclasses.dataclass
class VideoFolder:
    """What `scan_videos` found: the readable videos ({name: path} and {name: VideoInfo}, name = the path
    relative to the folder), the unreadable ones ({name: the full cause}), how many files of each other suffix
    were not taken for video ({'.txt': 3}) and how many video files `max_files` left out."""

    root: Path
    videos: dict
    infos: dict
    unreadable: dict
    others: dict = dataclasses.field(default_factory=dict)
    left_out: int = 0

    def report(self) -> str:
        """A few lines for a notebook: how many videos, and every unreadable file with its whole cause."""
        lines = [f"{len(self.videos)} readable video(s) in {self.root}, {len(self.unreadable)} unreadable"]
        lines += [f"  skipped {name}: {cause}" for name, cause in self.unreadable.items()]
        if self.others:
            found = ", ".join(f"{n} {suffix}" for suffix, n in sorted(self.others.items(), key=lambda x: -x[1]))
            lines.append(f"  not taken for video, by their suffix: {found}")
        if self.left_out:
            lines.append(
                f"  {self.left_out} more video file(s) left out: at most {len(self.videos) + len(self.unreadable)}"
                " are read, evenly spaced in name order"
            )
        return "\n".join(lines)


def _files(root: Path) -> list[Path]:
    """Every entry but folders under `root`, through linked subfolders too: each folder once (the first by name where
    two links lead to it), a link back up the tree not followed."""
    seen, out = set(), []
    for d, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(d)
        if real in seen:
            dirs.clear()
            continue
        seen.add(real)
        dirs.sort()
        out += [Path(d, f) for f in files]
    return out


def scan_videos(folder, max_files: int | None = MAX_FILES) -> VideoFolder:
    """Every video file under `folder` (`VIDEO_SUFFIXES`, sorted; of more than `max_files`, that many evenly spaced in
    name order, across its subfolders; files of other suffixes counted),
    probed; one that cannot be probed, is cut short or whose frames cannot be placed is listed in `unreadable` with its
    cause. Raises DecodeError when `folder` is not a folder or holds no readable video. Introduced in notebook 20; used
    by 21, 22 and 30."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise DecodeError(root, "VIDEO_DIR is not a folder")
    every = [p for p in _files(root) if p.is_file() or p.is_symlink() and not p.exists()]  # a link's target gone
    kind = {p: "._ (macOS metadata)" if p.name[:2] == "._" else p.suffix.lower() or "(none)" for p in every}
    files = sorted(p for p in every if kind[p] in VIDEO_SUFFIXES)
    others = Counter(k for k in kind.values() if k not in VIDEO_SUFFIXES)
    videos, infos, unreadable = {}, {}, {}
    taken = files
    if max_files is not None and len(files) > max_files:
        taken = [files[(2 * i + 1) * len(files) // (2 * max_files)] for i in range(max_files)]
    for p in taken:
        name = str(p.relative_to(root))
        if not p.exists():
            unreadable[name] = f"a symbolic link to {os.readlink(p)}, which does not exist"
            continue
        try:
            info = video_info(p)
            why = info.unplaceable
            if info.cut_short:
                why = (
                    f"cut short: {info.num_frames} frames, and its index lists {info.missing_frames} more that the "
                    "file does not hold (an interrupted copy or download?)"
                )
            if why:
                unreadable[name] = why
                continue
            infos[name], videos[name] = info, p
        except Exception as e:  # the cause in full: the reader has to fix or drop this file
            unreadable[name] = getattr(e, "cause", None) or f"{type(e).__name__}: {e}"
    if not videos:  # nothing to measure or recommend: said here, not as an empty table or an IndexError later
        why = "; ".join(f"{n}: {c}" for n, c in list(unreadable.items())[:5]) + (", ..." if len(unreadable) > 5 else "")
        suffixes = ", ".join(VIDEO_SUFFIXES[:6])
        raise DecodeError(
            root, f"no readable video: {why}" if why else f"no file with a video suffix ({suffixes}, ...)"
        )
    return VideoFolder(root, videos, infos, unreadable, dict(others), len(files) - len(taken))
