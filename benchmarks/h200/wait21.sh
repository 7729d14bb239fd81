#!/usr/bin/env bash
# Wait for full21.sh's run (up to WAIT_S), then send back its console, executed notebook and JSON
limit=${WAIT_S:-560}
# a fresh machine (the last one given back between calls) has no run: say so at once (see wait_part.sh)
if [ ! -f /tmp/f21/START ]; then echo "no run of 21 on this machine (a fresh one: install again, start it again)"; exit 3; fi
while [ ! -f /tmp/f21/DONE ] && [ $SECONDS -lt $limit ]; do sleep 5; done
cat /tmp/f21/START /tmp/f21/DONE 2>/dev/null
tail -c 6000 /tmp/f21/console.txt
cd /tmp/f21 && tar czf $OUT/full21.tgz --exclude='out/21_epoch' out console.txt START $( [ -f DONE ] && echo DONE )
ls -la $OUT
