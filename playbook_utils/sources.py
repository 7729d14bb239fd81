"""Video inputs beyond a local path: bytes, file-like objects, members of .tar shards, object-store URLs (notebook 24).

`decoders.read_frames`, `media.probe` and the loaders take any of these where they take a path: `TarMember` (or
"tar://<member>::<shard>"), fsspec URLs (`URL_PROTOCOLS`, `RangeFile`); a backend that cannot take one gets a
temporary local copy (where its adapter has no `read_file`). `errors.redact` keeps a URL's credentials out of every name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from playbook_utils.errors import BackendUnavailable, DecodeError, first_line, redact

__all__ = [
    "BytesSource",
    "DEFAULT_BLOCK",
    "display_name",
    "file_identity",
    "FileSource",
    "IOStats",
    "is_local",
    "PathSource",
    "RangeFile",
    "resolve",
    "Source",
    "tar_index",
    "TarMember",
    "TarSource",
    "UrlSource",
    "Window",
]

DEFAULT_BLOCK = 256 * 1024  # bytes per range request: a few requests for a short clip, not one per packet
CACHE_BLOCKS = 256  # blocks a `RangeFile` keeps (64 MiB at DEFAULT_BLOCK); a larger read is returned whole all the same
# The URL protocols `resolve` takes (besides local paths, file:// and tar://): object stores and the web.
URL_PROTOCOLS = ("s3", "gs", "gcs", "az", "abfs", "abfss", "http", "https")


class TarMember(NamedTuple):
    """A file inside an uncompressed .tar shard (local path or URL), read in place. Its str() is the
    fsspec-style string `tar://<member>::<shard>`, which every playbook function takes as well (notebook 24)."""

    shard: str
    member: str

    def __str__(self) -> str:
        return f"tar://{self.member}::{self.shard}"


def is_local(source) -> bool:
    """True for a local path (str or os.PathLike without a URL scheme)."""
    if isinstance(source, os.PathLike):
        return True
    return isinstance(source, str) and "://" not in source


def display_name(source) -> str:
    """How errors and results name `source`: the path or URL (without its credentials: `errors.redact`), or
    '<N bytes>' / '<file-like ...>'."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return f"<{len(source)} bytes>"
    if isinstance(source, (str, os.PathLike, TarMember)):
        return redact(str(source))
    return f"<file-like {redact(getattr(source, 'name', type(source).__name__))}>"


@dataclasses.dataclass
class IOStats:
    """What reading one source cost: data requests sent (ranged GETs; the size lookup an object needs once
    per `resolve` is not counted), bytes fetched, seconds until the first byte arrived."""

    requests: int = 0
    bytes_fetched: int = 0
    first_byte_s: float | None = None
    started: float = dataclasses.field(default_factory=time.perf_counter)

    def add(self, nbytes: int) -> None:
        self.requests += 1
        self.bytes_fetched += nbytes
        if self.first_byte_s is None:
            self.first_byte_s = time.perf_counter() - self.started


class _Reader(io.RawIOBase):
    """A readable, seekable binary file over the subclass's `read(n)`: what `_SizedReader` and `_Borrowed` share."""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _SizedReader(_Reader):
    """A file of `size` bytes at position `_pos`, over the subclass's `_read(n)` of 0 < n <= the bytes left:
    the file-object part that `RangeFile` and `Window` share."""

    size: int
    _pos: int

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + int(offset))
        return self._pos

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:  # read everything left: whole, however many pieces it takes
            parts = []
            while piece := self.read(self.size - self._pos):
                parts.append(piece)
            return b"".join(parts)
        n = min(n, self.size - self._pos)
        return self._read(n) if n > 0 else b""


