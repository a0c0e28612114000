#!/bin/sh
# exit_status_is.sh [--skip CODE] STATUS COMMAND [ARG]...
# Runs COMMAND for ctest, its output (stdout and stderr) passed through, and
# exits 0 only when COMMAND exited with STATUS, adding nothing to the output.
# With --skip, a COMMAND that exits with CODE (it found nothing to test) makes
# this script exit with CODE too, for the entry's SKIP_RETURN_CODE.  On any
# other status it prints the line
#   exit_status_is: FAILED: exit status N, expected STATUS
# and exits 1.  ctest ignores the exit status of an entry that has a
# PASS_REGULAR_EXPRESSION, so transit_add_status_test (cmake/TransitTesting.cmake)
# makes that line one of its FAIL_REGULAR_EXPRESSIONs: the entry fails on it
# whatever else its output matches.
skip=
if [ "$1" = "--skip" ]; then
  skip=$2
  shift 2
fi
if [ $# -lt 2 ]; then
  echo "exit_status_is: FAILED: usage: exit_status_is.sh [--skip CODE] STATUS COMMAND [ARG]..."
  exit 1
fi
want=$1
shift
for code in "$want" ${skip:+"$skip"}; do
  case $code in
    '' | *[!0-9]*)
      echo "exit_status_is: FAILED: '$code' is not an exit status"
      exit 1 ;;
  esac
done
"$@" 2>&1
got=$?
if [ -n "$skip" ] && [ "$got" -eq "$skip" ]; then
  exit "$got"
fi
if [ "$got" -ne "$want" ]; then
  echo "exit_status_is: FAILED: exit status $got, expected $want"
  exit 1
fi
