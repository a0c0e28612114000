#!/bin/sh
# Runs a 2-rank job with only self and openib allowed.  Passes when the job
# fails the way it should: nonzero status, the bml's explanation naming
# openib's reason, and no sign of a crash.
launcher=$1
program=$2
out=$(TRANSIT_MCA_btl=self,openib "$launcher" -n 2 --timeout 60 "$program" 2>&1)
status=$?
echo "$out"
if [ "$status" -eq 0 ]; then
  echo "FAIL: the job succeeded although nothing reaches the other rank"; exit 1
fi
for want in "no transport reaches rank" "no InfiniBand/RoCE device found" "unreachable"; do
  if ! printf '%s\n' "$out" | grep -q "$want"; then
    echo "FAIL: the output does not say \"$want\""; exit 1
  fi
done
if printf '%s\n' "$out" | grep -qiE "signal|segmentation|core dumped|abort|timed out"; then
  echo "FAIL: the job crashed or hung instead of failing cleanly"; exit 1
fi
echo "PASS: exit status $status, clean failure"
