#!/usr/bin/env bash
# On the CPU (the GPU machine has no ffmpeg tool): a folder of files a reader's folder may hold that the reader's
# folder of the tests does not (full range, gray, 4:4:4 at an odd size, one frame, interlaced, HDR10, variable frame
# rate, MJPEG in AVI, ProRes, VP8, tiny, panorama, portrait), with their references, for odd_folder.py on the GPU.
# Usage: bash benchmarks/h200/make_odd_folder.sh .gpu_media/odd   (about 2 MB; carry it)
set -euo pipefail
out=${1:?usage: make_odd_folder.sh FOLDER}
mkdir -p "$out" && cd "$out"
F="ffmpeg -v error -y"
S="-f lavfi -i testsrc2=s=320x240:r=24:d=2"
$F $S -pix_fmt yuvj420p -color_range pc -c:v libx264 full_range.mp4
$F $S -pix_fmt gray -c:v libx264 gray.mp4
$F -f lavfi -i testsrc2=s=321x181:r=24:d=2 -pix_fmt yuv444p -c:v libx264 odd_444.mp4
$F $S -frames:v 1 -c:v libx264 -pix_fmt yuv420p one_frame.mp4
$F $S -c:v libx264 -pix_fmt yuv420p -flags +ilme+ildct -x264opts tff=1 -field_order tt interlaced.mp4
$F $S -c:v libx265 -pix_fmt yuv420p10le -color_primaries bt2020 -color_trc smpte2084 -colorspace bt2020nc \
  -x265-params log-level=error hdr10.mp4
$F $S -vf "select='lt(mod(n\,5)\,3)'" -fps_mode vfr -c:v libx264 -pix_fmt yuv420p vfr.mp4
$F $S -c:v mjpeg -q:v 3 -pix_fmt yuvj420p mjpeg.avi
$F $S -c:v prores_ks -profile:v 2 prores.mov
$F $S -c:v libvpx -b:v 1M vp8.webm
$F -f lavfi -i testsrc2=s=64x48:r=24:d=2 -c:v libx264 -pix_fmt yuv420p tiny.mp4
$F -f lavfi -i testsrc2=s=1000x100:r=24:d=2 -c:v libx264 -pix_fmt yuv420p panorama.mp4
$F -f lavfi -i testsrc2=s=180x320:r=24:d=2 -c:v libx264 -pix_fmt yuv420p portrait.mp4
cd - > /dev/null
.venv/bin/python benchmarks/h200/odd_folder.py "$out" cpu pyav   # makes the references; PyAV reads every one
