import pytest

from playbook_utils import media, nvdec
from tests.conftest import has_nvdec


def test_probe_answers_with_data_gpu_or_not(tmp_path):
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 160, 96, num_frames=8)
    for lib in nvdec.PROBE_LIBRARIES:
        r = nvdec.probe(lib, clip)
        if has_nvdec():  # every NVDEC generation decodes H.264
            assert r["ok"] and r["frames"] == 8 and r["wrong_frames"] == 0, r
        else:
            assert r["ok"] is False and r["error"], r


def test_probe_of_a_missing_file_fails_cleanly(tmp_path):
    r = nvdec.probe("pyav_hwaccel", tmp_path / "missing.mp4")
    assert r["ok"] is False and r["error"]


@pytest.mark.gpu
@pytest.mark.skipif(not has_nvdec(), reason="needs an NVIDIA GPU whose libnvcuvid loads")
def test_nvdec_decodes_h264_frame_exact(tmp_path):
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 320, 180, num_frames=30)
    r = nvdec.probe("pynvvideocodec", clip)
    assert r["ok"] and r["frames"] == 30 and r["wrong_frames"] == 0


def test_saturation_run_without_nvdec_is_a_failed_row_not_a_crash(tmp_path):
    from playbook_utils import media

    if has_nvdec():
        pytest.skip("this machine has NVDEC: the failure path cannot be shown here")
    clip = media.make_clip(tmp_path / "c.mp4", "h264", 256, 144, num_frames=24)
    r = nvdec.saturate(clip, processes=2, threads=1, seconds=0.2)
    assert r["fps"] is None and r["frames"] == 0 and r["error"]
    c = nvdec.ceiling(clip, ((1, 1),), seconds=0.2)
    assert c["fps"] is None and c["saturated"] is False and len(c["rows"]) == 1
