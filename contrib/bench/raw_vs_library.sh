#!/usr/bin/env bash
# A raw btl against the library it drives, alternating the programs
# (Transit, library, Transit, ...) and printing the median of the per-round
# ratios: the check that a component adds no more than 10 % to the library's
# own latency.
#
#   contrib/bench/raw_vs_library.sh uct|ofi [rounds]
#
#   uct   transit_bench --raw-btl uct, btl_uct_transports=posix, against
#         - uct_pingpong (contrib/bench): UCT's own am_short ping-pong timed
#           exactly as transit_bench times (median of blocks' means, no clock
#           read inside a block); the two differ only in the btl;
#         - ucx_perftest -t am_lat -d memory -x posix, its 50.0%ile column.
#           perftest reads the cycle counter after every round trip and prints
#           the median of those single round trips, a different measurement:
#           that clock read costs a loop from 0 to 12 % depending on its shape
#           (see docs/performance.md), so perftest is a sanity
#           check beside uct_pingpong, not the ruler.
#   ofi   transit_bench --raw-btl ofi --stat mean, btl_ofi_provider_include=shm,
#         against fi_pingpong -p shm -e rdm (usec/xfer: the mean of a loop it
#         times as a whole).
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
  uct)
    command -v ucx_perftest > /dev/null || { echo "needs ucx_perftest (ucx-utils)" >&2; exit 2; }
    [ -x "$bin/uct_pingpong" ] || { echo "needs $bin/uct_pingpong (built with btl/uct)" >&2; exit 2; } ;;
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

# The library's own tools, a server on core 0 and the client on core 1.
perftest() { ucx_am_lat 8 200000 -d memory -x posix; }
pingpong() { fi_lat 8 200000 -p shm -e rdm; }
uct_reference() { "$bin/uct_pingpong" 200000 2>/dev/null | awk '{print $(NF-1)}'; }

source "$here/stats.sh"

first="" second=""
for ((r = 1; r <= rounds; r++)); do
    before=$(floor)
    if [ "$mode" = uct ]; then
        t=$(transit block)
        u=$(uct_reference)
        p=$(perftest)
        first+="$(ratio "$t" "$u") "
        second+="$(ratio "$t" "$p") "
        echo "round $r: cache line ${before}->$(floor)us; transit ${t}us; uct_pingpong ${u}us;" \
            "ucx_perftest ${p}us" >&2
    else
        t=$(transit mean)
        l=$(pingpong)
        first+="$(ratio "$t" "$l") "
        echo "round $r: cache line ${before}->$(floor)us; transit ${t}us; fi_pingpong ${l}us" >&2
    fi
done
echo "| raw $mode btl / library, 8 B half round trip ($rounds alternating rounds; target <= 1.1) | median of the ratios | per round |"
echo "| --- | --- | --- |"
if [ "$mode" = uct ]; then
    echo "| against uct_pingpong (the same loop and statistic) | $(median <<<"$first") | $first|"
    echo "| against ucx_perftest's 50.0%ile | $(median <<<"$second") | $second|"
else
    echo "| against fi_pingpong (means) | $(median <<<"$first") | $first|"
fi
