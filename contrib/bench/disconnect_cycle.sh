#!/bin/sh
# The cost of a client's life with a server (connect, one 64 B request and its
# answer, disconnect; a 1 MiB one every 100th time), graceful disconnect
# against abortive (pml_base_disconnect_linger=0: the transport closes at
# once, as before disconnect waited for the server's word), alternating.
#   contrib/bench/disconnect_cycle.sh [btl] [rounds] [cycles]   (tcp 5 300)
# Runs test_dynamic_cycles from build/bin (or $bin); prints one line per run
# and the median milliseconds per cycle of each, then a CSV.
set -eu
btl=${1:-tcp}
rounds=${2:-5}
cycles=${3:-300}
bin=${bin:-$(dirname "$0")/../../build/bin}
. "$(dirname "$0")/stats.sh"

run() {  # linger -> milliseconds per cycle
    TRANSIT_MCA_btl=self,$btl TRANSIT_MCA_pml_base_disconnect_linger=$1 \
        "$bin/test_dynamic_cycles" "$cycles" 2>/dev/null |
        awk -v n="$cycles" '/^cycles/ {printf "%.3f", $4 / n}'
}

graceful=""
abortive=""
for r in $(seq "$rounds"); do
    a=$(run 0)
    g=$(run 5000)
    echo "round $r: abortive $a ms, graceful $g ms per cycle"
    abortive="$abortive $a"
    graceful="$graceful $g"
done
ma=$(echo "$abortive" | median)
mg=$(echo "$graceful" | median)
echo "median over $rounds rounds of $cycles cycles over $btl: abortive $ma ms, graceful $mg ms" \
    "per cycle (graceful / abortive $(ratio "$mg" "$ma"))"
echo "btl,cycles,abortive_ms,graceful_ms"
echo "$btl,$cycles,$ma,$mg"
