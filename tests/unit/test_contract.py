"""The pieces every room shares, tested without video: the device type, the adapter contract and its refusal
tables, and the child-process helper with its outcomes."""

import dataclasses
import sys

import pytest

from playbook_utils import child
from playbook_utils.decoders import ADAPTERS, BACKENDS, adapter, base, traits
from playbook_utils.device import Device
from tests.sentences import numbers, sizes


# --------------------------------------------------------------------------- Device


@pytest.mark.parametrize(
    "spec, kind, index, text",
    [
        ("cpu", "cpu", None, "cpu"),
        ("cuda", "cuda", None, "cuda"),
        ("cuda:3", "cuda", 3, "cuda:3"),
        (" cuda:0 ", "cuda", 0, "cuda:0"),
    ],
)
def test_a_device_parses_and_prints_as_torch_writes_it(spec, kind, index, text):
    d = Device.parse(spec)
    assert (d.kind, d.index, str(d)) == (kind, index, text)
    assert Device.parse(d) is d and d.is_cuda == (kind == "cuda")


def test_a_device_names_what_it_does_not_parse():
    for bad in ("gpu", "cuda:", "cuda:x", "cpu:1", "cuda:-1", ""):
        with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
            Device.parse(bad)
    with pytest.raises(ValueError, match="no GPU index"):
        Device("cpu", 0)
    assert Device.parse("cuda").ordinal == 0 and Device.parse("cuda:2").ordinal == 2
    with pytest.raises(ValueError, match="no GPU ordinal"):
        Device.parse("cpu").ordinal


def test_auto_is_the_gpu_where_torch_sees_one(monkeypatch):
    from playbook_utils import device

    monkeypatch.setattr(device, "cuda_visible", lambda: True)
    assert Device.parse("auto") == Device("cuda")
    monkeypatch.setattr(device, "cuda_visible", lambda: False)
    assert Device.parse("auto") == Device("cpu")


# --------------------------------------------------------------------------- the adapter contract


@dataclasses.dataclass
class Info:  # the fields of media.VideoInfo the refusals read
    codec: str = "h264"
    container: str = "mov,mp4,m4a,3gp,3g2,mj2"
    pix_fmt: str = "yuv420p"
    width: int = 320
    height: int = 180
    b_frames: bool = True
    open_gop: bool = False
    variable_frame_rate: bool = False
    rotation: int = 0
    edit_list_hidden: int = 0
    video_streams: int = 1
    stream: int = 0
    best_stream: int = 0


def test_every_backend_is_registered_once_with_a_whole_contract():
    assert BACKENDS == ("pyav", "decord", "torchcodec", "pynvvideocodec", "dali", "spdl")
    vocabulary = {"vfr", "10-bit", "rotated", "b-frames", "open-gop", "edit-list", "several-streams"}
    for name, ad in ADAPTERS.items():
        assert isinstance(ad, base.Adapter) and ad.NAME == name and adapter(name) is ad
        assert ad.IMPORT and set(ad.DEVICES) <= {"cpu", "cuda"} and set(ad.CODECS) <= set(ad.DEVICES)
        for row in ad.KNOWN_WRONG:  # every trait a row names is one `traits` can report
            assert row.traits and all(
                t in vocabulary or t.startswith(("codec:", "container:", "chroma:")) for t in row.traits
            )
            assert set(row.devices) <= set(ad.DEVICES) and row.why
    with pytest.raises(ValueError, match="unknown backend 'ffmpeg'"):
        adapter("ffmpeg")


def test_traits_name_what_a_library_may_get_wrong():
    info = Info(open_gop=True, pix_fmt="yuv420p10le", rotation=90, edit_list_hidden=6, video_streams=2)
    assert traits(info) == {
        "codec:h264",
        "container:mov",
        "b-frames",
        "open-gop",
        "10-bit",
        "rotated",
        "edit-list",
        "several-streams",
    }
    assert traits(Info(pix_fmt="yuv444p")) == {"codec:h264", "container:mov", "b-frames", "chroma:444"}


def test_a_known_wrong_row_refuses_its_traits_on_its_devices_until_the_version_that_fixed_it():
    row = base.known_wrong(
        ("open-gop", "codec:hevc"), "wrong after a seek", devices=("cuda",), seen="1.0", fixed="1.2.0"
    )
    hevc_open = {"codec:hevc", "open-gop", "container:mov"}
    assert row.applies(hevc_open, "cuda", "1.1.9") and row.applies(hevc_open, "cuda", "1.1.0+cu130")
    assert not row.applies(hevc_open, "cuda", "1.2.0") and not row.applies(hevc_open, "cuda", "2.0")
    assert not row.applies(hevc_open, "cpu", "1.0") and not row.applies({"codec:hevc"}, "cuda", "1.0")
    assert base.known_wrong("edit-list", "x").applies({"edit-list"}, "cpu", "99.0")  # no fix known: every version
    assert base.version_tuple("0.13.0+cpu") == (0, 13, 0) and base.version_tuple(None) == ()


