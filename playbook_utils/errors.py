"""The two exceptions the playbook raises for video trouble (introduced in 00 and 10-14)."""

from __future__ import annotations

import os


class _VideoError(Exception):
    """Base class: every message names the file, the backend and the cause."""

    def __init__(self, path: str | os.PathLike | None, cause: str, backend: str | None = None):
        self.path = None if path is None else os.fspath(path)
        self.backend = backend
        self.cause = cause
        parts = []
        if self.path is not None:
            parts.append(f"{self.path}")
        if backend:
            parts.append(f"[{backend}]")
        parts.append(cause)
        super().__init__(": ".join([" ".join(parts[:-1]), parts[-1]]) if len(parts) > 1 else cause)


class DecodeError(_VideoError):
    """The file is missing, unreadable, corrupt or unsupported, or lacks a requested frame."""


class BackendUnavailable(_VideoError):
    """The library, the hardware or the codec path needed for this request is not here."""


def first_line(text, default: str = "") -> str:
    """The first line of `text`, stripped; `default` when it is empty. Long library messages in one line."""
    return (str(text).strip().splitlines() or [default])[0]


def last_line(text, default: str = "no output") -> str:
    """The last line of `text` (a dead child's stderr ends with its cause); `default` when it is empty."""
    return (str(text).strip().splitlines() or [default])[-1]


def describe(e: BaseException) -> str:
    """'TypeName: first line of its message': how the playbook reports another library's exception."""
    return f"{type(e).__name__}: {first_line(e)}"