class RangeFile(_SizedReader):
    """A read-only, seekable file over `fetch(start, end) -> bytes` of an object of `size` bytes: each cache miss is one
    ranged request of at least `block_size` bytes, counted in `stats`; `prefetched` {start: bytes} costs none."""

    def __init__(
        self,
        fetch,
        size: int,
        name: str = "<range file>",
        block_size: int = DEFAULT_BLOCK,
        stats: IOStats | None = None,
        max_blocks: int | None = None,
        prefetched: dict | None = None,
    ):
        super().__init__()
        self._fetch, self.size, self.name, self.block_size = fetch, int(size), name, max(4096, int(block_size))
        self.stats = stats if stats is not None else IOStats()
        self._pos = 0
        self._blocks: dict[int, bytes] = {}  # least recently used first
        self._max_blocks = max(1, int(CACHE_BLOCKS if max_blocks is None else max_blocks))
        self._ranges = sorted((prefetched or {}).items())

    def _load(self, first: int, last: int) -> list[bytes]:
        """Blocks first..last (inclusive), in order: those held from the cache, the others fetched in one request
        per missing run. The pieces are returned, not looked up again, so a read of more blocks than the cache
        keeps (`max_blocks`) is whole; the cache keeps the most recently used blocks."""
        pieces = []
        b = first
        while b <= last:
            if b in self._blocks:
                pieces.append(self._blocks.pop(b))
                self._blocks[b] = pieces[-1]  # most recently used last
                b += 1
                continue
            run_end = b
            while run_end + 1 <= last and run_end + 1 not in self._blocks:
                run_end += 1
            start, end = b * self.block_size, min(self.size, (run_end + 1) * self.block_size)
            data = self._fetch(start, end)
            if len(data) != end - start:
                raise OSError(f"{self.name}: asked bytes {start}..{end}, got {len(data)}")
            self.stats.add(len(data))
            pieces.append(data)
            for k in range(max(b, run_end + 1 - self._max_blocks), run_end + 1):  # no more than the cache keeps
                self._blocks[k] = data[(k - b) * self.block_size : (k - b + 1) * self.block_size]
            while len(self._blocks) > self._max_blocks:
                self._blocks.pop(next(iter(self._blocks)))
            b = run_end + 1
        return pieces

    def _read(self, n: int) -> bytes:
        # A short read at the edge of a prefetched range: the caller asks again for the rest, so a
        # decoder's read-ahead (FFmpeg asks for 32 KiB at a time) does not pull in bytes the plan left out.
        pos, piece = self._pos, None
        for a, data in self._ranges:  # sorted by start: the first that starts past `pos` is the next
            if a <= pos < a + len(data):
                piece = data[pos - a : pos - a + n]
                break
            if a > pos:
                n = min(n, a - pos)
                break
        if piece is None:
            first, last = pos // self.block_size, (pos + n - 1) // self.block_size
            off = pos - first * self.block_size
            piece = b"".join(self._load(first, last))[off : off + n]
        self._pos += len(piece)
        return piece


class Window(_SizedReader):
    """Bytes [offset, offset + size) of a seekable binary file `base`, as a file of its own (a tar member)."""

    def __init__(self, base, offset: int, size: int, name: str):
        super().__init__()
        self.base, self.offset, self.size, self.name = base, int(offset), int(size), name
        self._pos = 0

    def _read(self, n: int) -> bytes:
        self.base.seek(self.offset + self._pos)
        data = self.base.read(n)
        self._pos += len(data)
        return data

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.base.close()
        super().close()


def _url_fs(url: str, storage_options: dict | None):
    """fsspec's (filesystem, path) of `url`; DecodeError naming the protocol unless it is one of `URL_PROTOCOLS`."""
    protocol = url.split("://", 1)[0].lower()  # of an fsspec chain, the whole chain ('simplecache::s3')
    if protocol not in URL_PROTOCOLS:
        raise DecodeError(
            url,
            f"URL protocol {protocol!r} is not read here; accepted: {', '.join(URL_PROTOCOLS)} "
            "(and local paths, file:// and tar://<member>::<shard>)",
            "sources",
        )
    try:
        import fsspec
    except ImportError as e:
        raise BackendUnavailable(url, "reading URLs needs fsspec (pip install .[remote])", "sources") from e
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError) as e:
        raise BackendUnavailable(url, f"no fsspec filesystem for this URL: {first_line(e)}", "sources") from e


class Source:
    """One resolved input (`resolve`): its `name`, `kind` ('path', 'bytes', 'file', 'tar', 'url'), `open()`
    for a fresh binary file object at byte 0, `size`, and `stats`: what every read through this object
    has cost so far (a probe and a decode through one Source add up)."""

    kind = "?"
    key = None  # what a probe cache may key on (None: do not cache)

    def __init__(self, name: str):
        self.name = name
        self.stats = IOStats()

    def open(self):
        raise NotImplementedError

    @property
    def size(self) -> int:
        raise NotImplementedError

    def read_bytes(self) -> bytes:
        with self.open() as f:
            return f.read()

    @contextlib.contextmanager
    def local_path(self):
        """A local file with these bytes: the path itself, else a temporary copy deleted afterwards."""
        suffix = Path(self.name.split("::")[0].split("?")[0]).suffix[:8]
        fd, tmp = tempfile.mkstemp(prefix="playbook-spool-", suffix=suffix)
        try:
            with os.fdopen(fd, "wb") as out, self.open() as f:
                while chunk := f.read(4 << 20):
                    out.write(chunk)
            yield tmp
        finally:
            os.unlink(tmp)


