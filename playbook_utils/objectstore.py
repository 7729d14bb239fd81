"""A real S3 endpoint on this machine for tests and notebook 24: moto's server on localhost, no cloud account.

`local_s3()` starts the server on 127.0.0.1 at a free port and points this process's S3 clients (and the
loader workers it starts) at it through the standard AWS_* environment variables, the same variables a
user sets for a real bucket or an S3-compatible store; `upload` puts files there through s3fs. Nothing
leaves the machine.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def _clear_s3fs_cache() -> None:
    with contextlib.suppress(ImportError):
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()


class LocalS3:
    """moto's S3 server on 127.0.0.1 at a free port: `start()` returns the endpoint URL ('http://127.0.0.1:N')
    with the bucket `bucket` made and this process's S3 clients pointed at it through the AWS_* variables;
    `stop()` restores the variables and stops the server. s3fs's cached clients are dropped on both sides,
    so no client outlives its endpoint. A notebook, whose cells cannot share one `with` block, calls the
    two itself (notebook 24); elsewhere use `local_s3()`."""

    def __init__(self, bucket: str = "playbook"):
        self.bucket, self.server, self.saved, self.endpoint = bucket, None, {}, None

    def start(self) -> str:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log lines in outputs
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.saved = {k: os.environ.get(k) for k in _ENV}
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": "playbook",
                "AWS_SECRET_ACCESS_KEY": "playbook",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        _clear_s3fs_cache()
        import fsspec

        fsspec.filesystem("s3").mkdir(self.bucket)
        return self.endpoint

    def stop(self) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _clear_s3fs_cache()
        if self.server is not None:
            self.server.stop()
            self.server = None


@contextlib.contextmanager
def local_s3(bucket: str = "playbook"):
    """Run moto's S3 server on 127.0.0.1 while the block runs; yield the endpoint URL (`LocalS3`). Notebook 24."""
    s3 = LocalS3(bucket)
    try:
        yield s3.start()
    finally:
        s3.stop()


def upload(paths, prefix: str) -> list[str]:
    """Copy local files to `prefix` (e.g. 's3://playbook/videos/'); return their URLs, in order (notebook 24)."""
    import fsspec

    fs, _ = fsspec.core.url_to_fs(prefix)
    urls = []
    for p in paths:
        url = prefix.rstrip("/") + "/" + Path(p).name
        fs.put_file(str(p), url)
        urls.append(url)
    return urls
