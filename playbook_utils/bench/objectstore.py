"""A real S3 endpoint on this machine for tests and notebook 24: moto's server on localhost, no cloud account.
`LocalS3().start()` starts it and points this process's S3 clients at it through the standard AWS_* variables; `upload` puts
files there. Nothing leaves the machine."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from pathlib import Path

__all__ = ["LocalS3", "upload"]

_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def _clear_s3fs_cache() -> None:
    with contextlib.suppress(ImportError):
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()


# One server at a time per process. `_saved`: the caller's own AWS_* values, taken when the first server
# started (not from a server's fake ones), given back when the last one stops or at interpreter exit.
_running: LocalS3 | None = None
_saved: dict | None = None
_lock = threading.RLock()
_atexit_registered = False


def _give_back_env() -> None:
    global _saved
    for k, v in (_saved or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _saved = None
    _clear_s3fs_cache()


def _stop_at_exit() -> None:
    """Stop the running server, if any, and give the caller's AWS_* variables back (registered with atexit when
    the first server starts: a kernel that exits between start and stop leaves nothing pointed at moto)."""
    with _lock:
        if _running is not None:
            _running.stop()
        elif _saved is not None:
            _give_back_env()


class LocalS3:
    """moto's S3 server on 127.0.0.1 at a free port: `start()` makes `bucket`, points the AWS_* variables at it and
    returns the endpoint URL; `stop()` gives the caller's variables back (notebook 24). Safe
    to re-run: one server per process."""

    def __init__(self, bucket: str = "playbook"):
        self.bucket, self.server, self.endpoint = bucket, None, None

    def start(self) -> str:
        global _running, _saved, _atexit_registered
        import logging

        from moto.server import ThreadedMotoServer

        with _lock:
            if _running is self and self.server is not None:
                return self.endpoint
            if _running is not None:
                _running._stop_server()
            if _saved is None:
                _saved = {k: os.environ.get(k) for k in _ENV}
            if not _atexit_registered:
                atexit.register(_stop_at_exit)
                _atexit_registered = True
            logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log lines in outputs
            self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self.server.start()
            _running = self
            host, port = self.server.get_host_and_port()
            self.endpoint = f"http://{host}:{port}"
            os.environ.update(zip(_ENV, (self.endpoint, "playbook", "playbook", "us-east-1")))
            _clear_s3fs_cache()
            import fsspec

            fs = fsspec.filesystem("s3")
            if not fs.exists(self.bucket):  # made by an earlier server of this process: moto keeps it
                fs.mkdir(self.bucket)
            return self.endpoint

    def _stop_server(self) -> None:
        global _running
        if self.server is not None:
            self.server.stop()
            self.server = None
        if _running is self:
            _running = None

    def stop(self) -> None:
        with _lock:
            was_running = _running is self  # else never started, stopped already, or superseded by a newer server
            self._stop_server()
            if was_running:
                _give_back_env()


def upload(paths, prefix: str) -> list[str]:
    """Copy local files to `prefix` (e.g. 's3://playbook/videos/'); return their URLs, in order (notebook 24)."""
    import fsspec

    fs, _ = fsspec.core.url_to_fs(prefix)
    paths = [str(p) for p in paths]
    urls = [prefix.rstrip("/") + "/" + Path(p).name for p in paths]
    for path, url in zip(paths, urls):
        fs.put_file(path, url)
    return urls
