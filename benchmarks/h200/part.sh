#!/usr/bin/env bash
# On the H200: part N of the full run (nightly --part N: each under 20 minutes of notebook time), or the notebooks a
# pattern names (part.sh 20: notebook 20 alone; part.sh '23* 30*': both), in the background, into /tmp/parts/out, the same folder for every
# part (22 reads 20's and 21's output there; the summary keeps every part's rows, each stamped with machine, date
# and commit). wait_part.sh N (or the same pattern) collects it. Run from the project root after the install, with
# .gpu_media/COMMIT written on the CPU (git rev-parse HEAD > .gpu_media/COMMIT) and carried; .gpu_media/colour, where
# carried, holds 20's colour clips (the machine has no ffmpeg to make them). PARTS_FROM: see below.
# It runs from a copy of the tree: a later call re-sends the working tree, which must not change the running code.
n=${1:?usage: part.sh N|PATTERN}
# a part's number, or patterns separated by spaces ('23* 30*': 23, then 30, in one run and one folder)
if [[ $n =~ ^[0-9]$ ]]; then pick=(--part "$n"); else pick=(); set -f; for p in $n; do pick+=(--pattern "$p"); done; set +f; fi
tag=${n//[^0-9A-Za-z]/_}
rm -rf "/tmp/parts/repo$tag" && mkdir -p "/tmp/parts/repo$tag" \
  && tar -C "$(pwd)" --exclude=./.gpu --exclude=./.git -cf - . | tar -C "/tmp/parts/repo$tag" -xf - || exit 1
repo=/tmp/parts/repo$tag
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: this machine has no install (a fresh one?)"; exit 1; }
export PLAYBOOK_MEDIA_DIR=/tmp/media PLAYBOOK_COMMIT="$(cat "$repo/.gpu_media/COMMIT" 2>/dev/null)"
# a machine is not always bare: one lent to an earlier session kept its /tmp/parts (12-06, twenty-second session: a
# part-1 run of 09:54 came back with the 15:19 one). A run of another session (.gpu_media/SESSION, written by
# prepare_parts.sh) is cleared first; the parts of this session share one folder, as above.
if [ "$(cat /tmp/parts/SESSION 2>/dev/null)" != "$(cat "$repo/.gpu_media/SESSION" 2>/dev/null)" ]; then
  [ -e /tmp/parts/out ] && echo "cleared /tmp/parts/out and the carried clips, left by session $(cat /tmp/parts/SESSION 2>/dev/null)"
  rm -rf /tmp/parts/out /tmp/media/full/colour && cp "$repo/.gpu_media/SESSION" /tmp/parts/SESSION 2>/dev/null
fi
# what is carried replaces what is there (a colour folder left by a smoke make held 320x180 clips: 12-06)
if [ -d "$repo/.gpu_media/colour" ]; then mkdir -p /tmp/media/full && cp -r "$repo/.gpu_media/colour" /tmp/media/full/; fi
# .gpu_media/matrix, where carried: 23's streams, edit lists and rotations, made by the ffmpeg tool on the CPU
if [ -d "$repo/.gpu_media/matrix" ]; then mkdir -p /tmp/parts/out && cp -r "$repo/.gpu_media/matrix" /tmp/parts/out/; fi
# PARTS_FROM=results/h200/DATE/parts: the earlier parts' output, run in another session (22 reads 20's and 21's),
# copied into the run's folder first, its summary included, so the merged summary keeps their rows
if [ -n "$PARTS_FROM" ]; then
  [ -d "$repo/$PARTS_FROM" ] || { echo "PARTS_FROM=$PARTS_FROM: no such folder in the tree"; exit 1; }
  mkdir -p /tmp/parts/out && cp -r "$repo/$PARTS_FROM/." /tmp/parts/out/ && echo "earlier parts from $PARTS_FROM"
  # the runner's marker (.playbook-run) is not committed with a part's folder: without it the runner refuses a
  # folder holding a summary.json it did not make (seen on 12-04, eighth session). This one the runner made.
  [ -e /tmp/parts/out/.playbook-run ] || : > /tmp/parts/out/.playbook-run
fi
rm -f "/tmp/parts/DONE$tag" "/tmp/parts/RC$tag"
# the machine's state every 15 s (disk, memory, load, the output's size), sent back by wait_part.sh: three runs
# were lost with their machine mid-notebook (12-04, fifth, eighth and ninth sessions) and nothing said why
if ! kill -0 "$(cat /tmp/parts/machine.pid 2>/dev/null)" 2>/dev/null; then   # none running yet
  setsid nohup bash -c 'while true; do echo "$(date -u +%T) disk $(df -h /tmp | awk "END {print \$3\"/\"\$2}") \
mem $(free -g | awk "/Mem:/ {print \$3\"/\"\$2\" GiB used, \"\$6\" cache\"}") load $(cut -d" " -f1-3 /proc/loadavg) \
out $(du -sh /tmp/parts/out 2>/dev/null | cut -f1)"; sleep 15; done' >> /tmp/parts/machine.log 2>&1 &
  echo $! > /tmp/parts/machine.pid
fi
setsid nohup bash -c "cd $repo && date -u > /tmp/parts/START$tag && python3 -m playbook_utils.tools.nightly ${pick[*]@Q} \
  --device cuda --output /tmp/parts/out > /tmp/parts/console$tag.txt 2>&1; echo \$? > /tmp/parts/RC$tag; \
  date -u > /tmp/parts/DONE$tag" > /dev/null 2>&1 &
sleep 2; echo "started ${pick[*]} at commit ${PLAYBOOK_COMMIT:-unknown}"; cat "/tmp/parts/START$tag"; nproc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
