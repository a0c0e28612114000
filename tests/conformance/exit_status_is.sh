#!/bin/sh
# exit_status_is.sh STATUS PATTERN COMMAND [ARG]...
# Runs COMMAND and passes when it exits with STATUS and its output (stdout and
# stderr) has a line matching the extended regular expression PATTERN.  A crash
# (death by a signal) always fails, whatever STATUS is.
want=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
if [ "$status" -gt 128 ]; then
  echo "exit_status_is: the program died of signal $((status - 128)), expected exit status $want"
  exit 1
fi
if [ "$status" -ne "$want" ]; then
  echo "exit_status_is: exit status $status, expected $want"; exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "exit_status_is: no line matches: $pattern"; exit 1
fi
echo "exit_status_is: exit status $status and the expected message"
