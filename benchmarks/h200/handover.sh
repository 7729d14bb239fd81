#!/usr/bin/env bash
# On the GPU machine, after the install, from the project root (carry .gpu_media): issue 56's checks of the modules
# notebook 22 hands over (handover_check.py). On the CPU first:
#   .venv/bin/python -m tests.reader_folder .gpu_media/reader
#   .venv/bin/python -c "from playbook_utils.bench import media; media.colour_clips('.gpu_media/colour', smoke=True)"
#   git rev-parse HEAD > .gpu_media/COMMIT
# Usage: bash benchmarks/h200/handover.sh checks   (the tests, the colour table, the which-loader command; ~10 min)
#        bash benchmarks/h200/handover.sh tests | which   (the same in two calls: ~5.5 and ~5 min)
#        bash benchmarks/h200/handover.sh rates [BACKEND ...]  (each GPU module beside the playbook's loader, 1080p;
#          ~12 min with DALI: run `rates torchcodec pynvvideocodec`, then `rates dali`)
set -uo pipefail
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: this machine has no install (a fresh one?)"; exit 1; }
export PLAYBOOK_MEDIA_DIR=/tmp/media PLAYBOOK_COMMIT="$(cat .gpu_media/COMMIT 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import PyNvVideoCodec, torchcodec, av, torch; print('libs', PyNvVideoCodec.__version__, torchcodec.__version__, av.__version__, torch.__version__)" | tee -a "$OUT/machine.txt"
echo "commit $PLAYBOOK_COMMIT" | tee -a "$OUT/machine.txt"
mode=${1:-checks}
case "$mode" in
  checks|tests|which)  # checks = tests, then which (over 600 s together on 12-07: give them a call each)
    if [ "$mode" != which ]; then
      start=$(date +%s)
      PLAYBOOK_READER_FOLDER=.gpu_media/reader PLAYBOOK_COLOUR_CLIPS=.gpu_media/colour timeout 450 \
        python3 -m pytest -q -p no:cacheprovider -rA tests/unit/test_handover.py > "$OUT/tests_full.txt" 2>&1
      tail -40 "$OUT/tests_full.txt" | tee "$OUT/tests.txt"
      echo "tests: $(( $(date +%s) - start )) s" | tee -a "$OUT/tests.txt"
    fi
    if [ "$mode" != tests ]; then
      timeout 120 python3 benchmarks/h200/handover_check.py colours 2>&1 | tee "$OUT/colours.txt"
      timeout 330 python3 benchmarks/h200/handover_check.py which > "$OUT/which.txt" 2>&1
      tail -60 "$OUT/which.txt"
    fi
    ;;
  rates)
    timeout 560 python3 benchmarks/h200/handover_check.py rates full "${@:2}" 2>&1 | tee "$OUT/rates.txt"
    ;;
esac
ls -la "$OUT"
