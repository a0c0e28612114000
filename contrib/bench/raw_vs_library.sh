#!/usr/bin/env bash
# A raw btl against the library it drives, alternating the two programs
# (Transit, library, Transit, ...) and printing the median of the per-round
# ratios: the check that a component adds no more than 10 % to the library's
# own latency.
#
#   contrib/bench/raw_vs_library.sh uct|ofi [rounds]
#
#   uct   transit_bench --raw-btl uct, btl_uct_transports=posix
#         vs ucx_perftest -t am_lat -d memory -x posix
#   ofi   transit_bench --raw-btl ofi, btl_ofi_provider_include=shm
#         vs fi_pingpong -p shm -e rdm
#
# Each side is summed up the same way (transit_bench --stat): ucx_perftest's
# 50.0%ile column is the median of round trips timed one by one, its overall
# column and fi_pingpong's usec/xfer are means.  The medians are the fair pair:
# both sides read the cycle counter after every round trip, which costs a
# shared-memory ping-pong here about 8 %; perftest's mean includes that cost,
# Transit's does not.  (Before the eleventh session Transit's default, the
# median of blocks' means, was set against perftest's median: that left the
# timing cost out of Transit's side only.)
#
# 8-byte messages, both sides on cores 0 and 1.  Each round's line on stderr
# starts with the machine's cache-line half round trip before and after it
# (cacheline_pingpong): a round whose two values differ mixed the modes.
# Needs a build in build/ (or TRANSIT_BIN) and Debian's ucx-utils or
# libfabric-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TRANSIT_BIN:-$(cd "$here/../.." && pwd)/build/bin}
mode=${1:-uct}
rounds=${2:-9}

case $mode in
  uct) command -v ucx_perftest > /dev/null || { echo "needs ucx_perftest (ucx-utils)" >&2; exit 2; } ;;
  ofi) command -v fi_pingpong > /dev/null || { echo "needs fi_pingpong (libfabric-bin)" >&2; exit 2; } ;;
  *) echo "usage: $0 uct|ofi [rounds]" >&2; exit 2 ;;
esac

transit() {  # $1: the statistic
    local var=TRANSIT_MCA_btl_uct_transports=posix
    [ "$mode" = ofi ] && var=TRANSIT_MCA_btl_ofi_provider_include=shm
    env "$var" "$bin/transit_run" -n 2 --bind-to core "$bin/transit_bench" latency \
        --raw-btl "$mode" --min 8 --max 8 -i 200000 --stat "$1" --csv 2>/dev/null |
        awk -F, '$1 == "8" {print $2}'
}

# The library's own ping-pong, a server on core 0 and the client on core 1:
# "median mean" for ucx_perftest, "mean" for fi_pingpong.
library() {
    local port=$((20000 + RANDOM % 20000))
    if [ "$mode" = uct ]; then
        taskset -c 0 ucx_perftest -d memory -x posix -t am_lat -s 8 -n 200000 -p "$port" \
            > /dev/null 2>&1 &
        sleep 0.3
        taskset -c 1 ucx_perftest localhost -d memory -x posix -t am_lat -s 8 -n 200000 \
            -p "$port" 2>/dev/null | awk '/Final:/ {print $3, $5}'
    else
        taskset -c 0 fi_pingpong -p shm -e rdm -S 8 -I 200000 -B "$port" > /dev/null 2>&1 &
        sleep 0.3
        taskset -c 1 fi_pingpong -p shm -e rdm -S 8 -I 200000 -P "$port" localhost 2>/dev/null |
            awk '$1 == "8" {print $7}'
    fi
    wait
}

floor() { "$bin/cacheline_pingpong" 200000 2>/dev/null | awk '{print $5}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "nan"; else printf "%.3f", a / b }'; }
median() {
    tr ' ' '\n' <<<"$1" | grep -v '^$' | grep -v nan | sort -g |
        awk '{v[NR]=$1} END {if (NR) print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; else print "nan"}'
}

medians="" means=""
for ((r = 1; r <= rounds; r++)); do
    before=$(floor)
    t_mean=$(transit mean)
    [ "$mode" = uct ] && t_median=$(transit median)
    read -r l_first l_second <<<"$(library)"
    if [ "$mode" = uct ]; then
        medians+="$(ratio "$t_median" "$l_first") "
        means+="$(ratio "$t_mean" "$l_second") "
        echo "round $r: cache line ${before}->$(floor)us; median transit ${t_median}us" \
            "library ${l_first}us; mean transit ${t_mean}us library ${l_second}us" >&2
    else
        means+="$(ratio "$t_mean" "$l_first") "
        echo "round $r: cache line ${before}->$(floor)us; mean transit ${t_mean}us" \
            "library ${l_first}us" >&2
    fi
done
echo "| raw $mode btl / library, 8 B half round trip ($rounds alternating rounds; target <= 1.1) | median of the ratios | per round |"
echo "| --- | --- | --- |"
[ "$mode" = uct ] && echo "| median of single round trips (both timed alike) | $(median "$medians") | $medians|"
echo "| mean$([ "$mode" = uct ] && echo " (perftest pays its timing, Transit does not)") | $(median "$means") | $means|"
