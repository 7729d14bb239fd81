#!/usr/bin/env bash
# On the H200 after the install (../shared/gpu/prepare.sh; DALI and SPDL need the full stack, not GPU_STACK=nvdec):
# the GPU halves of 26 (one read path: a rotated clip from every kind of source) and 27 (colours by the file's
# tags, decoders reused across files) and 30 (open-GOP clips read forward on NVDEC: tests/unit/test_open_gop.py),
# in one call. Carry .gpu_media, made on the CPU beforehand:
#   bash benchmarks/h200/make_mixed_folder.sh && .venv/bin/python benchmarks/h200/gpu_pixels.py make .gpu_media/colour
#   .venv/bin/python -c "from playbook_utils.bench import media; media.unusual_clips('.gpu_media/unusual')"
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: this machine has no install (a fresh one?)"; exit 1; }
export PLAYBOOK_MEDIA_DIR=/tmp/media
# the rotated and two-stream clips of the sources tests (26), made on the CPU: media.unusual_clips
[ -d .gpu_media/unusual ] && export PLAYBOOK_UNUSUAL_CLIPS="$(pwd)/.gpu_media/unusual"
echo "commit $(cat .gpu_media/COMMIT 2>/dev/null || echo unknown)"
# SKIP_PIXELS=1: not the pixel matrix (when notebook 20 in full mode runs it in the same session)
[ -n "${SKIP_PIXELS:-}" ] || timeout ${PIXELS_LIMIT:-240} python3 benchmarks/h200/gpu_pixels.py run .gpu_media/colour .gpu_media/videos "$OUT/gpu_pixels.json" 2>&1 \
  | tee "$OUT/gpu_pixels.txt"
# issue 30's matrix: stamped open-GOP clips, three kinds of read, every GPU backend (about a minute)
timeout ${OPEN_GOP_LIMIT:-150} python3 benchmarks/h200/open_gop_matrix.py "$OUT/open_gop_matrix.json" /tmp/og 2>&1 | tee "$OUT/open_gop_matrix.txt"
# the whole output kept, and every failure named in the summary (-rfEs): on 12-03 a tail of 40 lines lost three names
timeout ${TESTS_LIMIT:-300} python3 -m pytest -p no:cacheprovider -q -m gpu -rfEs tests/unit > "$OUT/gpu_tests.txt" 2>&1
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/gpu_tests.txt"
# what CUDA memory the GPU loaders stopped early leave behind, per backend (the memory test that failed on 12-03)
for b in torchcodec pynvvideocodec; do
  timeout 120 python3 benchmarks/h200/diag_gpu_memory.py $b 2>&1 | tail -20 | tee -a "$OUT/gpu_memory.txt"
done
