import os
from functools import lru_cache
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def media_cache(tmp_path_factory):
    """One generated media set for the whole run, shared with notebook kernels through the env."""
    root = os.environ.get("PLAYBOOK_TEST_MEDIA_DIR") or str(tmp_path_factory.mktemp("media"))
    os.environ["PLAYBOOK_MEDIA_DIR"] = root
    return Path(root)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout's thread method (pyproject.toml), with the test's child processes killed first: it ends a
    hung worker with os._exit, but a child that inherited the worker's pipes (a process pool's, a hung encoder)
    kept them open, and xdist waited on them, never seeing the worker go (seen in a fresh-clone run)."""
    if settings.method != "thread":
        return None
    import threading

    import psutil
    import pytest_timeout

    def expire():
        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
        pytest_timeout.timeout_timer(item, settings)

    timer = threading.Timer(settings.timeout, expire)
    timer.daemon = True

    def cancel():
        timer.cancel()
        timer.join()

    item.cancel_timeout = cancel
    timer.start()
    return True


@lru_cache(maxsize=None)
def has_nvdec() -> bool:
    """Whether this machine has an NVIDIA GPU whose NVDEC library (libnvcuvid) loads."""
    from playbook_utils import env

    return env.capabilities()["nvdec"]


def pytest_collection_modifyitems(config, items):
    """The one place the `gpu` marker is acted on: where there is no NVDEC, every test marked `gpu` is skipped,
    with the reason (a test may add its own, finer condition: a GPU backend installed)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not has_nvdec():
        skip = pytest.mark.skip(reason="marked gpu: needs an NVIDIA GPU whose NVDEC library (libnvcuvid) loads")
        for item in gpu:
            item.add_marker(skip)
