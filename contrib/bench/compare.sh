#!/usr/bin/env bash
# Transit against Open MPI 4.1 on the same machine, alternating the two programs
# (A B A B ...) and printing the median of the per-round ratios, as
# ../shared/bench/README.md asks: these machines are too noisy for absolute times.
#   contrib/bench/compare.sh vader|tcp [rounds]
# Needs: a build in build/ and Debian's openmpi-bin + libopenmpi-dev.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${TRANSIT_BIN:-$top/build/bin}
peer=${PEER_BENCH:-$top/../shared/bench/run_ompi.sh}
mode=${1:-vader}
rounds=${2:-5}
case $mode in
  vader) btl=self,vader ;;
  tcp) btl=self,tcp ;;
  *) echo "usage: $0 vader|tcp [rounds]" >&2; exit 2 ;;
esac

transit() {  # test size -> value
    TRANSIT_MCA_btl=$btl "$bin/transit_run" -n 2 --bind-to core "$bin/transit_bench" "$1" \
        --min "$2" --max "$2" --csv 2>/dev/null | grep -v '^#' | tail -1 | cut -d, -f2
}
ompi_run() {
    PP_SIZES=8,65536,1048576,4194304 PP_TRIALS=3 "$peer" "$mode" 2>/dev/null
}
ompi_lat() { awk -v s="$2" '$1==s {print $2}' <<<"$1"; }
ompi_bw() { awk -v s="$2" '$1==s {print $5}' <<<"$1"; }
ompi_rate() { sed -n 's/^msgrate_8B.*median \([0-9]*\) msg.*/\1/p' <<<"$1"; }

declare -A ratios
for ((r = 1; r <= rounds; r++)); do
    out=$(ompi_run)
    t_lat=$(transit latency 8)
    ratios[lat8]+="$(awk -v a="$t_lat" -v b="$(ompi_lat "$out" 8)" 'BEGIN{print a/b}') "
    for s in 65536 1048576 4194304; do
        t_bw=$(transit bw $s)
        ratios[bw$s]+="$(awk -v a="$t_bw" -v b="$(ompi_bw "$out" $s)" 'BEGIN{print a/b}') "
    done
    t_rate=$(transit msgrate 8)  # M msg/s
    ratios[rate8]+="$(awk -v a="$t_rate" -v b="$(ompi_rate "$out")" 'BEGIN{print a*1e6/b}') "
    echo "round $r: ompi lat8=$(ompi_lat "$out" 8)us transit lat8=${t_lat}us" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END{print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
echo "| metric ($mode, $rounds alternating rounds) | Transit / Open MPI (median) | rounds |"
echo "| --- | --- | --- |"
echo "| 8 B half-round-trip latency (lower is better) | $(median <<<"${ratios[lat8]}") | ${ratios[lat8]}|"
for s in 65536 1048576 4194304; do
    echo "| bandwidth at $s B (higher is better) | $(median <<<"${ratios[bw$s]}") | ${ratios[bw$s]}|"
done
echo "| 8 B message rate (higher is better) | $(median <<<"${ratios[rate8]}") | ${ratios[rate8]}|"
