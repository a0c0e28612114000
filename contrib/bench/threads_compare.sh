#!/usr/bin/env bash
# Threads (issue 26): Transit at thread level multiple against single, two
# pairs of threads against one, and Transit against Open MPI under
# MPI_THREAD_MULTIPLE (ob1 + vader, and UCX), in alternating rounds, printing
# the median of the per-round ratios:
#
#   contrib/bench/threads_compare.sh [rounds]
#
# Every figure is of 8-byte messages between two ranks bound to separate
# cores; T pairs of threads, thread t of rank 0 talking to thread t of rank 1
# on its own tags:
#   latency   each pair's mean half round trip, averaged over the pairs
#             (lower is better);
#   rate      the messages a second of all pairs together, windows of 64
#             (higher is better).
# Transit (btl self,vader) runs transit_bench latency --stat mean and msgrate:
# at single and at multiple (pml_base_thread_level) with one pair, and with
# --threads T (multiple) for T = 2.  Open MPI runs contrib/bench/mpi_threads.c
# (the same measurements, MPI_Init_thread with MPI_THREAD_MULTIPLE) through
# run_mpi_peer.sh vader | ucx.  A run that fails or outlasts PEER_TIMEOUT
# seconds (default 300) counts as missing (nan) in its round.
#
# This machine's 2 cores hold at most one pair's two ranks without sharing: T=2
# shows the cost of threads sharing the library, not scaling.  Each round's
# line on stderr starts with the cache-line round trip before and after it
# (cacheline_pingpong; see compare.sh).  Needs a build in build/ (or
# TRANSIT_BIN) and Debian's openmpi-bin + libopenmpi-dev (UCX: its UCX pml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TRANSIT_BIN:-$(cd "$here/../.." && pwd)/build/bin}
rounds=${1:-5}
timeout_s=${PEER_TIMEOUT:-300}
source "$here/stats.sh"

# transit_pair T LEVEL -> "latency rate" (us, msg/s) of T pairs at LEVEL.
transit_pair() {
    local args=(--mca pml_base_thread_level "$2")
    [ "$1" -gt 1 ] && args+=(--threads "$1")
    local lat rate
    lat=$(transit_value self,vader latency 8 --stat mean "${args[@]}")
    rate=$(transit_value self,vader msgrate 8 "${args[@]}")
    echo "${lat:-nan} $(awk -v r="${rate:-nan}" 'BEGIN { if (r == "nan") print r; else printf "%.0f", r * 1e6 }')"
}

# mpi_pair T MODE -> "latency rate" of T pairs over Open MPI (run_mpi_peer.sh MODE).
mpi_pair() {
    local out
    out=$(PEER_PROGRAM=mpi_threads MT_THREADS=$1 timeout "$timeout_s" "$here/run_mpi_peer.sh" "$2" \
        2>/dev/null | grep '^threads ') || true
    [ -n "$out" ] || { echo "nan nan"; return; }
    awk '{print $4, $6}' <<<"$out"
}

# The configurations, measured once per round in this order.
configs=(single1 multiple1 multiple2 ob1_1 ob1_2 ucx1 ucx2)
declare -A names=([single1]="Transit single, 1 pair" [multiple1]="Transit multiple, 1 pair"
    [multiple2]="Transit multiple, 2 pairs" [ob1_1]="Open MPI ob1 + vader, 1 pair"
    [ob1_2]="Open MPI ob1 + vader, 2 pairs" [ucx1]="Open MPI UCX, 1 pair" [ucx2]="Open MPI UCX, 2 pairs")
measure() {
    case $1 in
        single1) transit_pair 1 single ;;
        multiple1) transit_pair 1 multiple ;;
        multiple2) transit_pair 2 multiple ;;
        ob1_1) mpi_pair 1 vader ;;
        ob1_2) mpi_pair 2 vader ;;
        ucx1) mpi_pair 1 ucx ;;
        ucx2) mpi_pair 2 ucx ;;
    esac
}

# The rows of the ratio table: a label, then the two configurations divided.
rows=(
    "1 pair, Transit multiple / single|multiple1|single1"
    "Transit multiple, 2 pairs / 1 pair|multiple2|multiple1"
    "1 pair, Transit multiple / Open MPI ob1 + vader|multiple1|ob1_1"
    "2 pairs, Transit multiple / Open MPI ob1 + vader|multiple2|ob1_2"
    "1 pair, Transit multiple / Open MPI UCX|multiple1|ucx1"
    "2 pairs, Transit multiple / Open MPI UCX|multiple2|ucx2"
    "Open MPI ob1 + vader, 2 pairs / 1 pair|ob1_2|ob1_1"
    "Open MPI UCX, 2 pairs / 1 pair|ucx2|ucx1"
)

declare -A lat rate lat_ratio rate_ratio now_lat now_rate
for ((r = 1; r <= rounds; r++)); do
    before=$(floor)
    for c in "${configs[@]}"; do
        read -r l m < <(measure "$c")
        now_lat[$c]=$l now_rate[$c]=$m
        lat[$c]+="$l " rate[$c]+="$m "
    done
    for row in "${rows[@]}"; do
        IFS='|' read -r label a b <<<"$row"
        lat_ratio[$label]+="$(ratio "${now_lat[$a]}" "${now_lat[$b]}") "
        rate_ratio[$label]+="$(ratio "${now_rate[$a]}" "${now_rate[$b]}") "
    done
    line="round $r: cache line ${before}->$(floor)us;"
    for c in "${configs[@]}"; do line+=" $c ${now_lat[$c]}us $(ratio "${now_rate[$c]}" 1e6)M;"; done
    echo "$line" >&2
done

echo "| 8 B, $rounds alternating rounds | latency ratio (lower is better) | per round | rate ratio (higher is better) | per round |"
echo "| --- | --- | --- | --- | --- |"
for row in "${rows[@]}"; do
    IFS='|' read -r label _ _ <<<"$row"
    echo "| $label | $(median <<<"${lat_ratio[$label]}") | ${lat_ratio[$label]}|" \
        "$(median <<<"${rate_ratio[$label]}") | ${rate_ratio[$label]}|"
done
echo
echo "| 8 B, median of $rounds rounds | latency (us) | rate (M msg/s) |"
echo "| --- | --- | --- |"
for c in "${configs[@]}"; do
    echo "| ${names[$c]} | $(median <<<"${lat[$c]}") | $(ratio "$(median <<<"${rate[$c]}")" 1e6) |"
done
