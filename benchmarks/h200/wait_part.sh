#!/usr/bin/env bash
# Wait for part.sh N's (or PATTERN's) run (up to WAIT_S seconds), then send back its console, the executed notebooks, their JSON,
# figures and the merged summary (not the epoch copies and generated media, which are large and rebuilt anywhere).
n=${1:?usage: wait_part.sh N|PATTERN}
n=${n//[^0-9A-Za-z]/_}   # as part.sh names its files
limit=${WAIT_S:-560}
# a machine given back and replaced between calls (seen 2026-12-04, fifth session: the call after a 540 s wait
# found a fresh machine and waited 520 s on nothing) has no run: say so at once instead of waiting
if [ ! -f "/tmp/parts/START$n" ]; then echo "no run of part $n on this machine (a fresh one: install again, start it again)"; exit 3; fi
while [ ! -f "/tmp/parts/DONE$n" ] && [ $SECONDS -lt "$limit" ]; do sleep 5; done
cat "/tmp/parts/START$n" "/tmp/parts/DONE$n" 2>/dev/null; echo "nightly exit status: $(cat "/tmp/parts/RC$n" 2>/dev/null || echo 'still running')"
tail -c 6000 "/tmp/parts/console$n.txt"
echo "the machine (disk, memory, load, output), last samples:"; tail -3 /tmp/parts/machine.log 2>/dev/null
cd /tmp/parts && tar czf "$OUT/part$n.tgz" --exclude='*_epoch' --exclude='out/clips' --exclude='out/bad-files' \
  --exclude='out/messy' --exclude='out/look-alikes' --exclude='out/probe-clips' --exclude='out/24_shards' \
  --exclude='out/matrix' --exclude='*.mp4' --exclude='*.mkv' --exclude='*.webm' --exclude='*.tar' \
  out "console$n.txt" "START$n" $( [ -f machine.log ] && echo machine.log ) $( [ -f "DONE$n" ] && echo "DONE$n" "RC$n" )
ls -la "$OUT"
