#!/bin/sh
# kill_peer.sh TRANSIT_RUN PROGRAM: rank 2 is killed with SIGKILL mid-transfer;
# both survivors must report it and exit 0, so the job's status is the victim's
# (137), and nothing may hang (transit_run's --timeout would give another status).
out=$("$1" -n 3 --keep-going --timeout 120 --tag-output "$2" 2>&1)
status=$?
printf '%s\n' "$out"
if [ "$status" -ne 137 ]; then
  echo "kill_peer: transit_run exited $status, expected 137 (only the victim failing)"; exit 1
fi
for r in 0 1; do
  if ! printf '%s\n' "$out" | grep -q "rank $r: survived"; then
    echo "kill_peer: rank $r did not survive"; exit 1
  fi
done
echo "kill_peer: the survivors saw the failure and carried on"
