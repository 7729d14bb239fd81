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
