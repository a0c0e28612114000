#!/usr/bin/env bash
# Two builds of Transit against each other (a change against the tree before it),
# alternating A B A B ... and printing the median of the per-round ratios B / A:
#
#   contrib/bench/ab.sh BIN_A BIN_B [rounds] [btl ...]
#
# BIN_A, BIN_B: the bin/ directories of the two builds (each with transit_run
# and transit_bench).  For each btl list (default: self,vader and self,tcp) a
# round runs 8 B latency, 8 B message rate and 1 MiB bandwidth on both builds,
# the order of the two swapped every round.  Ratios are B / A: below 1 is
# better for latency, above 1 for bandwidth and message rate.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BIN_A BIN_B [rounds] [btl ...]" >&2; exit 2; }
bin_a=$(cd "$1" && pwd) bin_b=$(cd "$2" && pwd)
rounds=${3:-11}
shift $(($# < 3 ? $# : 3))
btls=("$@")
[ ${#btls[@]} -gt 0 ] || btls=(self,vader self,tcp)
bin=$bin_a
source "$here/stats.sh"

# build btl test size -> the figure (us, MB/s or M msg/s)
run() { bin=$1 transit_value "$2" "$3" "$4"; }

tests=("latency 8" "msgrate 8" "bw 1048576")
declare -A ratios
for ((r = 1; r <= rounds; r++)); do
    before=$(floor)
    for btl in "${btls[@]}"; do
        for t in "${tests[@]}"; do
            read -r name size <<<"$t"
            if ((r % 2)); then
                a=$(run "$bin_a" "$btl" "$name" "$size") b=$(run "$bin_b" "$btl" "$name" "$size")
            else
                b=$(run "$bin_b" "$btl" "$name" "$size") a=$(run "$bin_a" "$btl" "$name" "$size")
            fi
            ratios[$btl $t]+="$(ratio "$b" "$a") "
            echo "round $r $btl $t: A $a B $b" >&2
        done
    done
    echo "round $r: cache line ${before}->$(floor)us" >&2
done

echo "| btl | test | B / A (median of $rounds alternating rounds) | per round |"
echo "| --- | --- | --- | --- |"
for btl in "${btls[@]}"; do
    for t in "${tests[@]}"; do
        echo "| $btl | $t B | $(median <<<"${ratios[$btl $t]}") | ${ratios[$btl $t]}|"
    done
done
