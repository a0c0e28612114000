#!/usr/bin/env bash
# Transit's Open MPI adapter against Open MPI's own vader, alternating:
#   start-up: MPI_Init + MPI_Finalize of a 4-rank job (wall time of mpirun)
#   put+fence: 40-byte MPI_Put + MPI_Win_fence epochs at 3 ranks (us per epoch)
# Each round runs Open MPI's vader, the adapter with its default
# btl_transit_include, and the adapter with btl_transit_include vader; the
# medians of the per-round ratios (Transit / Open MPI) are printed last.
#
#   contrib/bench/adapter_startup.sh [rounds]      (from the source tree, after a build)
#
# Needs: apt-get install openmpi-bin libopenmpi-dev; the adapter built in build/lib/openmpi.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TRANSIT_BIN:-$here/../../build/bin}
source "$here/stats.sh"
rounds=${1:-7}
out=${BENCH_BUILD:-${TMPDIR:-/tmp}/transit-peer-bench}
mkdir -p "$out"
command -v mpicc >/dev/null ||
    { echo "adapter_startup.sh: needs mpicc (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 2; }
[ -f "$bin/../lib/openmpi/mca_btl_transit.so" ] ||
    { echo "adapter_startup.sh: no adapter in $bin/../lib/openmpi (build with libopenmpi-dev installed)" >&2; exit 2; }
if [ ! "$out/mpi_put_fence" -nt "$here/mpi_put_fence.c" ]; then
    mpicc -O2 -Wall -o "$out/mpi_put_fence" "$here/mpi_put_fence.c"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
default_path=$(ompi_info --parsable --level 9 --param mca base |
    sed -n 's/^mca:mca:base:param:mca_base_component_path:value://p' | tr -d '"')
export OMPI_MCA_mca_base_component_path=$bin/../lib/openmpi:$default_path

# run NP EPOCHS BTL-ARGS...: prints seconds (EPOCHS=0) or us per epoch.
run() {
    local np=$1 epochs=$2
    shift 2
    if [ "$epochs" = 0 ]; then
        local t0 t1
        t0=$(date +%s.%N)
        PF_EPOCHS=0 mpirun -np "$np" --oversubscribe --mca pml ob1 "$@" "$out/mpi_put_fence"
        t1=$(date +%s.%N)
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
    else
        PF_EPOCHS=$epochs mpirun -np "$np" --oversubscribe --mca pml ob1 "$@" "$out/mpi_put_fence"
    fi
}

ompi=(--mca btl self,vader)
dflt=(--mca btl self,transit)
vonly=(--mca btl self,transit --mca btl_transit_include vader)
declare -A r
for ((i = 1; i <= rounds; i++)); do
    for test in startup putfence; do
        if [ $test = startup ]; then np=4 ep=0; else np=3 ep=2000; fi
        o=$(run $np $ep "${ompi[@]}")
        d=$(run $np $ep "${dflt[@]}")
        v=$(run $np $ep "${vonly[@]}")
        echo "round $i $test: open-mpi-vader $o, transit-default $d, transit-vader $v" >&2
        r[$test.default]+="$(ratio "$d" "$o") "
        r[$test.vader]+="$(ratio "$v" "$o") "
    done
done
echo "medians of per-round ratios (Transit / Open MPI vader), $rounds rounds:"
for k in startup.default startup.vader putfence.default putfence.vader; do
    echo "  $k $(echo "${r[$k]}" | median)   (rounds: ${r[$k]})"
done
