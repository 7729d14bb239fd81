#!/usr/bin/env bash
# On the CPU, before a GPU session that runs part.sh: what the parts need carried, in one command (each session
# starts from a fresh checkout, without the ignored .gpu and .gpu_media of the session before).
#   .gpu_media/COMMIT   the commit the parts run (the tree that travels has no history)
#   .gpu_media/SESSION  when this ran: part.sh clears what a machine kept from another session's run
#   .gpu_media/colour   20's colour clips at full size (part 2; the GPU machine has no ffmpeg to make them)
#   .gpu_media/matrix   23's streams, edit lists and rotations, made by the ffmpeg tool (part 4)
#   .gpu/c1 ... cN      the install folders (../shared/gpu/prepare.sh), sized to fit beside today's tree
# Usage: bash benchmarks/h200/prepare_parts.sh PART ...   (e.g. 3, or 4 1); then, on the GPU, one run per install
# folder (carry [".gpu/cK"], command bash .gpu/cK/install.sh), the last chained with part.sh N (carry
# .gpu_media/COMMIT and the folders below that the part needs).
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: prepare_parts.sh PART ... (1: 00-15, 2: 20, 3: 21 22, 4: 23 24 30)"; exit 3; }
py=.venv/bin/python
[ -x "$py" ] || make setup
mkdir -p .gpu_media
git rev-parse HEAD > .gpu_media/COMMIT
date -u +%Y-%m-%dT%H:%M:%S > .gpu_media/SESSION   # part.sh clears a machine's run of another session
for part in "$@"; do
  case $part in
    # the full-size clips 20 reads (made where missing); a folder of other sizes is not them (12-06: 3c skipped)
    2) $py benchmarks/h200/gpu_pixels.py make .gpu_media/colour > /dev/null
       $py -c "from playbook_utils.bench import media
assert len(media.colour_clips('.gpu_media/colour', smoke=False)) == len(media.COLOUR_CASES), 'colour clips missing'" ;;
    4) command -v ffmpeg > /dev/null || { echo "part 4 needs the ffmpeg tool here for 23's section 6"; exit 1; }
       $py -c "from playbook_utils.bench import matrix
matrix.build_cases('.gpu_media/matrix', 256, 144, 24, names=[c.name for c in matrix.CASES if c.needs_cli])" ;;
    1|3) ;;
    *) echo "no part $part (1: 00-15, 2: 20, 3: 21 22, 4: 23 24 30)"; exit 3 ;;
  esac
done
# 24's object store (s3fs, moto) only where part 4 runs: about 50 MB, two install calls fewer for the others
extra=(); [[ " $* " == *" 4 "* ]] && extra=(s3fs "moto[server]")
bash ../shared/gpu/prepare.sh spdl==0.8.0 "${extra[@]}"
echo "carry with the last install call: .gpu_media/COMMIT, .gpu_media/SESSION$(for d in colour matrix; do [ -d .gpu_media/$d ] && printf ', .gpu_media/%s' $d; done)"
du -sh .gpu_media
