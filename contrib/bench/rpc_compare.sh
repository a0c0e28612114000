#!/usr/bin/env bash
# The RPC round trip between separate programs (a server and clients that are
# not one job), Transit against the client/server modes of the libraries'
# own tools, alternating them round by round:
#
#   contrib/bench/rpc_compare.sh [rounds]
#
#   transit      transit_bench rpc --listen / --connect (tcp: dynamic peers
#                travel over tcp), the mean round trip of 8 B calls;
#   ucx_perftest -t am_lat over UCX's tcp transport on lo, server and client;
#   fi_pingpong  -p tcp -e msg (libfabric's tcp provider), server and client.
#
# The two tools print half round trips: they are doubled here.  Then Transit's
# requests per second with 1, 2, 4 and 8 client ranks (one transit_run job of
# clients) at 8 B, 4 KiB and 1 MiB.  Needs a build in build/ (or TRANSIT_BIN),
# ucx-utils and libfabric-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TRANSIT_BIN:-$(cd "$here/../.." && pwd)/build/bin}
rounds=${1:-9}
command -v ucx_perftest > /dev/null || { echo "needs ucx_perftest (ucx-utils)" >&2; exit 2; }
command -v fi_pingpong > /dev/null || { echo "needs fi_pingpong (libfabric-bin)" >&2; exit 2; }
source "$here/stats.sh"

# transit_rpc CLIENTS ARGS...: the clients' CSV rows (bytes,round_trip_us,requests_per_s).
transit_rpc() {
    local clients=$1 address
    shift
    address=$(mktemp)
    taskset -c 0 "$bin/transit_bench" rpc --listen --serve "$clients" > "$address" &
    local server=$!
    for _ in $(seq 100); do [ -s "$address" ] && break; sleep 0.1; done
    "$bin/transit_run" -n "$clients" "$bin/transit_bench" rpc --connect "$(head -n 1 "$address")" \
        --csv "$@" 2>/dev/null | grep -E '^[0-9]+,'
    wait "$server"
    rm -f "$address"
}
transit_8b() { transit_rpc 1 --min 8 --max 8 -i 20000 | awk -F, '{print $2}'; }

perftest_tcp() {
    local port=$((20000 + RANDOM % 20000))
    taskset -c 0 ucx_perftest -x tcp -d lo -t am_lat -s 8 -n 20000 -p "$port" > /dev/null 2>&1 &
    sleep 0.3
    taskset -c 1 ucx_perftest localhost -x tcp -d lo -t am_lat -s 8 -n 20000 -p "$port" \
        2>/dev/null | awk '/Final:/ {print 2 * $3}'
    wait
}
pingpong_tcp() {
    local port=$((20000 + RANDOM % 20000))
    taskset -c 0 fi_pingpong -p tcp -e msg -S 8 -I 20000 -B "$port" > /dev/null 2>&1 &
    sleep 0.3
    taskset -c 1 fi_pingpong -p tcp -e msg -S 8 -I 20000 -P "$port" localhost 2>/dev/null |
        awk '$1 == "8" {print 2 * $7}'
    wait
}

against_ucx="" against_fi=""
for ((r = 1; r <= rounds; r++)); do
    t=$(transit_8b)
    u=$(perftest_tcp)
    f=$(pingpong_tcp)
    against_ucx+="$(ratio "$t" "$u") "
    against_fi+="$(ratio "$t" "$f") "
    echo "round $r: transit ${t}us; ucx_perftest ${u}us; fi_pingpong ${f}us (round trips)" >&2
done
echo "| 8 B RPC round trip over tcp, Transit / tool ($rounds alternating rounds; target <= 1.1) | median of the ratios | per round |"
echo "| --- | --- | --- |"
echo "| against ucx_perftest am_lat -x tcp | $(median <<<"$against_ucx") | $against_ucx|"
echo "| against fi_pingpong -p tcp -e msg | $(median <<<"$against_fi") | $against_fi|"
echo
echo "| clients | round trip 8 B (us) | requests/s 8 B | round trip 4 KiB (us) | requests/s 4 KiB | round trip 1 MiB (us) | requests/s 1 MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for clients in 1 2 4 8; do
    row=$(transit_rpc "$clients" | awk -F, '{printf " %s | %s |", $2, $3}')
    echo "| $clients |$row"
done