def file_identity(path) -> tuple:
    """(device, inode, size, mtime in ns, ctime in ns) of the file at `path`: the key of every cache of something read
    from a file, so a replaced file is re-opened. Raises OSError when the file cannot be stat'ed."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class PathSource(Source):
    kind = "path"

    def __init__(self, path):
        path = str(path)
        super().__init__(path[7:] if path.startswith("file://") else path)
        self.path = self.name

    @property
    def key(self):
        return ("path", os.path.abspath(self.path), *file_identity(self.path))

    @property
    def size(self) -> int:
        return os.stat(self.path).st_size

    def open(self):
        return open(self.path, "rb")  # noqa: SIM115 - handed to the caller

    @contextlib.contextmanager
    def local_path(self):
        yield self.path


class BytesSource(Source):
    kind = "bytes"

    def __init__(self, data):
        super().__init__(display_name(data))
        self.data = bytes(data)

    @property
    def size(self) -> int:
        return len(self.data)

    def open(self):
        f = io.BytesIO(self.data)
        f.name = self.name
        return f


class _Borrowed(_Reader):
    """A caller's file object lent to one read: seeks are relative to where it stood, and close() leaves it open.
    Positions come from the object's tell(), not from what its seek() returns (some wrappers return None)."""

    def __init__(self, f, name: str):
        super().__init__()
        self.f, self.name, self.start = f, name, f.tell()

    def tell(self):
        return self.f.tell() - self.start

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_SET:
            self.f.seek(self.start + offset)
        else:
            self.f.seek(offset, whence)
        return self.f.tell() - self.start

    def read(self, n=-1):
        return self.f.read(n)

    def close(self):
        self.f.seek(self.start)
        super().close()


_SEEKABLE_FIX = "wrap it in io.BytesIO(f.read()) or pass its bytes"


class FileSource(Source):
    """A caller's binary file object, read from where it stands. It must seek: a decoder jumps around the file
    (positions are taken from tell(), so a seek() that returns None is fine); a pipe or a stream that cannot
    seek is refused with a DecodeError that says what to do instead."""

    kind = "file"

    def __init__(self, f):
        super().__init__(display_name(f))
        if not (hasattr(f, "read") and hasattr(f, "seek") and hasattr(f, "tell")):
            raise DecodeError(
                self.name, f"a file-like source needs read() and seek() and tell(); {_SEEKABLE_FIX}", "sources"
            )
        why = ""
        try:
            seekable = f.seekable() if hasattr(f, "seekable") else True
            if seekable:
                f.seek(f.tell())  # seekable() can claim more than seek() does
        except (OSError, ValueError) as e:  # io.UnsupportedOperation is both
            seekable, why = False, f" ({type(e).__name__}: {first_line(e)[:200]})"
        if not seekable:
            raise DecodeError(self.name, f"this file object cannot seek{why}; {_SEEKABLE_FIX}", "sources")
        self.f = f

    @property
    def size(self) -> int:
        pos = self.f.tell()
        self.f.seek(0, io.SEEK_END)
        end = self.f.tell()
        self.f.seek(pos)
        return end - pos

    def open(self):
        return _Borrowed(self.f, self.name)


_lock = threading.Lock()


class UrlSource(Source):
    """An object behind an fsspec URL: fetch='range' reads `RangeFile` blocks, 'whole' one request for all of it;
    `plan` [(start, end), ...] fetches those ranges first (`access.ByteIndex.plan`)."""

    kind = "url"

    def __init__(
        self,
        url: str,
        fetch: str = "range",
        block_size: int = DEFAULT_BLOCK,
        storage_options: dict | None = None,
        plan: list | None = None,
    ):
        super().__init__(display_name(url))
        if fetch not in ("range", "whole"):
            raise ValueError(f"fetch must be 'range' or 'whole', got {fetch!r}")
        self.url, self.fetch, self.block_size, self.plan = url, fetch, block_size, plan
        self.fs, self.fs_path = _url_fs(url, storage_options)
        self._info, self._data = None, None

    def _stat(self) -> dict:
        if self._info is None:
            try:
                self._info = dict(self.fs.info(self.fs_path))
            except FileNotFoundError as e:
                raise DecodeError(self.name, "no such object", "sources") from e
            except Exception as e:
                raise DecodeError(
                    self.name, f"cannot stat the object ({type(e).__name__}: {first_line(e)[:200]})", "sources"
                ) from e
        return self._info

    @property
    def size(self) -> int:
        return int(self._stat()["size"])

    @property
    def key(self):
        """The object's identity: its URL, size and version (ETag, version id or modification time, where the
        store gives one), so an object overwritten by another of the same size is another object."""
        info = self._stat()
        version = next((info[k] for k in ("VersionId", "ETag", "etag", "LastModified", "mtime") if info.get(k)), None)
        return ("url", self.url, self.size, str(version) if version is not None else None)

    def _get(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.fs_path, start=start, end=end)

    def open(self):
        size = self.size
        if self.fetch == "whole":
            if self._data is None:  # one request for the object, kept for the probe and the decode
                self._data = self.fs.cat_file(self.fs_path)
                self.stats.add(len(self._data))
            f = io.BytesIO(self._data)
            f.name = self.name
            return f
        # a plan (`access.ByteIndex.plan`): its byte ranges first, one request each; other reads on demand
        prefetched = {}
        for a, b in self.plan or ():
            prefetched[a] = self._get(a, b)
            self.stats.add(b - a)
        return RangeFile(self._get, size, self.name, self.block_size, self.stats, prefetched=prefetched)


