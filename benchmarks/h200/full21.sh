#!/usr/bin/env bash
# On the H200: notebook 21 in full mode, in the background (it outlasts one 10-minute call); wait21.sh collects it.
# Run from the project root after the install (../shared/gpu/prepare.sh); .gpu_media/COMMIT (git rev-parse HEAD,
# written before the call: the tree that travels has no history) names the code in the console.
# It runs from a copy of the tree (/tmp/f21/repo): a later call re-sends the working tree, and the run's child
# processes, which import the package afresh, must not pick up code edited meanwhile.
rm -rf /tmp/f21/repo && mkdir -p /tmp/f21/repo && tar -C "$(pwd)" --exclude=./.gpu --exclude=./.git -cf - . \
  | tar -C /tmp/f21/repo -xf - && cd /tmp/f21/repo || exit 1
repo=$(pwd)
source /tmp/gpu-env.sh || { echo "no /tmp/gpu-env.sh: this machine has no install (a fresh one?)"; exit 1; }
export PLAYBOOK_MEDIA_DIR=/tmp/media
setsid nohup bash -c "cd $repo && date -u > /tmp/f21/START && python3 -m playbook_utils.tools.run_notebooks --mode full --pattern 21 --output /tmp/f21/out $* > /tmp/f21/console.txt 2>&1; date -u > /tmp/f21/DONE" > /dev/null 2>&1 &
sleep 2; echo "started 21 full at commit $(cat $repo/.gpu_media/COMMIT)"; cat /tmp/f21/START; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