class Toy(base.Adapter):
    NAME, IMPORT, LABEL = "toy", "json", "Toy"
    DEVICES = ("cpu", "cuda")
    CODECS = {"cpu": ("vp9",)}
    KNOWN_WRONG = (base.known_wrong("edit-list", "toy miscounts edit lists"),)
    checks = 0

    def _check_device(self, kind):
        Toy.checks += 1
        return "no toy GPU" if kind == "cuda" else None


def test_the_machine_is_checked_once_and_the_file_every_time(monkeypatch):
    monkeypatch.setattr(base, "cuda_visible", lambda: True)
    toy, Toy.checks = Toy(), 0
    assert [toy.why_unavailable("cuda:1") for _ in range(3)] == ["no toy GPU"] * 3 and Toy.checks == 1
    assert toy.why_unavailable("cpu") is None and Toy.checks == 2
    assert toy.why_unavailable("cpu", Info(codec="vp9")) is None
    assert (
        toy.why_unavailable("cpu", Info()) == "Toy's CPU video decoder does not take h264 (only vp9); use device='cuda'"
    )
    assert toy.why_unavailable("cpu", Info(codec="vp9", edit_list_hidden=3)) == "toy miscounts edit lists"
    other_stream = toy.why_unavailable("cpu", Info(codec="vp9", stream=0, best_stream=1))
    assert numbers(other_stream) == ["1", "0"]  # the stream it always decodes, and the one asked for
    assert Toy.checks == 2


class ForwardToy(Toy):
    FORWARD_ON = ("cpu",)
    KNOWN_WRONG = (base.known_wrong("open-gop", "toy seeks wrong in open GOP", reads="seek"),)


def test_a_row_wrong_only_after_seeks_is_read_forward_where_the_adapter_can_and_refused_elsewhere(monkeypatch):
    monkeypatch.setattr(base, "cuda_visible", lambda: True)
    monkeypatch.setattr(ForwardToy, "_check_device", lambda self, kind: None)
    toy, opened = ForwardToy(), Info(codec="vp9", open_gop=True)
    assert (
        toy.why_unavailable("cpu", opened) is None and toy.forward_only(opened, "cpu") == "toy seeks wrong in open GOP"
    )
    assert toy.why_unavailable("cuda", opened) == "toy seeks wrong in open GOP"  # no forward path proven there
    assert toy.forward_only(opened, "cuda") is None and toy.forward_only(Info(codec="vp9"), "cpu") is None
    assert Toy().forward_only(opened, "cpu") is None  # an adapter without FORWARD_ON never reads forward
    with pytest.raises(ValueError, match="reads must be"):
        base.known_wrong("open-gop", "x", reads="sometimes")


def test_nvdec_sizes_are_checked_on_every_gpu_path(monkeypatch):
    monkeypatch.setattr(base, "cuda_visible", lambda: True)
    monkeypatch.setattr(base, "importable", lambda name: (True, None))
    pyav = type(adapter("pyav"))()  # a fresh instance: nothing cached
    small = pyav.why_unavailable("cuda", Info(codec="hevc", width=160, height=96))
    assert "hevc" in small and sizes(small) == [base.NVDEC_MIN_SIZE["hevc"], (160, 96)]  # NVDEC's smallest, this one
    assert pyav.why_unavailable("cpu", Info(codec="hevc", width=160, height=96)) is None


def test_pynvvideocodec_has_no_cpu_path():
    assert adapter("pynvvideocodec").why_unavailable("cpu") == "pynvvideocodec has no cpu path (it decodes on: cuda)"


# --------------------------------------------------------------------------- the child-process helper


def _code(text):
    return child.python("-c", text)


def test_a_child_answers_with_one_of_five_outcomes():
    ok = child.call(_code("from playbook_utils import child; child.reply(lambda: {'x': 1})"), timeout=60)
    assert ok == {"status": "ok", "error": None, "x": 1}
    ours = child.call(
        _code(
            "from playbook_utils import child, DecodeError\n"
            "def f(): raise DecodeError('a.mp4', 'file is empty', 'pyav')\n"
            "child.reply(f)"
        ),
        timeout=60,
    )
    assert ours["status"] == "error" and ours["cause"] == "file is empty" and ours["exception"] == "DecodeError"
    assert ours["error"] == "DecodeError: a.mp4 [pyav]: file is empty"
    raw = child.call(
        _code("from playbook_utils import child\ndef f(): raise KeyError('k')\nchild.reply(f)"), timeout=60
    )
    assert raw["status"] == "error" and raw["exception"] == "KeyError" and raw["exception"] not in child.OURS
    refused = child.call(
        _code(
            "from playbook_utils import child, BackendUnavailable\n"
            "def f(): raise BackendUnavailable('a.mp4', 'no cuda path', 'decord')\n"
            "child.reply(f)"
        ),
        timeout=60,
    )
    assert refused["status"] == "unavailable" and refused["cause"] == "no cuda path"
    died = child.call(_code("import sys; print('a last line', file=sys.stderr); sys.exit(3)"), timeout=60)
    assert died == {"status": "crashed", "error": "the child process died (exit 3): a last line"}
    hung = child.call(_code("import time; time.sleep(30)"), timeout=1)
    assert hung["status"] == "timeout" and numbers(hung["error"]) == ["1"]  # the time it was given
    assert {a["status"] for a in (ok, ours, refused, died, hung)} == set(child.OUTCOMES)


