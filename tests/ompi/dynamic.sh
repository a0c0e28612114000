#!/usr/bin/env bash
# Open MPI's dynamic processes over the adapter (tests/ompi/dynamic.c), and
# which Transit transport carried the other job's processes:
#   dynamic.sh <adapter dir> <program> spawn <ranks> <children> <transit transports> <expected> [rounds]
#   dynamic.sh <adapter dir> <program> connect <ranks> <transit transports> <expected>
# <transit transports>: btl_transit_include, or "default" for the adapter's own.
#   dynamic.sh <adapter dir> <program> ompi_vader
# <expected>: the Transit transport every process must have reached the
# other job's processes through (the adapter says so at btl_transit_verbose 1;
# for vader, Transit's vader also logs each connection it admitted from the
# other job at verbosity 10, and there must be one per connection opened).
# spawn with rounds > 1: the parents spawn new children after each round's
# left; the connections those children opened to the parents are released
# (their departure is no error to Open MPI).
# connect: two jobs started by two mpiruns meet through MPI_Open_port /
# MPI_Comm_accept and MPI_Comm_connect, the port name passed in a file; Open
# MPI 4.1 needs its ompi-server for connect/accept across mpiruns.
# ompi_vader: the same spawn over Open MPI's own vader (btl self,vader) fails
# with "unreachable" and does not hang.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
adapter_dir=$1 program=$2 mode=$3
shift 3
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
export TRANSIT_OMPI_VERBOSE=10 TRANSIT_OMPI_TEST_TIMEOUT=120

# Every process names each of the other job's processes once, with the
# transport that reaches it; none is left unreached.
check_reach() {
  local log=$1 want=$2 expected=$3
  local got
  # tcp's modules are named by interface (tcp:lo).
  got=$(grep -Ec "of another job: reached through $expected(:[^ ]+)? " "$log")
  grep "of another job: reached through" "$log" | grep -Ev "through $expected(:[^ ]+)? " &&
    fail "a process of the other job was reached through another transport than $expected"
  grep "no Transit transport reaches" "$log" && fail "a process of the other job was not reached"
  [ "$got" -eq "$want" ] || fail "$got of $want processes of the other job reached through $expected"
  echo "$got processes of the other job reached through Transit's $expected"
  if [ "$expected" = vader ]; then
    got=$(grep -Ec "transit btl:vader: a client \(pid [0-9]+, rank [0-9]+ of its job\) joined as peer" "$log")
    [ "$got" -eq "$want" ] || fail "Transit's vader admitted $got of the $want connections"
    echo "Transit's vader admitted all $got connections between the jobs"
  fi
}

case $mode in
spawn)
  ranks=$1 children=$2 include=${3/#default/} expected=$4 rounds=${5:-1}
  "$here/run_mpi.sh" "$adapter_dir" "$ranks" "$include" "$program" spawn "$children" "$rounds" \
    >"$work/log" 2>&1
  rc=$?
  cat "$work/log"
  [ "$rc" -eq 0 ] || fail "mpirun exited with $rc"
  grep -q "dynamic spawn: $((ranks * children * 6)) messages checked from $children remote" \
    "$work/log" || fail "the parents did not check every message"
  grep -q "dynamic child: $((ranks * children * 6)) messages checked from $ranks remote" \
    "$work/log" || fail "the children did not check every message"
  check_reach "$work/log" $((2 * ranks * children * rounds)) "$expected"
  if [ "$rounds" -gt 1 ]; then
    released=$(grep -c "(another job's process that connected to this one) released" "$work/log")
    [ "$released" -gt 0 ] || fail "no connection of a child that left was released"
    echo "$released connections of children that left released"
  fi
  ;;
connect)
  ranks=$1 include=${2/#default/} expected=$3
  ompi-server --no-daemonize -r "$work/uri" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do [ -s "$work/uri" ] && break; sleep 0.1; done
  [ -s "$work/uri" ] || fail "ompi-server wrote no URI: $(cat "$work/server.log")"
  export TRANSIT_OMPI_MPIRUN_ARGS="--ompi-server file:$work/uri"
  "$here/run_mpi.sh" "$adapter_dir" "$ranks" "$include" "$program" accept "$work/port" \
    >"$work/accept.log" 2>&1 &
  accept_pid=$!
  "$here/run_mpi.sh" "$adapter_dir" "$ranks" "$include" "$program" connect "$work/port" \
    >"$work/connect.log" 2>&1
  rc_connect=$?
  wait "$accept_pid"
  rc_accept=$?
  cat "$work/accept.log" "$work/connect.log"
  if [ "$rc_accept" -ne 0 ] || [ "$rc_connect" -ne 0 ]; then
    fail "mpirun exited with $rc_accept (accept) and $rc_connect (connect)"
  fi
  for role in accept connect; do
    grep -q "dynamic $role: $((ranks * ranks * 6)) messages checked from $ranks remote" \
      "$work/$role.log" || fail "the $role job did not check every message"
  done
  cat "$work/accept.log" "$work/connect.log" >"$work/log"
  check_reach "$work/log" $((2 * ranks * ranks)) "$expected"
  ;;
ompi_vader)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  timeout --kill-after=10 60 mpirun -n 1 --oversubscribe --mca pml ob1 --mca btl self,vader \
    "$program" spawn 1 >"$work/log" 2>&1
  rc=$?
  cat "$work/log"
  case $rc in
  0 | 124 | 137) fail "Open MPI's vader: exit $rc, expected a failure (not a timeout)" ;;
  esac
  grep -q "Unreachable" "$work/log" || fail "Open MPI's vader: no \"Unreachable\" error"
  echo "Open MPI's own vader cannot reach the spawned job (exit $rc, Unreachable)"
  ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS
