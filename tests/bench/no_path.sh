#!/bin/sh
# no_path.sh TRANSIT_RUN TRANSIT_BENCH: a two-rank latency run with only the
# self transport, which reaches no other rank.  Passes when the job fails
# cleanly in init, says the peer is unreachable, and prints no table.
. "$(dirname "$0")/../fixtures/clean_failure.sh"
out=$(TRANSIT_MCA_btl=self "$1" -n 2 --timeout 60 "$2" latency --max 8 -i 20 -w 2 2>&1)
status=$?
echo "$out"
expect_clean_failure "$status" "$out" "of 2 is unreachable from rank"
if printf '%s\n' "$out" | grep -qF "# bytes"; then
  echo "FAIL: a table was printed for a peer no transport reaches"; exit 1
fi
echo "PASS: exit status $status, no table"
