"""decord 0.6 and decord2, its maintained fork, install the same `decord` module: the adapter tells them apart by the
metadata beside the module, and its refusals follow the build it finds (issue 59; notebook 11, section 7)."""

import json
import os
import subprocess
import sys

import pytest

from playbook_utils.bench import matrix, media
from playbook_utils.decoders import decord as builds


def test_the_build_is_read_from_the_metadata_beside_the_module(tmp_path):
    (tmp_path / "decord").mkdir()
    assert builds.installed(tmp_path) is None
    (tmp_path / "decord2-3.4.0.dist-info").mkdir()
    assert builds.installed(tmp_path) == ("decord2", "3.4.0")
    other = tmp_path / "other"
    (other / "decord-0.6.0.dist-info").mkdir(parents=True)
    assert builds.installed(other) == ("decord", "0.6.0")  # 'decord-' never matches decord2's folder


def _why(path, env=None) -> str | None:
    code = f"from playbook_utils.decoders import why_unavailable; import json; print(json.dumps(why_unavailable('decord', 'cpu', {str(path)!r})))"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    assert run.returncode == 0, run.stderr[-1500:]
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.media
def test_the_refusals_follow_the_build_found_and_name_it(tmp_path):
    other = builds.alternative()
    here = builds.installed()
    if here is None or other is None:
        pytest.skip("needs decord installed and the other build beside it (make setup puts it there)")
    clips = matrix.build_cases(tmp_path, 256, 144, 24, names=["av1 mp4", "h264 mp4, edit list"])
    if "av1 mp4" not in clips:
        pytest.skip("this PyAV cannot encode AV1")
    by_build = {here: _why(clips["av1 mp4"]), other[:2]: _why(clips["av1 mp4"], {"PYTHONPATH": str(other[2])})}
    old = next(b for b in by_build if b[0] == "decord")
    new = next(b for b in by_build if b[0] == "decord2")
    assert by_build[old] and by_build[old].startswith(f"decord {old[1]} ")  # no AV1 decoder in decord 0.6
    assert by_build[new] is None  # decord2's FFmpeg 8 reads AV1 exactly (notebook 11)
    hidden = clips["h264 mp4, edit list"]
    assert _why(hidden).startswith(f"{here[0]} {here[1]} ")  # both count hidden frames: refused, by name
    assert _why(hidden, {"PYTHONPATH": str(other[2])}).startswith(f"{other[0]} {other[1]} ")
    assert media.probe(hidden).edit_list_hidden > 0
