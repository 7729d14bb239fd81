#!/usr/bin/env bash
# On the CPU, before a GPU call: the reader's mixed folder that smoke.sh measures (.gpu_media/videos, ignored;
# carry .gpu_media). Made with the ffmpeg command line, not the playbook's own encoder, as a reader's files are:
#   h264_1080p.mp4       H.264 1080p30, 10 s, about 9 Mbit/s (film-like noise keeps the rate up), GOP 30
#   h264_480p.mkv        H.264 854x480 in Matroska, GOP 60
#   hevc_720p_closed.mp4 HEVC 720p, closed GOP 30
#   hevc_720p_open.mp4   HEVC 720p, x265's defaults (open GOP) with keyint 60
#   cut_download.mp4     the 1080p file cut at 300 kB, as an interrupted download leaves it
# Usage: bash benchmarks/h200/make_mixed_folder.sh [FOLDER]   (a second run rebuilds nothing already there)
set -euo pipefail
out=${1:-.gpu_media/videos}
mkdir -p "$out"
src() { echo "testsrc2=size=$1:rate=30,noise=alls=$2:allf=t+u,format=yuv420p"; }
make() {  # name, then ffmpeg's arguments
  local name=$1; shift
  [ -s "$out/$name" ] && return 0
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "$@" "$out/.tmp.$name" && mv "$out/.tmp.$name" "$out/$name"
  echo "made $out/$name"
}
make h264_1080p.mp4 "$(src 1920x1080 18)" -t 10 -c:v libx264 -preset veryfast -b:v 9M -maxrate 10M -bufsize 18M \
  -g 30 -keyint_min 30 -sc_threshold 0 -movflags +faststart
make h264_480p.mkv "$(src 854x480 12)" -t 10 -c:v libx264 -preset veryfast -crf 23 -g 60
make hevc_720p_closed.mp4 "$(src 1280x720 12)" -t 10 -c:v libx265 -preset ultrafast -b:v 2500k -tag:v hvc1 \
  -x265-params "keyint=30:min-keyint=30:scenecut=0:open-gop=0:log-level=error"
make hevc_720p_open.mp4 "$(src 1280x720 12)" -t 10 -c:v libx265 -preset ultrafast -b:v 2500k -tag:v hvc1 \
  -x265-params "keyint=60:log-level=error"
[ -s "$out/cut_download.mp4" ] || { head -c 300000 "$out/h264_1080p.mp4" > "$out/cut_download.mp4"; echo "made $out/cut_download.mp4"; }
du -sh "$out"
