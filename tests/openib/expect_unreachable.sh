#!/bin/sh
# Runs a 2-rank job with only self and openib allowed.  Passes when the job
# fails the way it should: nonzero status, the bml's explanation naming
# openib's reason, and no sign of a crash.
. "$(dirname "$0")/../fixtures/clean_failure.sh"
launcher=$1
program=$2
out=$(TRANSIT_MCA_btl=self,openib "$launcher" -n 2 --timeout 60 "$program" 2>&1)
status=$?
echo "$out"
expect_clean_failure "$status" "$out" "no transport reaches rank" \
  "no InfiniBand/RoCE device found" "unreachable"
echo "PASS: exit status $status, clean failure"
