#!/usr/bin/env bash
# On the H200 after the install: notebook 20 in smoke mode on the generated media set (made there), its pixel
# agreement (section 3c) fed by the smoke colour clips made on the CPU and carried in .gpu_media/colour_smoke:
#   .venv/bin/python -c "from playbook_utils.bench import media; media.colour_clips('.gpu_media/colour_smoke', smoke=True)"
# Issue 27's executed notebook on the GPU (every backend's colours against the file's tags, on the CPU and on
# CUDA) in a few minutes, where notebook 20 in full mode takes more than 20 (2026-12-04).
repo=$(pwd)
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: this machine has no install (a fresh one?)"; exit 1; }
export PLAYBOOK_MEDIA_DIR=/tmp/media PLAYBOOK_COMMIT="$(cat "$repo/.gpu_media/COMMIT" 2>/dev/null)"
mkdir -p /tmp/media/smoke/colour && cp -r "$repo/.gpu_media/colour_smoke/." /tmp/media/smoke/colour/
mkdir -p /tmp/p20s && cd /tmp/p20s && rm -rf out
start=$(date +%s)
timeout ${LIMIT:-540} python3 -m playbook_utils.tools.run_notebooks --pattern '20*' --output out 2>&1 \
  | tee "$OUT/pixels20_console.txt"
echo "wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/pixels20_console.txt"
tar czf "$OUT/pixels20.tgz" --exclude='*.mp4' --exclude='*.mkv' --exclude='out/20_bench' out
