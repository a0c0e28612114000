#!/usr/bin/env bash
# Transit against its peers on the same machine, alternating the two programs
# (A B A B ...) and printing the median of the per-round ratios:
# these machines are too noisy for absolute times.
#
#   contrib/bench/compare.sh MODE [rounds]
#
#   MODE          Transit side                               peer side
#   vader         transit_bench, btl=self,vader              Open MPI ob1 + vader
#   vader-mem     the same with --mem-alloc buffers          Open MPI ob1 + vader
#   vader-ucx     transit_bench, btl=self,vader              Open MPI + UCX (shared memory)
#   tcp           transit_bench, btl=self,tcp                Open MPI ob1 + tcp (lo)
#   ofi | uct     transit_bench, btl=self,ofi | self,uct     Open MPI + UCX (shared memory)
#   uct-tcp       transit_bench, btl=self,uct over UCT's     Open MPI + UCX with UCX_TLS=self,tcp
#                 tcp on lo (btl_uct_transports=tcp/lo)      on lo (run_mpi_peer.sh ucx-tcp)
#   adapter       mpi_pingpong, ob1 + btl self,transit       mpi_pingpong, ob1 + btl self,vader
#                 (Transit's vader inside Open MPI)
#
# Ratios are Transit / peer: below 1 is better for latency, above 1 for
# bandwidth and message rate.  Each round's line on stderr starts with the
# machine's cache-line round trip before and after it (cacheline_pingpong): a
# round whose two values differ ran the two sides in different machine modes.
# Needs a build in build/ (or TRANSIT_BIN) and Debian's openmpi-bin +
# libopenmpi-dev.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${TRANSIT_BIN:-$top/build/bin}
peer=${PEER_BENCH:-$here/run_mpi_peer.sh}
mode=${1:-vader}
rounds=${2:-5}
sizes=(65536 1048576 4194304)
bench_args=()
case $mode in
  vader) btl=self,vader peer_mode=vader ;;
  vader-mem) btl=self,vader peer_mode=vader bench_args=(--mem-alloc) ;;
  vader-ucx) btl=self,vader peer_mode=ucx ;;
  tcp) btl=self,tcp peer_mode=tcp ;;
  ofi | uct) btl=self,$mode peer_mode=ucx ;;
  uct-tcp) btl=self,uct peer_mode=ucx-tcp sizes=(65536 1048576)
    export TRANSIT_MCA_btl_uct_transports=tcp/lo ;;
  adapter) peer_mode=vader sizes=(65536 1048576) ;;
  *) echo "usage: $0 vader|vader-mem|vader-ucx|tcp|ofi|uct|uct-tcp|adapter [rounds]" >&2; exit 2 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
csv_sizes=8,$(IFS=,; echo "${sizes[*]}")

peer_run() { PP_SIZES=$csv_sizes PP_TRIALS=3 "$peer" "$peer_mode" 2>/dev/null; }

# mpi_pingpong (built by run_mpi_peer.sh) over Transit's adapter, Transit's vader.
adapter_run() {
    local exe=${BENCH_BUILD:-${TMPDIR:-/tmp}/transit-peer-bench}/mpi_pingpong
    local default
    default=$(ompi_info --parsable --level 9 --param mca base |
        sed -n 's/^mca:mca:base:param:mca_base_component_path:value://p' | tr -d '"')
    OMPI_MCA_mca_base_component_path=$bin/../lib/openmpi:$default PP_SIZES=$csv_sizes PP_TRIALS=3 \
        mpirun -np 2 --bind-to core --map-by core --mca pml ob1 --mca btl self,transit \
        --mca btl_transit_include vader "$exe" 2>/dev/null
}

# mpi_pingpong's table: size lat_med lat_min lat_mean bw_med bw_max; then a rate line.
col_lat() { awk -v s="$2" '$1==s {print $2}' <<<"$1"; }
col_bw() { awk -v s="$2" '$1==s {print $5}' <<<"$1"; }
col_rate() { sed -n 's/^msgrate_8B.*median \([0-9]*\) msg.*/\1/p' <<<"$1"; }

source "$here/stats.sh"
transit() { transit_value "$btl" "$1" "$2" "${bench_args[@]}"; }  # test size -> us, MB/s or M msg/s

declare -A ratios
for ((r = 1; r <= rounds; r++)); do
    floor_before=$(floor)
    out=$(peer_run)
    if [ "$mode" = adapter ]; then
        mine=$(adapter_run)
        t_lat=$(col_lat "$mine" 8)
        for s in "${sizes[@]}"; do ratios[bw$s]+="$(ratio "$(col_bw "$mine" "$s")" "$(col_bw "$out" "$s")") "; done
        ratios[rate8]+="$(ratio "$(col_rate "$mine")" "$(col_rate "$out")") "
        t_rate=$(awk -v a="$(col_rate "$mine")" 'BEGIN{print a/1e6}')
    else
        t_lat=$(transit latency 8)
        for s in "${sizes[@]}"; do ratios[bw$s]+="$(ratio "$(transit bw "$s")" "$(col_bw "$out" "$s")") "; done
        t_rate=$(transit msgrate 8)  # M msg/s
        ratios[rate8]+="$(ratio "$(awk -v a="$t_rate" 'BEGIN{print a*1e6}')" "$(col_rate "$out")") "
    fi
    ratios[lat8]+="$(ratio "$t_lat" "$(col_lat "$out" 8)") "
    p_rate=$(awk -v a="$(col_rate "$out")" 'BEGIN{print a/1e6}')
    echo "round $r: cache line ${floor_before}->$(floor)us; peer lat8=$(col_lat "$out" 8)us" \
        "rate=${p_rate}M; transit lat8=${t_lat}us rate=${t_rate}M" >&2
done

echo "| metric ($mode vs Open MPI $peer_mode, $rounds alternating rounds) | Transit / peer (median) | per round |"
echo "| --- | --- | --- |"
echo "| 8 B half-round-trip latency (lower is better) | $(median <<<"${ratios[lat8]}") | ${ratios[lat8]}|"
for s in "${sizes[@]}"; do
    echo "| bandwidth at $s B (higher is better) | $(median <<<"${ratios[bw$s]}") | ${ratios[bw$s]}|"
done
echo "| 8 B message rate (higher is better) | $(median <<<"${ratios[rate8]}") | ${ratios[rate8]}|"
