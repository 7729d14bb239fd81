import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def media_cache(tmp_path_factory):
    """One generated media set for the whole run, shared with notebook kernels through the env."""
    root = os.environ.get("PLAYBOOK_TEST_MEDIA_DIR") or str(tmp_path_factory.mktemp("media"))
    os.environ["PLAYBOOK_MEDIA_DIR"] = root
    return Path(root)


def has_nvdec() -> bool:
    from playbook_utils import env

    return env.capabilities()["nvdec"]