_tar_index: dict = {}
TAR_INDEXES = 256  # shard indexes kept per process: a long-running worker that visits many shards stays bounded


def tar_index(shard, storage_options: dict | None = None, block_size: int = 64 * 1024) -> dict:
    """{member name: (data offset, size)} of the uncompressed tar `shard` (a path or URL), from its headers only;
    cached per shard identity (`TAR_INDEXES` most recent). Used by `TarMember` and `shards.iter_shard` (notebook 24)."""
    import tarfile

    src = resolve(shard, storage_options=storage_options, block_size=block_size)
    if src.kind not in ("path", "url"):
        raise ValueError(f"a shard is a path or a URL, got {src.name}")
    key = src.key
    with _lock:
        if key in _tar_index:
            _tar_index[key] = _tar_index.pop(key)  # most recently used last
            return _tar_index[key]
    try:
        with src.open() as f, tarfile.open(fileobj=f, mode="r:") as tar:
            index = {m.name: (m.offset_data, m.size) for m in tar if m.isfile()}
    except (tarfile.TarError, OSError) as e:
        raise DecodeError(
            src.name, f"not a readable uncompressed tar ({type(e).__name__}: {first_line(e)[:200]})", "sources"
        ) from e
    with _lock:
        _tar_index[key] = index
        while len(_tar_index) > TAR_INDEXES:
            _tar_index.pop(next(iter(_tar_index)))
    return index


class TarSource(Source):
    kind = "tar"

    def __init__(
        self,
        member: TarMember,
        storage_options: dict | None = None,
        block_size: int = DEFAULT_BLOCK,
        fetch: str = "range",
    ):
        super().__init__(display_name(member))
        self.member = member
        self.shard = resolve(member.shard, storage_options=storage_options, block_size=block_size, fetch=fetch)
        self.stats = self.shard.stats  # the member's bytes are the shard's
        self._data = None
        self.storage_options = storage_options

    def _where(self) -> tuple[int, int]:
        index = tar_index(self.member.shard, self.storage_options)
        if self.member.member not in index:
            raise DecodeError(self.name, f"the shard has no member {self.member.member!r}", "sources")
        return index[self.member.member]

    @property
    def key(self):
        return ("tar", self.shard.key, self.member.member)

    @property
    def size(self) -> int:
        return self._where()[1]

    def open(self):
        offset, size = self._where()
        if isinstance(self.shard, UrlSource) and self.shard.fetch == "whole":
            if self._data is None:  # the whole member, one request, kept for the probe and the decode
                self._data = self.shard._get(offset, offset + size)
                self.stats.add(len(self._data))
            f = io.BytesIO(self._data)
            f.name = self.name
            return f
        return Window(self.shard.open(), offset, size, self.name)


def resolve(
    source, storage_options: dict | None = None, block_size: int = DEFAULT_BLOCK, fetch: str = "range"
) -> Source:
    """The `Source` behind anything the playbook takes as a video (see the module docstring). Raises
    DecodeError for something that is none of them. Introduced in notebook 24."""
    if isinstance(source, Source):
        return source
    if isinstance(source, TarMember):
        return TarSource(source, storage_options, block_size, fetch)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return BytesSource(source)
    if isinstance(source, os.PathLike):
        return PathSource(source)
    if isinstance(source, str):
        if source.startswith("tar://"):
            if "::" not in source:
                raise ValueError(f"expected 'tar://<member>::<shard>', got {source!r}")
            member, shard = source[len("tar://") :].split("::", 1)
            return TarSource(TarMember(shard, member), storage_options, block_size, fetch)
        if source.startswith("file://") or "://" not in source:
            return PathSource(source)
        return UrlSource(source, fetch, block_size, storage_options)
    if hasattr(source, "read"):
        return FileSource(source)
    raise DecodeError(
        display_name(source),
        f"not a video source: {type(source).__name__} (give a path, bytes, a file-like object, a TarMember or a URL)",
        "sources",
    )
