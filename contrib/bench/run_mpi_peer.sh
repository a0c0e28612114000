#!/usr/bin/env bash
# Open MPI (Debian's openmpi-bin) running contrib/bench/mpi_pingpong.c on two
# ranks on separate cores: the peer side of compare.sh and plot.sh.
#
#   contrib/bench/run_mpi_peer.sh vader|vader-nocma|tcp|ucx|ucx-tcp [mpirun args]
#
# PP_SIZES, PP_TRIALS and PP_WINDOW are read by mpi_pingpong (see its header).
# PEER_PROGRAM names another program of contrib/bench to run instead
# (mpi_threads, for threads_compare.sh; it reads MT_*).  The program is built
# with mpicc into $BENCH_BUILD (default $TMPDIR/transit-peer-bench) when
# missing or older than its source.
# Needs: apt-get install openmpi-bin libopenmpi-dev (ucx modes: Open MPI's UCX pml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${BENCH_BUILD:-${TMPDIR:-/tmp}/transit-peer-bench}
command -v mpicc >/dev/null ||
    { echo "run_mpi_peer.sh: needs mpicc (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 2; }
prog=${PEER_PROGRAM:-mpi_pingpong}
[ -f "$here/$prog.c" ] || { echo "run_mpi_peer.sh: no $here/$prog.c" >&2; exit 2; }
mkdir -p "$out"
if [ ! "$out/$prog" -nt "$here/$prog.c" ] || [ ! "$out/$prog" -nt "$here/mpi_bench.h" ]; then
    mpicc -O2 -Wall -pthread -o "$out/$prog" "$here/$prog.c"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
mode=${1:-vader}
shift || true
ucx=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
case $mode in
    vader) args=(--mca pml ob1 --mca btl self,vader) ;;
    vader-nocma) args=(--mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none) ;;
    tcp) args=(--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo) ;;
    ucx) args=("${ucx[@]}") ;;
    ucx-tcp) args=("${ucx[@]}" -x UCX_TLS=self,tcp -x UCX_NET_DEVICES=lo) ;;
    *) echo "usage: $0 vader|vader-nocma|tcp|ucx|ucx-tcp [mpirun args]" >&2; exit 2 ;;
esac
exec mpirun -np 2 --bind-to core --map-by core "${args[@]}" "$@" "$out/$prog"
