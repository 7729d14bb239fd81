#!/usr/bin/env bash
# On the GPU machine, after the install (carry .gpu_media): diag_stream_wait.py on a carried 1080p clip, then
# part.sh PATTERN. Where the diag did not see PyNvVideoCodec's frames the same on the threads' own stream as on the
# default one, in all 8 epochs, the part runs the code before that change instead (`4682aa5`'s parent).
# On the CPU first, after prepare_parts.sh:
#   ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 10 -c:v libx264 -preset veryfast \
#     -b:v 8M -maxrate 8M -bufsize 16M -g 30 -keyint_min 30 -sc_threshold 0 -bf 2 -pix_fmt yuv420p \
#     .gpu_media/h264_1080p_gop30.mp4
#   mkdir -p .gpu_media/old && git rev-parse 4682aa5~1 > .gpu_media/OLD_COMMIT && for f in \
#     playbook_utils/decoders/pynvvideocodec.py modules/pynvvideocodec_clips.py; do \
#     git show 4682aa5~1:$f > .gpu_media/old/$(basename $f); done
# Usage: [PARTS_FROM=...] bash benchmarks/h200/stream_then_part.sh PATTERN
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: install first"; exit 1; }
timeout 180 python3 benchmarks/h200/diag_stream_wait.py .gpu_media/h264_1080p_gop30.mp4 2>&1 | tee "$OUT/diag_stream_wait.txt"
if [ "$(grep -c '^\(loader\|pynvc\) .*first line: True' "$OUT/diag_stream_wait.txt")" != 8 ]; then
  echo "the diag did not pass: the part runs the code of $(cat .gpu_media/OLD_COMMIT)"
  cp .gpu_media/old/pynvvideocodec.py playbook_utils/decoders/ && cp .gpu_media/old/pynvvideocodec_clips.py modules/ \
    && cp .gpu_media/OLD_COMMIT .gpu_media/COMMIT || exit 1
fi
bash benchmarks/h200/part.sh "${1:?usage: stream_then_part.sh PATTERN}"
