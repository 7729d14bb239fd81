"""The storage read probe of notebooks 00 and 30 measures without leaving anything in the reader's folder."""

import os

from playbook_utils.bench import bandwidth


def _tree(folder):
    """{name: (bytes, mtime_ns)} of every entry under `folder`, the folder itself included."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
        for p in [folder, *folder.rglob("*")]
    }


def _watch_reads(monkeypatch, folder):
    """Record, at every timed read, the file read and what `folder` holds at that moment."""
    seen, real = [], bandwidth._read_all

    def read_all(path, *a, **k):
        seen.append((path, sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))))
        return real(path, *a, **k)

    monkeypatch.setattr(bandwidth, "_read_all", read_all)
    return seen


def test_the_readers_files_are_timed_as_they_are_and_nothing_is_written_there(tmp_path, monkeypatch):
    # issue 29: with VIDEO_DIR the probe wrote a scratch file (1 GiB in full mode) into the reader's folder
    videos = tmp_path / "videos"
    (videos / "sub").mkdir(parents=True)
    for i, name in enumerate(["a.mp4", "b.mkv", "sub/c.mp4"]):
        (videos / name).write_bytes(os.urandom((3 + i) * 2**20))
        os.utime(videos / name, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    os.utime(videos, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    files = sorted(p for p in videos.rglob("*") if p.is_file())
    before = _tree(videos)
    seen = _watch_reads(monkeypatch, videos)
    got = bandwidth.storage_read_bandwidth(videos, 8, files=files)
    assert "error" not in got and got["cold_mb_s"] > 0 and got["warm_mb_s"] > 0
    assert got["files"] == 3 and 8 <= got["read_mib"] < 16  # 8 MiB asked for: a and b, and c's first block
    assert {path for path, _ in seen} <= set(files)  # only the reader's own files were read
    assert all(
        listing == sorted(k for k in before if k != ".") for _, listing in seen
    )  # nothing appeared there meanwhile
    assert _tree(videos) == before  # the same entries, bytes and mtimes, the folder's own mtime included


def test_without_the_readers_files_the_scratch_file_goes_in_a_temporary_folder_that_is_removed(tmp_path, monkeypatch):
    media = tmp_path / "media"
    media.mkdir()
    (media / "clip.mp4").write_bytes(b"generated")
    seen = _watch_reads(monkeypatch, media)
    got = bandwidth.storage_read_bandwidth(media, 2)
    scratch = {path for path, _ in seen}
    assert len(scratch) == 1 and next(iter(scratch)).parent.parent == media  # media/<temporary folder>/<file>
    assert "error" not in got and got["cold_mb_s"] > 0 and got["read_mib"] == 2
    assert sorted(p.name for p in media.iterdir()) == ["clip.mp4"]  # the folder went with the file