def test_a_child_that_dies_mid_way_loses_one_request_and_a_new_one_serves_the_rest():
    serve = (
        "import json, os, sys\n"
        "from playbook_utils import child\n"
        "def handle(r):\n"
        "    if r['n'] == 2:\n"
        "        os._exit(9)\n"
        "    return {'twice': 2 * r['n']}\n"
        "child.serve_requests(handle)"
    )
    got = child.serve(_code(serve), [{"n": n} for n in range(5)], timeout=60)
    assert [g["status"] for g in got] == ["ok", "ok", "crashed", "ok", "ok"]
    assert [g.get("twice") for g in got] == [0, 2, None, 6, 8] and numbers(got[2]["error"])[0] == "9"  # its exit code
    assert sys.executable == child.python()[0]


def test_spdl_refuses_10_bit_on_cuda_as_unavailable_not_as_a_broken_file():
    # 30: on the H200 SPDL's NVDEC path raised DecodeError ("Only NV12 output is supported. Found: P016") on a valid
    # 10-bit HEVC file, which a skip policy counts as damage; it is a refusal now, and the CPU path still reads it
    spdl = type(adapter("spdl"))()
    ten = Info(codec="hevc", pix_fmt="yuv420p10le")
    row = next(r for r in spdl.KNOWN_WRONG if r.traits == {"10-bit"})
    assert spdl._why_file(ten, "cuda") == row.why and row.devices == ("cuda",)  # refused by the 10-bit row
    assert spdl._why_file(ten, "cpu") is None and spdl._why_file(Info(codec="hevc"), "cuda") is None


def test_another_librarys_exception_is_described_by_what_it_says():
    from playbook_utils.errors import describe

    assert describe(ValueError("bad data\nmore")) == "ValueError: bad data"
    # DALI: the first line only announces the next
    assert describe(RuntimeError("Critical error in pipeline:\nError in MIXED operator: bad packet\n...")) == (
        "RuntimeError: Critical error in pipeline: Error in MIXED operator: bad packet"
    )
    # PyNvVideoCodec on corrupt packets: a function's name and nothing else
    assert (
        describe(RuntimeError("GetFramesByIdxList : "))
        == "RuntimeError: GetFramesByIdxList (the library gave no reason)"
    )
    assert describe(RuntimeError("")) == "RuntimeError: (the library gave no reason)"


def test_an_ffmpeg_error_is_described_by_ffmpegs_words_without_its_code_or_path(tmp_path):
    av = pytest.importorskip("av")
    from playbook_utils.errors import describe

    not_video = tmp_path / "notes.mp4"
    not_video.write_text("not a video")
    with pytest.raises(av.error.FFmpegError) as e:
        av.open(str(not_video))
    assert "Errno" in str(e.value) and str(not_video) in str(e.value)  # what PyAV's message carries
    assert describe(e.value) == "InvalidDataError: Invalid data found when processing input"


def test_torchcodec_cuda_refuses_avi_where_the_h200_matrix_saw_it_fail():
    """12's matrix on the H200 (0.17, 2026-12-05): TorchCodec's CUDA path raised on an AVI its CPU path read
    exactly; the matrix then listed a raw library error. The CUDA path refuses AVI with that reason; the CPU reads it."""
    from playbook_utils.decoders.torchcodec import TorchCodec

    row = next(r for r in TorchCodec.KNOWN_WRONG if "container:avi" in r.traits)
    assert row.applies({"container:avi", "codec:h264"}, "cuda", "0.17.0")
    assert not row.applies({"container:avi", "codec:h264"}, "cpu", "0.17.0")
    assert "device='cpu'" in row.why  # the way out


def test_a_new_backend_takes_its_parts_from_its_adapter_and_one_registry_line(monkeypatch):
    # what the measurements pick a library for (`by_role`) and the module handed over come from the adapter alone
    from playbook_utils import decoders, handover
    from playbook_utils.decoders import base

    class Fake(base.Adapter):
        NAME, IMPORT = "fake", "fake"
        ROLES = {"cpu_reference": -1, "simpler": 99, "rank_cpu": 5}
        HANDOVER = {"cpu": "pyav_clips"}

    monkeypatch.setitem(decoders.ADAPTERS, "fake", Fake())  # the registry line
    assert decoders.by_role("cpu_reference")[0] == "fake" and decoders.by_role("simpler")[-1] == "fake"
    assert "fake" in decoders.by_role("rank_cpu") and "fake" not in decoders.by_role("gpu_loader")
    assert handover.module("fake", "cpu") == "pyav_clips" and handover.module("fake", "cuda") is None
    with pytest.raises(ValueError):
        decoders.by_role("no such role")
