#!/bin/sh
# A two-rank job over UCT's tcp whose rank 1 has 8 KiB tcp segments while rank
# 0 keeps the module's 66 KiB: a 64 KiB eager message from rank 0 would stop
# rank 1 inside UCT (an assertion), so both ranks must refuse each other and
# say which variables to set, and the job must fail cleanly.
. "$(dirname "$0")/../fixtures/clean_failure.sh"
launcher=$1
program=$2
out=$(TRANSIT_MCA_btl=self,uct TRANSIT_MCA_btl_uct_transports=tcp/lo \
  "$launcher" -n 2 --timeout 60 sh -c '
    if [ "$TRANSIT_RANK" = 1 ]; then export UCX_TCP_TX_SEG_SIZE=8k UCX_TCP_RX_SEG_SIZE=8k; fi
    exec "$0" latency --min 65536 --max 65536' "$program" 2>&1)
status=$?
echo "$out"
expect_clean_failure "$status" "$out" \
  "r0] warning: uct:tcp/lo: rank 1 not reached: its tcp interface takes active messages of up to" \
  "r1] warning: uct:tcp/lo: rank 0 not reached: its tcp interface sends active messages of up to" \
  "set UCX_TCP_RX_SEG_SIZE and UCX_TCP_TX_SEG_SIZE alike in every process" \
  "no transport reaches rank 1 from rank 0" "no transport reaches rank 0 from rank 1"
echo "PASS: exit status $status, both ranks refused each other"
