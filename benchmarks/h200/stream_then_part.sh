#!/usr/bin/env bash
# On the GPU machine, after the install (carry .gpu_media): diag_stream_wait.py on a carried 1080p clip
# (.gpu_media/h264_1080p_gop30.mp4, made by the ffmpeg tool on the CPU), then part.sh PATTERN. Where the diag did not
# see PyNvVideoCodec's frames the same on the threads' own stream as on the default one, in all 8 epochs, the part
# runs the code before that change instead: .gpu_media/old holds its two files, .gpu_media/OLD_COMMIT its commit.
# Usage: [PARTS_FROM=...] bash benchmarks/h200/stream_then_part.sh PATTERN
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: install first"; exit 1; }
timeout 180 python3 benchmarks/h200/diag_stream_wait.py .gpu_media/h264_1080p_gop30.mp4 2>&1 | tee "$OUT/diag_stream_wait.txt"
if [ "$(grep -c 'first line: True' "$OUT/diag_stream_wait.txt")" != 8 ]; then
  echo "the diag did not pass: the part runs the code of $(cat .gpu_media/OLD_COMMIT)"
  cp .gpu_media/old/pynvvideocodec.py playbook_utils/decoders/ && cp .gpu_media/old/pynvvideocodec_clips.py modules/ \
    && cp .gpu_media/OLD_COMMIT .gpu_media/COMMIT || exit 1
fi
bash benchmarks/h200/part.sh "${1:?usage: stream_then_part.sh PATTERN}"
