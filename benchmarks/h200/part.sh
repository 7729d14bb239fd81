#!/usr/bin/env bash
# On the H200: part N of the full run (nightly --part N: each under 20 minutes of notebook time), in the background,
# into /tmp/parts/out, the same folder for every part (22 reads 20's and 21's output there; the summary keeps every
# part's rows, each stamped with machine, date and commit). wait_part.sh N collects it. Run from the project root
# after the install, with .gpu_media/COMMIT written on the CPU (git rev-parse HEAD > .gpu_media/COMMIT) and carried.
# It runs from a copy of the tree: a later call re-sends the working tree, which must not change the running code.
n=${1:?usage: part.sh N}
rm -rf "/tmp/parts/repo$n" && mkdir -p "/tmp/parts/repo$n" \
  && tar -C "$(pwd)" --exclude=./.gpu --exclude=./.git -cf - . | tar -C "/tmp/parts/repo$n" -xf - || exit 1
repo=/tmp/parts/repo$n
source /tmp/gpu-env.sh
export PLAYBOOK_MEDIA_DIR=/tmp/media PLAYBOOK_COMMIT="$(cat "$repo/.gpu_media/COMMIT" 2>/dev/null)"
rm -f "/tmp/parts/DONE$n" "/tmp/parts/RC$n"
setsid nohup bash -c "cd $repo && date -u > /tmp/parts/START$n && python3 -m playbook_utils.tools.nightly --part $n \
  --device cuda --output /tmp/parts/out > /tmp/parts/console$n.txt 2>&1; echo \$? > /tmp/parts/RC$n; \
  date -u > /tmp/parts/DONE$n" > /dev/null 2>&1 &
sleep 2; echo "started part $n at commit ${PLAYBOOK_COMMIT:-unknown}"; cat "/tmp/parts/START$n"; nproc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
