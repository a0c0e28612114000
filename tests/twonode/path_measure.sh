#!/bin/sh
# path_measure.sh STRESS
# The transport to a rank on another node is chosen by what is measured
# (bml_base_measure, on by default): four ranks on two nodes over the default
# selection, each rank must print its decision for both ranks of the other
# node (bml_base_verbose 10: the round trips per candidate and the module
# chosen for small and large messages), deliver every message of the stress
# program over the chosen paths, and print no error line.
# Needs what twonode.sh needs: exits 77 (skipped) without it.
here=$(cd "$(dirname "$0")" && pwd)
stress=$1
out=$(mktemp "${TMPDIR:-/tmp}/path_measure.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
TRANSIT_MCA_bml_base_verbose=10 sh "$here/twonode.sh" -n 4 -t 90 "$stress" --messages 400 \
  > "$out" 2>&1
status=$?
[ "$status" = 77 ] && exit 77
grep -E "measured|small messages over|no probe answered|PASS|FAIL|error:" "$out"
fail=0
if [ "$status" != 0 ]; then
  echo "path_measure: FAIL: the job exited $status"; fail=1
fi
# Ranks map by node: 0 and 2 on nodeA, 1 and 3 on nodeB.
for pair in "0 1" "0 3" "2 1" "2 3" "1 0" "1 2" "3 0" "3 2"; do
  set -- $pair
  if ! grep -q "r$1\] bml: rank $2: small messages over [^ ]*, large over" "$out"; then
    echo "path_measure: FAIL: rank $1 printed no measured choice for rank $2"; fail=1
  fi
done
if grep -q "error:" "$out"; then
  echo "path_measure: FAIL: an error line in the job's output"; fail=1
fi
[ "$fail" = 0 ] && echo "path_measure: PASS"
exit "$fail"
