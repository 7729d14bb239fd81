"""Every notebook, executed in smoke mode through the same runner users call; results read as data."""

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from playbook_utils import env
from playbook_utils.bench import media
from playbook_utils.tools import notebook_stats, run_notebooks
from tests.sentences import numbers

pytestmark = [pytest.mark.notebook, pytest.mark.slow]
NOTEBOOKS = sorted(run_notebooks.NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
REQUIRED_PARAMETERS = ("SMOKE", "DEVICE", "VIDEO_DIR", "OUTPUT_DIR")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(path):
    import json

    raw = json.loads(path.read_text())  # as committed: nbformat.read would add a missing id, with a warning
    ids = [c.get("id") for c in raw["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), "every cell needs its own id (a run warns MissingIDFieldWarning)"
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "strip outputs"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assigned = {t.id for s in ast.parse(tagged[0].source).body if isinstance(s, ast.Assign) for t in s.targets}
    assert set(REQUIRED_PARAMETERS) <= assigned, assigned  # each set in the cell papermill overrides
    assert isinstance(nb.metadata["playbook"]["requires"], list)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(f"# {path.stem[:2]}")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("playbook")
    # a hung cell fails its notebook after 10 minutes instead of stalling the suite (smoke cells take seconds)
    code = run_notebooks.main(["--mode", "smoke", "--output", str(out), "--timeout", "600"])
    return code, out, json.loads((out / "summary.json").read_text())


def result(out, stem):
    return json.loads((Path(out) / f"{stem}.json").read_text())


def test_every_notebook_passes_in_smoke_mode(smoke_run):
    code, out, summary = smoke_run
    failed = {r["notebook"]: r["error"] for r in summary["notebooks"] if r["status"] != "passed"}
    assert failed == {}
    assert code == 0
    assert {r["notebook"] for r in summary["notebooks"]} == {p.name for p in NOTEBOOKS}
    assert (out / "summary.md").exists()


def test_00_measures_the_machine_and_says_what_it_skipped(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "00_hardware_and_environment")
    caps = env.capabilities()
    assert r["headline"]["disk_cold_mb_s"] > 0
    assert r["storage"]["warm_mb_s"] > 0
    cpu = r["codec_probe"]["cpu"]
    assert cpu["h264"] == [30, 0] and cpu["hevc"] == [30, 0], "CPU reference decode must be frame-exact"
    if caps["nvdec"]:
        assert "h264" in r["headline"]["nvdec_codecs"]
        assert r["headline"]["h2d_pinned_gb_s"] > 0
    else:
        sections = [s.split(":")[0] for s in r["skipped"]]  # skipped sections by the names the notebook gives them
        assert sections.count("NVDEC codec probe") == 1, r["skipped"]
        assert r["headline"]["nvdec_codecs"] == "not probed"
        assert r["headline"]["h2d_pinned_gb_s"] is None


def test_01_builds_the_media_and_shows_gop_cost(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "01_video_anatomy_and_test_media")
    built = {s.name for s in media.default_media_specs(True)} - set(media.skipped_media(smoke=True))
    assert set(r["media"]) == built
    assert r["headline"]["stamps_exact"] is True
    access = r["random_access"]
    short, long_ = sorted(access, key=lambda n: int(n.split("gop")[1].split(".")[0]))
    for name in (short, long_):
        row = access[name]
        assert all(row[s]["exact"] for s in ("seek per frame", "decode everything", "sorted forward pass"))
        assert row["seek per frame"]["frames_decoded"] == row["expected_seek_decodes"]
        assert row["sorted forward pass"]["frames_decoded"] <= row["decode everything"]["frames_decoded"]
    assert access[long_]["seek per frame"]["frames_decoded"] > 2 * access[short]["seek per frame"]["frames_decoded"]
    for png in ("01_frame_grid.png", "01_gop_structure.png", "01_sampling_timeline.png"):
        assert (out / png).stat().st_size > 10_000


def test_decoder_notebooks_prove_their_frames(smoke_run):
    _, out, _ = smoke_run
    for stem in ("10_pyav", "11_decord", "12_torchcodec", "14_dali"):
        r = result(out, stem)
        assert r["headline"]["exact"] is True, stem
        assert r["headline"]["cpu_sequential_fps"] > 0 and r["headline"]["cpu_sparse_fps"] > 0, stem
    r13 = result(out, "13_pynvvideocodec")
    if not env.capabilities()["nvdec"]:
        assert r13["skipped"] and r13["headline"]["gpu_sequential_fps"] is None
    r15 = result(out, "15_dali_readers")
    assert r15["headline"]["exact"] is True
    assert r15["headline"]["cpu_reader_drops_undecodable"] in (True, False)


def test_20_benchmarks_every_available_backend_exactly(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "20_decode_benchmarks")
    rows = r["rows"]
    ok = [x for x in rows if x["status"] == "ok"]
    assert {x["backend"] for x in ok} >= {"pyav", "decord", "torchcodec"}
    assert all(x["exact"] for x in ok) and r["headline"]["all_exact"] is True
    assert all(x["status"] in ("ok", "unavailable") for x in rows), [
        x for x in rows if x["status"] not in ("ok", "unavailable")
    ]
    assert (Path(out) / "20_bench" / "bench.csv").exists()
    h = r[
        "harness"
    ]  # the headline holds its cost only where the row is not faster than the bare loop beyond the spread
    assert h["bare_fps"] > 0 and h["harness_fps"] > 0
    assert (r["headline"]["harness_overhead_pct"] is None) == (not h["readable"])


def test_21_measures_the_data_wait_of_real_loaders(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "21_training_loader_benchmarks")
    sweep = r["sweep"]
    assert {x["backend"] for x in sweep} >= {"pyav", "torchcodec"}
    assert all(0 <= x["wait_fraction"] <= 1 and x["samples_per_s"] > 0 for x in sweep)
    assert r["headline"]["exact"] is True and r["headline"]["shortest_fed_step_ms"] > 0
    # section 5: a real model trained on the loader's batches, with the loader beside it and on held batches
    step = r["training_step"]
    assert step["with_loader"]["steps"] == step["held"]["steps"] > 0 and step["held"]["wait_s"] < step["held"]["step_s"]
    assert step["processor"]["tokens"] * 4 == step["processor"]["patches"]


def test_23_bad_files_are_clear_errors_and_the_loader_keeps_going(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "23_robustness")
    assert r["headline"]["bad_outcomes_cpu"] == 0
    table = r["bad_files"]["cpu"]  # each library's answer to each bad file: its class before the first ':'
    assert len(table) == 15 + len(media.DAMAGES)
    for case, row in table.items():
        for backend, outcome in row.items():
            assert outcome.split(":")[0] in ("exact", "clear error", "refused"), f"{backend} on {case}: {outcome}"
            assert "unexpected" not in outcome, f"{backend} on {case}: {outcome}"
    for control in ("good (control)", "good, faststart (control)"):
        assert table[control]["pyav"] == "exact" and table[control]["torchcodec"] == "exact"
    for case in ("missing file", "zero bytes", "text named .mp4", "truncated at 10%, moov at end", "no video stream"):
        assert all(o.split(":")[0] == "clear error" for o in table[case].values()), table[case]
    # damaged headers FFmpeg still opens: read exactly where the frames are intact, a clear error where no decoder is
    assert all(o.split(":")[0] == "clear error" for o in table["header: unknown sample entry"].values())
    for how in ("short track header", "huge moov"):
        assert table[f"header: {how}"]["pyav"] == "exact", table[f"header: {how}"]
    policy = r["loader_policy"]
    # 2 good clips x 3, then 4 broken files and a damaged header, a file of huge frames, a clip too short for the
    # sampled clip and one of another size
    assert policy["delivered"] == policy["good_items"] == 6
    skipped = sorted(policy["skipped"], key=lambda s: s["index"])
    assert [s["index"] for s in skipped] == list(range(6, 14))
    assert all(s["path"] in s["cause"] or Path(s["path"]).name in s["cause"] for s in skipped)
    names = [Path(s["path"]).name for s in skipped]
    assert names[4:] == ["header_unknown_sample_entry.mp4", "huge_frames.mp4", "short.mp4", "other_size.mp4"]
    assert "max_item_bytes" in skipped[5]["cause"] and "mixed_sizes" in skipped[7]["cause"]  # the setting to change
    short = numbers(skipped[6]["cause"].split("]: ", 1)[1])  # its frames, fewer than the clip spans
    assert int(short[0]) < int(short[-1]), skipped[6]["cause"]
    raised = r["loader_policy"]["raise_mode"]  # on_error='raise': the first failing sample stops the epoch, named
    assert raised["broken"].split(":")[0] == "DecodeError" and names[0] in raised["broken"]
    assert raised["too short"].split(":")[0] == "DecodeError" and names[6] in raised["too short"]
    assert "other_size.mp4" in raised["other size"] and "mixed_sizes" in raised["other size"]
    assert all("rss_growth_pct" in v for v in r["soak"].values()), r["soak"]


def test_30_every_rank_reads_its_own_shard_and_every_sample_is_seen_once(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "30_scaling_out")
    h = r["headline"]
    assert h["world_sizes"] == [1, 2] and h["every_sample_once"] is True
    two = r["runs"]["2"]
    assert two["world_size"] == 2 and len(two["ranks"]) == 2 and {x["rank"] for x in two["ranks"]} == {0, 1}
    for e in range(len(two["epochs"])):  # recount from the raw ids, not the notebook's verdict
        ids = sorted(i for rank in two["ranks"] for i in rank["epochs"][e]["ids"])
        assert ids == list(range(two["num_samples"]))
    assert all(h["aggregate_fps"][k] > 0 for k in ("1", "2"))
    assert h["scaling_efficiency"] == pytest.approx(h["aggregate_fps"]["2"] / (2 * h["aggregate_fps"]["1"]), rel=0.01)
    # smoke mode on the generated clips: the ranks the storage feeds are not extrapolated from 144p (28, item 4)
    assert h["storage_ranks_fed"] is None
    sections = [s.split(":")[0] for s in r["skipped"]]  # skipped sections by the names the notebook gives them
    assert sections.count("ranks the storage feeds") == 1, r["skipped"]
    assert (Path(out) / "30_scaling.png").stat().st_size > 10_000


def test_24_vlm_path_is_exact_from_shards_and_the_bucket(smoke_run):
    _, out, _ = smoke_run
    r = result(out, "24_vlm_data_path")
    h = r["headline"]
    assert h["shard_exact"] is True and h["remote_exact"] is True and h["every_sample_once"] is True
    assert h["shard_skipped"] == 1 and list(r["shards"]["skipped"])[0].startswith("tar://broken.mp4::")
    assert all(p["frames"] % 2 == 0 and p["frames"] >= 4 and p["size"][0] % 28 == 0 for p in r["vlm_plan"].values())
    # the inputs every CPU backend reads are exact, DALI's CPU path and PyNvVideoCodec refuse with a reason
    for key, v in r["remote_inputs"].items():
        backend = key.split(" / ")[0]
        if backend in ("dali", "pynvvideocodec"):
            assert "BackendUnavailable" in v["refused"], key
        elif "exact" in v:
            assert v["exact"] is True and v["how"] == "native", key
    rows = r["access"]["rows"]
    assert rows and all(x["identical"] for x in rows)
    pyav = {x["access"]: x for x in rows if x["backend"] == "pyav"}
    size = pyav["whole object"]["object_bytes"]
    assert pyav["whole object"]["requests"] == 1 and pyav["whole object"]["bytes_fetched"] == size
    assert pyav["range reads"]["bytes_fetched"] == 2 * size, "the probe reads every packet, then the decoder"
    assert pyav["keyframe index"]["bytes_fetched"] < size, "the plan fetches less than the object"
    assert h["pyav_keyframe_index_bytes_pct"] == pytest.approx(
        100 * pyav["keyframe index"]["bytes_fetched"] / size, abs=0.1
    )
    loader = r["loader"]
    assert loader["samples"] == r["shards"]["decoded"] and loader["frames"] == 4 * loader["samples"]
    assert list(loader["skipped"]) == [
        s.replace(str(Path(out) / "24_shards") + "/", "s3://playbook/shards/") for s in r["shards"]["skipped"]
    ]
    methods = {(x["backend"], x["method"]) for x in r["resize"]["rows"]}
    assert {("pyav", "in decoder"), ("pyav", "decode, then resize")} <= methods
    assert all(x["psnr_db"] is None or x["psnr_db"] > 30 for x in r["resize"]["rows"])  # None: identical (inf)


@pytest.mark.parametrize("cores", [2, 16])
@pytest.mark.parametrize("smoke", [True, False], ids=["smoke", "full"])
def test_21_gpu_loaders_get_epochs_with_a_steady_window(smoke, cores):
    # the GPU cells never run in CI: their sizes are checked here (a smoke run on the H200 once had 4 videos = 1
    # batch of 4, all of it warm-up; later, 96-video epochs let a 64-thread loader decode most of its epoch before
    # the clock started). Every loader's epoch, sized as the notebook sizes it, must leave a steady window.
    from playbook_utils.bench import loader_bench

    nb = nbformat.read(run_notebooks.NOTEBOOK_DIR / "21_training_loader_benchmarks.ipynb", as_version=4)
    cells = [
        c.source for c in nb.cells if c.cell_type == "code" and re.search(r"^(BATCH|WARMUP_BATCHES) = ", c.source, re.M)
    ]
    constants = [line for cell in cells for line in cell.splitlines() if re.match(r"[A-Z_]+ = ", line)]
    ns = {"SMOKE": smoke, "cores": cores}
    exec("\n".join(constants), ns)
    warm, batch = ns["WARMUP_BATCHES"] * ns["BATCH"], ns["BATCH"]
    specs = [{"kind": "gpu", "threads": t} for t in [*ns["GPU_THREADS"], *ns["MORE_THREADS"]]]
    specs += [{"kind": "gpu", "processes": p, "threads": t} for p, t in ns["GPU_PROCESSES"]]
    for spec in specs:
        ahead = loader_bench.spec_lookahead(spec)
        n = loader_bench.steady_epoch(ahead, warm, batch_size=batch)
        deliveries = [(0.01 * k, batch, batch) for k in range(n // batch)]  # a loader delivering evenly
        assert loader_bench.steady_rate(deliveries, warm, ahead)["steady"], spec


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executed_copy_shows_its_figures_and_no_traceback_warning_or_stderr(smoke_run, path):
    _, out, _ = smoke_run
    executed = Path(out) / path.name
    if not executed.exists():
        pytest.fail(f"no executed copy of {path.name} (see test_every_notebook_passes_in_smoke_mode)")
    assert notebook_stats.output_problems(executed) == []
    figures = json.loads((Path(out) / f"{path.stem}.json").read_text()).get("figures", [])
    images = sum(
        "image/png" in o.get("data", {})
        for c in nbformat.read(executed, as_version=4).cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert images >= len(figures), f"{len(figures)} figures saved ({figures}), {images} shown inline"


def test_a_fresh_smoke_run_compares_with_the_cpu_reference_without_structural_changes(smoke_run):
    """The nightly's comparison against results/cpu-2core: the reference must describe today's notebooks. Rates may
    move on another CPU (they are reported), but nothing the reference holds may be missing, no notebook may fail,
    and no metric with an exact rule (exactness, job counts, skipped sections' kinds, capabilities) may differ."""
    from playbook_utils.tools import nightly

    _, out, _ = smoke_run
    reference = run_notebooks.ROOT / "results" / "cpu-2core"
    table = nightly.load_tolerances()
    report = nightly.compare(nightly.load_results([reference], "baseline"), nightly.load_results([out], "run"), table)
    assert report["failures"] == []
    structural = [
        f"{e['notebook']}: {m['metric']} {m['baseline']!r} -> {m['now']!r}"
        for e in report["notebooks"]
        for m in e["metrics"]
        if m["verdict"] in nightly.REGRESSED
        and (m["verdict"] == "MISSING" or m["tolerance"] == "must match" or m["tolerance"].endswith(" nothing"))
    ]
    assert structural == [], "regenerate results/cpu-2core (run_notebooks --mode smoke) or fix the notebook"
    assert not [e["notebook"] for e in report["notebooks"] if e["status"] == "not run"]
