"""A keyframe index that fetches only what a sampled clip needs from object storage (notebook 24): a `ByteIndex`
(built once per file by `byte_index`) plans a few ranged requests, the container metadata and the GOP of each wanted
frame. `bench.access_cost.measure_access` compares it with whole and ranged reads."""

from __future__ import annotations

import dataclasses

from playbook_utils import sources
from playbook_utils.probe import probe

__all__ = ["byte_index", "ByteIndex"]


@dataclasses.dataclass
class ByteIndex:
    """Where a video's bytes are: each frame's packet offset and size, the keyframes, the metadata byte ranges, the
    object's size and its `media.VideoInfo`. Built once per file by `byte_index`; JSON-able."""

    size: int
    pos: list[int]
    nbytes: list[int]
    keyframes: list[int]
    header: list[tuple[int, int]]
    info: object = None

    def keyframe_offsets(self) -> dict[int, int]:
        """{keyframe pts: byte offset of its packet}: where a reader starts to reach any frame of that GOP."""
        return {self.info.pts[k]: self.pos[k] for k in self.keyframes}

    def gop_range(self, frame: int) -> tuple[int, int]:
        """Bytes [start, end) holding every packet of the GOP (presentation order) that contains `frame`."""
        keys = self.keyframes
        k = max(x for x in keys if x <= frame)
        nxt = min([x for x in keys if x > frame], default=len(self.pos))
        return min(self.pos[k:nxt]), max(p + n for p, n in zip(self.pos[k:nxt], self.nbytes[k:nxt]))

    def plan(self, indices, gap: int = 4096) -> list[tuple[int, int]]:
        """The byte ranges to fetch for frames `indices`: the container metadata and each wanted frame's GOP,
        ranges less than `gap` bytes apart merged into one request."""
        spans = sorted(set(self.header) | {self.gop_range(i) for i in indices})
        out = []
        for a, b in spans:
            if out and a - out[-1][1] < gap:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        return out


def byte_index(source) -> ByteIndex:
    """The `ByteIndex` of any source `sources.resolve` takes (a local file costs no requests: build it where
    the data is written, store it beside the data). Raises ValueError when the container gives no byte
    positions for its packets. Introduced in notebook 24."""
    import av

    src = sources.resolve(source)
    found = probe(src)
    rows = []
    with src.open() as f, av.open(f) as c:
        stream = c.streams.video[0]
        for p in c.demux(stream):
            if p.size and p.pts is not None:
                if p.pos is None or p.pos < 0:
                    raise ValueError(f"{src.name}: the {c.format.name} container gives no byte offsets for its packets")
                rows.append((p.pts, p.pos, p.size))
    rows.sort()
    if [r[0] for r in rows] != found.pts:
        raise ValueError(f"{src.name}: packets and probe disagree")
    pos, nbytes = [r[1] for r in rows], [r[2] for r in rows]
    first, last = min(pos), max(p + n for p, n in zip(pos, nbytes))
    header = [r for r in ((0, first), (last, src.size)) if r[1] > r[0]]
    return ByteIndex(src.size, pos, nbytes, list(found.keyframes), header, found)
