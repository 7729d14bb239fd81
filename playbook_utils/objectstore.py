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


@contextlib.contextmanager
def local_s3(bucket: str = "playbook"):
    """Run moto's S3 server on 127.0.0.1 while the block runs; yield the endpoint URL ('http://127.0.0.1:N').

    The bucket `bucket` exists on entry. The AWS_* variables are set for the block and restored after it,
    and s3fs's cached clients are dropped on both sides, so no client outlives its endpoint. Notebook 24.
    """
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # no request log lines in outputs
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "playbook",
                       "AWS_SECRET_ACCESS_KEY": "playbook", "AWS_DEFAULT_REGION": "us-east-1"})
    _clear_s3fs_cache()
    try:
        import fsspec

        fsspec.filesystem("s3").mkdir(bucket)
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _clear_s3fs_cache()
        server.stop()


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
