"""The two exceptions the playbook raises for video trouble (introduced in 00 and 10-14)."""

from __future__ import annotations

import os
import re

__all__ = ["BackendUnavailable", "clipped", "DecodeError", "describe", "first_line", "last_line", "redact"]

# Query parameters whose values are secrets in a signed or credentialed URL, matched case-insensitively:
# AWS SigV4 (X-Amz-Credential, -Signature, -Security-Token) and SigV2 (AWSAccessKeyId, Signature), GCS V4
# (X-Goog-Credential, -Signature) and V2 (GoogleAccessId, Signature), Azure SAS (sig; skoid/sktid name the
# signing key), and the usual bearer/API token names. The validity window and the permissions (Expires,
# X-Amz-Date, X-Amz-Expires, Azure's se/st/sp/sv) stay readable: they are no secret, and they explain a
# link that has expired.
SECRET_PARAMS = (
    "x-amz-credential",
    "x-amz-signature",
    "x-amz-security-token",
    "x-goog-credential",
    "x-goog-signature",
    "awsaccesskeyid",
    "googleaccessid",
    "signature",
    "sig",
    "skoid",
    "sktid",
    "token",
    "access_token",
    "id_token",
    "api_key",
    "apikey",
    "key",
    "password",
    "secret",
)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@")
# a value runs to the next parameter, fragment or blank; a ':' ',' '.' ')' or ']' that ends it belongs to the text
_SECRET_QUERY = re.compile(
    r"(?i)([?&;](?:" + "|".join(re.escape(p) for p in SECRET_PARAMS) + r")=)[^&;#\s'\"<>]*[^&;#\s'\"<>:,.)\]]"
)


def redact(text):
    """`text` with the secrets of every URL in it replaced by '***' (user info, values of `SECRET_PARAMS`),
    everything else kept; None stays None. Every `DecodeError` and `BackendUnavailable` message goes through it."""
    if text is None:
        return None
    text = str(text)
    if "://" not in text and "=" not in text:
        return text
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


# "path [backend]: cause", "[backend]: cause" or "path: cause": how `_VideoError` writes its message
_MESSAGE = re.compile(r"(?s)^(?:(?P<path>.*?) )?\[(?P<backend>[\w.-]+)\]: (?P<cause>.*)$")


class _VideoError(Exception):
    """Base class: every message names the file, the backend and the cause, URL secrets `redact`ed. It keeps its
    type, path, backend and cause across processes: it pickles, and survives DataLoader's re-raise of a worker's
    error (notebook 23)."""

    def __init__(self, path: str | os.PathLike | None, cause: str | None = None, backend: str | None = None):
        if cause is None and backend is None and isinstance(path, str):
            # One argument: a worker's error rebuilt from its formatted traceback (DataLoader's re-raise).
            path = redact(path)
            self.path, self.backend, self.cause = _fields_from_traceback(path, type(self))
            super().__init__(path)
            return
        path = None if path is None else os.fspath(path)
        self.path = redact(path) if isinstance(path, str) else path
        self.backend = backend
        self.cause = redact(cause)
        where = [] if self.path is None else [f"{self.path}"]
        if backend:
            where.append(f"[{backend}]")
        super().__init__(f"{' '.join(where)}: {self.cause}" if where else self.cause)

    def __reduce__(self):
        return type(self), (self.path, self.cause, self.backend)


def _fields_from_traceback(text: str, cls) -> tuple[str | None, str | None, str]:
    """(path, backend, cause) of the last `cls` error in a formatted traceback; for a text that holds none,
    (None, None, text)."""
    mark = f"{cls.__module__}.{cls.__qualname__}: "
    at = text.rfind(mark)
    if at < 0:
        return None, None, text
    message = text[at + len(mark) :].strip()
    found = _MESSAGE.match(message)
    if found:
        return found["path"], found["backend"], found["cause"]
    path, sep, cause = message.partition(": ")
    return (path, None, cause) if sep else (None, None, message)


class DecodeError(_VideoError):
    """The file is missing, unreadable, corrupt or unsupported, or lacks a requested frame."""


class BackendUnavailable(_VideoError):
    """The library, the hardware or the codec path needed for this request is not here."""


def first_line(text, default: str = "") -> str:
    """The first line of `text`, stripped; `default` when it is empty. Long library messages in one line."""
    return (str(text).strip().splitlines() or [default])[0]


def clipped(text: str, limit: int = 400) -> str:
    """`text` cut to at most `limit` characters at a word's end, with ' (...)' where it was cut: a long library
    message kept readable where a child process reports it."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 6].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut} (...)"


def last_line(text, default: str = "no output") -> str:
    """The last line of `text` (a dead child's stderr ends with its cause); `default` when it is empty."""
    return (str(text).strip().splitlines() or [default])[-1]


def _is_ffmpeg_error(e: BaseException) -> bool:
    """PyAV's FFmpegError or a subclass, found without importing av (the playbook runs where it is missing)."""
    return any(c.__name__ == "FFmpegError" and c.__module__ == "av.error" for c in type(e).__mro__)


def describe(e: BaseException) -> str:
    """'TypeName: first line of its message': how the playbook reports another library's exception. A first line
    ending in ':' takes the next with it, an empty message says so, and FFmpeg's errors through PyAV keep FFmpeg's
    words only."""
    if _is_ffmpeg_error(e) and getattr(e, "strerror", None):
        return f"{type(e).__name__}: {e.strerror}"
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    elif not text.rstrip(" :") or text.endswith(":"):
        text = f"{text.rstrip(' :')} (the library gave no reason)".lstrip()
    return f"{type(e).__name__}: {text}"
