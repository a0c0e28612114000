#!/bin/sh
# twonode_bench.sh BUILD_DIR
# Latency, bandwidth and message rate between two "nodes" of
# tests/twonode/twonode.sh (network namespaces joined by a veth pair, one rank
# on each, started by Open MPI's mpirun): Transit over tcp, ofi (tcp;ofi_rxm)
# and uct (tcp), then Open MPI's own ob1/tcp with mpi_pingpong.c (one row per
# size: bytes, latency median/min/mean in us, bandwidth median/max in MB/s;
# then the 8-byte message rate).  Needs root.
set -e
build=${1:?usage: twonode_bench.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
twonode="sh $here/../../tests/twonode/twonode.sh -n 2 -t 300"
bench=$build/bin/transit_bench
for t in tcp ofi uct; do
  for test in latency bw msgrate; do
    echo "== transit $t $test"
    case $test in
      latency) args="--min 8 --max 1M" ;;
      bw) args="--min 1k --max 1M" ;;
      msgrate) args="--min 8 --max 8" ;;
    esac
    # Only rank 0 reports.
    TRANSIT_MCA_btl=self,$t $twonode "$bench" $test $args 2>&1 |
      sed -n 's/^\[1,0\]<stdout>://p'
  done
done
exe=$(mktemp "${TMPDIR:-/tmp}/mpi_pingpong.XXXXXX")
trap 'rm -f "$exe"' EXIT
mpicc -O2 -o "$exe" "$here/mpi_pingpong.c"
echo "== Open MPI ob1/tcp"
# Both ranks must read the same sizes: the variables go to the other node too.
$twonode --mca pml ob1 --mca btl self,tcp -x PP_SIZES=8,1024,65536,1048576 -x PP_TRIALS=3 \
  "$exe" 2>&1 | sed -n 's/^\[1,0\]<stdout>://p'
