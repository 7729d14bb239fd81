#!/usr/bin/env bash
# On the H200: the README's "which loader" command in smoke mode on a folder of mixed files, a relative --video-dir.
# The folder is .gpu_media/videos (ignored: carry .gpu_media), made on the CPU with the ffmpeg command line;
# SMOKE_VIDEOS=.gpu_media/opengop names another (its video files are copied, not its manifest), TAG its files' names,
# SMOKE_PATTERN the notebooks (default '2[0-2]*'; '2[12]*': 21 and 22, 21 then orders its CPU sweep by default).
repo=$(pwd)
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: this machine has no install (a fresh one?)"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import PyNvVideoCodec, torchcodec, av, papermill; print('libs', PyNvVideoCodec.__version__, torchcodec.__version__, av.__version__)"
echo "commit $(cat "$repo/.gpu_media/COMMIT" 2>/dev/null || echo unknown)"
export PLAYBOOK_COMMIT="$(cat "$repo/.gpu_media/COMMIT" 2>/dev/null)"   # the copy that travels has no history
src="$repo/${SMOKE_VIDEOS:-.gpu_media/videos}"; tag=${TAG:-reader}
mkdir -p /tmp/rd && cd /tmp/rd && rm -rf out videos && mkdir videos \
  && find "$src" -maxdepth 1 -type f \( -name '*.mp4' -o -name '*.mkv' -o -name '*.mov' -o -name '*.webm' \) -exec cp {} videos/ \;
ls videos
start=$(date +%s)
timeout ${SMOKE_LIMIT:-540} python3 -m playbook_utils.tools.run_notebooks --pattern "${SMOKE_PATTERN:-2[0-2]*}" --video-dir videos --output out 2>&1 | tee $OUT/smoke_${tag}_console.txt
echo "wall: $(( $(date +%s) - start )) s" | tee -a $OUT/smoke_${tag}_console.txt
tar czf $OUT/smoke_${tag}.tgz --exclude='out/21_epoch' out
ls -la $OUT
