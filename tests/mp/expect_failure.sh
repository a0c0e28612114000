#!/bin/sh
# expect_failure.sh TRANSIT_RUN PROGRAM: a job where one rank fails one case
# must end with status 1 and rank 0's summary naming that case and rank.
out=$("$1" -n 3 --timeout 60 --tag-output "$2" 2>&1)
status=$?
printf '%s\n' "$out"
if [ "$status" -ne 1 ]; then
  echo "expect_failure: transit_run exited $status, expected 1"; exit 1
fi
if ! printf '%s\n' "$out" | grep -q '\[mp\] FAILED Harness.FailsOnRankOneOnly on rank 1$'; then
  echo "expect_failure: no summary line naming the failed case and rank"; exit 1
fi
echo "expect_failure: the job failed as it should"
