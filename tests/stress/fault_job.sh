#!/bin/sh
# fault_job.sh TRANSIT_RUN NP PROGRAM [ARGS...]
# Runs a --fault stress job, in which one rank kills itself: transit_run then
# exits with that rank's status whatever the others did, so the verdict is read
# from the output: every one of the NP-1 survivors must print its PASS line,
# and no rank a FAIL line.
run=$1 np=$2
shift 2
out=$("$run" -n "$np" --timeout 120 --tag-output --keep-going "$@" --fault 2>&1)
echo "$out"
passed=$(echo "$out" | grep -c "stress: rank [0-9]* PASS")
if echo "$out" | grep -q "stress: rank [0-9]* FAIL"; then
  echo "fault_job: a survivor failed"; exit 1
fi
if [ "$passed" -ne $((np - 1)) ]; then
  echo "fault_job: $passed of $((np - 1)) survivors passed"; exit 1
fi
if ! echo "$out" | grep -q "raises SIGKILL"; then
  echo "fault_job: no rank was killed"; exit 1
fi
echo "fault_job: all $passed survivors passed"
