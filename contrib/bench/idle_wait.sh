#!/usr/bin/env bash
# What a server's wait costs: its CPU while idle, and the 8 B RPC round trip
# when it sleeps in the kernel between requests against when it busy-polls.
#
#   contrib/bench/idle_wait.sh [rounds] [tcp|shm ...]     (rounds 0: the idle figures only)
#
# Idle: transit_bench rpc --listen waits for requests, alone, for 10 s; its
# CPU (utime + stime from /proc/<pid>/stat) in per cent of a core, under
# pml_base_wait_policy nap and block (the default), spin for reference, and
# block with the progress thread (pml_base_progress_thread=1).
# Round trip: transit_bench rpc --connect, 8 B, 20,000 synchronous calls,
# against a server under
#   blocked  wait_policy=block, wait_spin_time=0, wait_spin_count=0: it sleeps in epoll_wait
#            before every request (the cost of a wake-up each call)
#   busy     wait_policy=spin: it polls without pause
# alternating the two round by round; the client busy-polls in both.  Printed:
# median round trips (ucx_perftest's statistic) and the ratio blocked / busy
# (issue targets: at most 2x over tcp, at most +5 us over shared memory), and
# ucx_perftest -t am_lat over tcp beside them when ucx-utils is installed.
# Server on core 1, client on core 0.  Needs a build in build/ (or TRANSIT_BIN).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TRANSIT_BIN:-$(cd "$here/../.." && pwd)/build/bin}
rounds=${1:-5}
shift $(($# < 1 ? $# : 1))
transports=("$@")
[ ${#transports[@]} -gt 0 ] || transports=(tcp shm)
source "$here/stats.sh"

work=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT

btl_of() { [ "$1" = tcp ] && echo self,tcp || echo self,vader; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# start_server TRANSPORT ENV...: starts a server (pid in $server, address in $address).
start_server() {
    local btl
    btl=$(btl_of "$1")
    shift
    rm -f "$work/address"
    env TRANSIT_MCA_btl="$btl" "$@" taskset -c 1 "$bin/transit_bench" rpc --listen \
        > "$work/address" &
    server=$!
    for _ in $(seq 100); do [ -s "$work/address" ] && break; sleep 0.1; done
    address=$(head -n 1 "$work/address")
}
stop_server() {
    kill "$server" 2> /dev/null || true
    wait "$server" 2> /dev/null || true
}

idle_cpu() {  # TRANSPORT POLICY [ENV...]: per cent of a core over 10 s
    start_server "$1" TRANSIT_MCA_pml_base_wait_policy="$2" "${@:3}"
    sleep 1  # past start-up
    local t0 t1 hz
    hz=$(getconf CLK_TCK)
    t0=$(ticks "$server")
    sleep 10
    t1=$(ticks "$server")
    stop_server
    awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { printf "%.2f", 100 * (b - a) / hz / 10 }'
}

rpc_rt() {  # TRANSPORT blocked|busy: the median 8 B round trip (us)
    if [ "$2" = blocked ]; then
        start_server "$1" TRANSIT_MCA_pml_base_wait_policy=block TRANSIT_MCA_pml_base_wait_spin_time=0 \
            TRANSIT_MCA_pml_base_wait_spin_count=0
    else
        start_server "$1" TRANSIT_MCA_pml_base_wait_policy=spin
    fi
    TRANSIT_MCA_btl=$(btl_of "$1") TRANSIT_MCA_pml_base_wait_policy=spin taskset -c 0 \
        "$bin/transit_bench" rpc --connect "$address" --csv --min 8 --max 8 -i 20000 2> /dev/null |
        awk -F, '/^[0-9]/ {print $4}'
    stop_server
}

for tr in "${transports[@]}"; do
    line="idle server over $tr, % of a core over 10 s:"
    for policy in nap block spin; do line+=" $policy $(idle_cpu "$tr" "$policy")"; done
    line+=" block+progress_thread $(idle_cpu "$tr" block TRANSIT_MCA_pml_base_progress_thread=1)"
    echo "$line"
done

declare -A blocked busy
for ((r = 1; r <= rounds; r++)); do
    for tr in "${transports[@]}"; do
        if ((r % 2)); then
            b=$(rpc_rt "$tr" blocked) p=$(rpc_rt "$tr" busy)
        else
            p=$(rpc_rt "$tr" busy) b=$(rpc_rt "$tr" blocked)
        fi
        blocked[$tr]+="$b " busy[$tr]+="$p "
        echo "round $r $tr 8 B round trip (median): blocked ${b}us busy ${p}us" >&2
    done
done
((rounds > 0)) && for tr in "${transports[@]}"; do
    b=$(echo "${blocked[$tr]}" | median) p=$(echo "${busy[$tr]}" | median)
    echo "$tr 8 B round trip, median of $rounds rounds: blocked ${b}us busy ${p}us" \
        "ratio $(ratio "$b" "$p") difference $(awk -v a="$b" -v b="$p" 'BEGIN {printf "%.2f", a - b}')us"
done
if command -v ucx_perftest > /dev/null; then
    echo "ucx_perftest -t am_lat over tcp (lo), 8 B round trip: $(awk -v h="$(ucx_am_lat 8 20000 -x tcp -d lo)" \
        'BEGIN { if (h == "") print "nan"; else printf "%.3f", 2 * h }')us"
fi
