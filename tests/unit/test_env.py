import json

import pytest

from playbook_utils import env
from playbook_utils.tools import setup_env


@pytest.mark.slow
def test_report_is_json_ready_and_complete():
    rep = env.report()
    json.dumps(rep)
    assert set(rep["libraries"]) == {"torch", *env.LIBRARIES}
    for info in rep["libraries"].values():
        assert info["importable"] == (info["error"] is None)
        assert info["importable"] == (info["version"] is not None)
    assert rep["cpu_usable_cores"] >= 1 and rep["ram_total_gib"] > 0
    assert set(rep["driver_video_libraries"]) == {"nvcuvid", "nvidia_encode"}
    text = env.format_report(rep)
    for label in ("CPU", "RAM", "PyAV", "DALI", "PyNvVideoCodec", "libnvcuvid"):
        assert label in text


def test_a_missing_library_is_reported_not_raised():
    info = env.check_import("no_such_decoder_library_xyz")
    assert info == {
        "importable": False,
        "version": None,
        "error": "ModuleNotFoundError: No module named 'no_such_decoder_library_xyz'",
    }


def test_capabilities_follow_the_gpu_report():
    rep = env.report(probe_libraries=False)
    caps = env.capabilities(rep)
    assert caps["cuda"] == rep["gpu"]["available"]
    assert caps["nvdec"] == (caps["cuda"] and rep["driver_video_libraries"]["nvcuvid"]["loads"])
    if not rep["gpu"]["available"]:
        assert rep["gpu"]["error"]


def test_resolve_device():
    assert env.resolve_device("cpu")[0] == "cpu"
    dev, note = env.resolve_device("cuda")
    torch = pytest.importorskip("torch")
    assert dev == ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cpu":
        assert "DEVICE='cuda'" in note and note != env.resolve_device("cpu")[1]  # the request, not a cpu one
    with pytest.raises(ValueError, match="DEVICE"):
        env.resolve_device("tpu")


@pytest.mark.parametrize(
    "torch_version,cuda,expected",
    [
        ("2.13.0", None, "torchcodec==0.13.*"),
        ("2.9.1", None, "torchcodec==0.9.*"),
        ("2.16.0", None, None),  # no CPU build of TorchCodec for this torch on PyPI
        ("2.11.0", "13.0", "torchcodec>=0.16"),
        ("2.14.1", "12.8", "torchcodec>=0.16"),
        ("2.8.0", "12.8", "torchcodec==0.8.*"),
    ],
)
def test_torchcodec_matches_torch(torch_version, cuda, expected):
    spec, why = setup_env.torchcodec_spec(torch_version, cuda)
    assert spec == expected and why


@pytest.mark.parametrize(
    "cuda,expected", [(None, "nvidia-dali-cuda120"), ("12.8", "nvidia-dali-cuda120"), ("13.0", "nvidia-dali-cuda130")]
)
def test_dali_wheel_matches_cuda_major(cuda, expected):
    assert setup_env.dali_spec(cuda) == expected


def test_requirement_check():
    assert setup_env.satisfied("pip")
    assert setup_env.satisfied("pip>=1")
    assert not setup_env.satisfied("pip<1")
    assert not setup_env.satisfied("no-such-distribution-xyz")


def test_nvml_handle_follows_cuda_visible_devices(monkeypatch):
    """NVML numbers every GPU and ignores CUDA_VISIBLE_DEVICES: cuda:0 of a job given GPU 1 is NVML's GPU 1."""
    import sys
    import types

    fake = types.ModuleType("pynvml")
    fake.nvmlInit = lambda: None
    fake.nvmlDeviceGetHandleByIndex = lambda i: ("index", i)
    fake.nvmlDeviceGetHandleByUUID = lambda u: ("uuid", u)
    monkeypatch.setitem(sys.modules, "pynvml", fake)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert env.nvml_handle(1)[1] == ("index", 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert env.nvml_handle(0)[1] == ("index", 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 2")
    assert env.nvml_handle(1)[1] == ("index", 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f1c,GPU-aa02")
    assert env.nvml_handle(1)[1] == ("uuid", "GPU-aa02")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4b1e")  # a MIG slice: NVML's device handle would be wrong
    assert env.nvml_handle(0) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert env.nvml_handle(1) is None  # no such visible device


def test_library_versions_come_from_the_installed_metadata_without_importing():
    import sys

    import av

    from playbook_utils import env

    before = set(sys.modules)
    versions = env.library_versions()
    assert not {m for m in env.LIBRARIES if m not in before} & set(sys.modules)  # none of them imported here
    assert set(versions) == {"torch", *env.LIBRARIES}
    assert versions["av"] == av.__version__ and versions["torch"] is not None
