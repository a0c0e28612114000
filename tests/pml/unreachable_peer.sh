#!/bin/sh
# unreachable_peer.sh TRANSIT_RUN PROGRAM: a job whose ranks no selected
# transport joins (btl=self) fails in init on every rank, at once, naming the
# ranks each cannot reach (C++: InitError; C: TRANSIT_UNREACHABLE); before,
# the send failed and the receive and both finalizes hung.  Our own rank needs
# no transport until we send to ourselves: btl=vader,tcp works and logs no
# error.  (Bounds in seconds are far above what a loaded machine needs: what
# they catch is a hang.)
run=$1 prog=$2
fail() { echo "FAIL: $*"; exit 1; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }

# --keep-going: every rank runs to its own end, so each one's line is seen.
for api in cxx c; do
  start=$(ms)
  out=$(TRANSIT_MCA_btl=self "$run" -n 3 --keep-going --timeout 30 "$prog" $api 2>&1)
  status=$? took=$(( $(ms) - start ))
  echo "$out"
  [ "$status" -eq 3 ] || fail "$api: exit status $status, expected the ranks' 3"
  [ "$took" -lt 10000 ] || fail "$api: the job took $took ms"
  for r in 0 1 2; do
    others=$(echo "0 1 2" | tr ' ' '\n' | grep -v "^$r$" | tr '\n' ' ')
    set -- $others
    if [ $(( $2 - $1 )) -eq 1 ]; then list="ranks $1-$2"; else list="ranks $1, $2"; fi
    want="$list of 3 are unreachable from rank $r: no selected transport reaches them"
    case $api in
      cxx) want="rank $r: InitError (unreachable): $want" ;;
      c) want="rank $r: transit_init returned -4: $want" ;;
    esac
    printf '%s\n' "$out" | grep -qF -- "$want" || fail "$api: no line \"$want\""
  done
  printf '%s\n' "$out" | grep -qF "no transport reaches rank 1 from rank 0:" ||
    fail "$api: the bml's explanation is missing"
done

# Without --keep-going the first rank's failure ends the job, with its status.
start=$(ms)
out=$(TRANSIT_MCA_btl=self "$run" -n 2 --timeout 30 "$prog" cxx 2>&1)
status=$? took=$(( $(ms) - start ))
echo "$out"
[ "$status" -eq 3 ] || fail "exit status $status, expected 3"
[ "$took" -lt 10000 ] || fail "the job took $took ms"

out=$(TRANSIT_MCA_btl=vader,tcp "$run" -n 2 --timeout 30 "$prog" cxx 2>&1)
status=$?
echo "$out"
[ "$status" -eq 0 ] || fail "btl=vader,tcp: exit status $status"
[ "$(printf '%s\n' "$out" | grep -c ': done$')" -eq 2 ] || fail "btl=vader,tcp: not done twice"
if printf '%s\n' "$out" | grep -qi "error"; then fail "btl=vader,tcp logged an error"; fi

echo "PASS"
