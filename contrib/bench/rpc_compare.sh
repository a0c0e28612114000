#!/usr/bin/env bash
# The RPC round trip between separate programs (a server and clients that are
# not one job), Transit against the client/server modes of the libraries' own
# tools and a gRPC unary echo, alternating them round by round:
#
#   contrib/bench/rpc_compare.sh [rounds] [tcp|shm ...]
#
# tcp  Transit with btl self,tcp; ucx_perftest -t am_lat -x tcp -d lo;
#      fi_pingpong -p tcp -e msg; gRPC over 127.0.0.1.
# shm  Transit with btl self,vader; ucx_perftest -t am_lat -d memory -x posix;
#      fi_pingpong -p shm -e rdm; gRPC over a unix socket (it has no shared memory).
#
# Transit is transit_bench rpc --listen / --connect (synchronous calls); the two
# tools print half round trips, doubled here.  Each pair compares one statistic:
# ucx_perftest's typical figure is the median of round trips timed one by one
# (its 50.0%ile), matched with Transit's median; fi_pingpong's is the mean of
# its whole loop, matched with Transit's mean (a call the scheduler or the
# hypervisor held up moves a mean, not a median).  Each round prints the
# machine's cache-line round trip before and after (stats.sh floor): a round
# whose two values differ ran in two modes.  The gRPC echo (contrib/bench/grpc/,
# built by this script with protoc and grpc_cpp_plugin into bench-grpc/ beside
# the build's bin/) is a synchronous stub against a synchronous service.  Then, per transport,
# Transit's first answer to a new client and its requests per second with 1, 2,
# 4 and 8 client ranks (one transit_run job of clients) at 8 B, 4 KiB and 1 MiB.
# Needs a build in build/ (or TRANSIT_BIN), ucx-utils, libfabric-bin,
# libgrpc++-dev and protobuf-compiler-grpc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TRANSIT_BIN:-$(cd "$here/../.." && pwd)/build/bin}
rounds=${1:-9}
shift $(($# < 1 ? $# : 1))
transports=("$@")
[ ${#transports[@]} -gt 0 ] || transports=(tcp shm)
for tool in ucx_perftest fi_pingpong protoc grpc_cpp_plugin; do
    command -v $tool > /dev/null || { echo "needs $tool (see the header of $0)" >&2; exit 2; }
done
source "$here/stats.sh"

work=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT

# Built once beside the Transit build, again when its sources change.
grpc_dir=$(dirname "$bin")/bench-grpc
build_grpc_echo() {
    if [ "$grpc_dir/grpc_echo" -nt "$here/grpc/grpc_echo.cpp" ] &&
        [ "$grpc_dir/grpc_echo" -nt "$here/grpc/echo.proto" ]; then
        return
    fi
    echo "building the gRPC echo in $grpc_dir..." >&2
    mkdir -p "$grpc_dir"
    protoc -I"$here/grpc" --cpp_out="$grpc_dir" --grpc_out="$grpc_dir" \
        --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$here/grpc/echo.proto"
    g++ -std=c++20 -O2 -I"$grpc_dir" "$here/grpc/grpc_echo.cpp" "$grpc_dir/echo.pb.cc" \
        "$grpc_dir/echo.grpc.pb.cc" $(pkg-config --cflags --libs grpc++ protobuf) \
        -o "$grpc_dir/grpc_echo"
}
build_grpc_echo

btl_of() { [ "$1" = tcp ] && echo self,tcp || echo self,vader; }

# transit_rpc TRANSPORT CLIENTS ARGS...: the clients' output (CSV rows
# bytes,round_trip_us,requests_per_s and the '# first answer' line).
transit_rpc() {
    local btl clients=$2 address=$work/address
    btl=$(btl_of "$1")
    shift 2
    rm -f "$address"
    # One client: the server on core 1 and the client rank on core 0
    # (transit_run binds its rank 0 there), as the tools run, with the
    # launcher left to float: pinned beside the client, its PMIx server and
    # handshake guard wake-ups take the client's core from it.  More clients
    # than cores: no binding.
    local server_cpus=1 bind=core
    ((clients == 1)) || server_cpus=0-1 bind=none
    TRANSIT_MCA_btl=$btl taskset -c $server_cpus "$bin/transit_bench" rpc --listen \
        --serve "$clients" > "$address" &
    local server=$!
    for _ in $(seq 100); do [ -s "$address" ] && break; sleep 0.1; done
    TRANSIT_MCA_btl=$btl "$bin/transit_run" -n "$clients" --bind-to $bind \
        "$bin/transit_bench" rpc --connect "$(head -n 1 "$address")" --csv "$@" 2> /dev/null |
        grep -E '^[0-9]+,|^# first'
    wait "$server"
}
transit_rt() {  # TRANSPORT SIZE ITERATIONS: the mean round trip
    transit_rpc "$1" 1 --min "$2" --max "$2" -i "$3" | awk -F, '/^[0-9]/ {print $2}'
}
transit_rt_both() {  # TRANSPORT SIZE ITERATIONS: the mean and the median round trip
    transit_rpc "$1" 1 --min "$2" --max "$2" -i "$3" | awk -F, '/^[0-9]/ {print $2, $4}'
}

grpc_rt() {  # TRANSPORT SIZE ITERATIONS
    local address=127.0.0.1:$((20000 + RANDOM % 20000))
    [ "$1" = shm ] && address=unix:$work/echo.sock
    taskset -c 0 "$grpc_dir/grpc_echo" serve "$address" &
    local server=$!
    taskset -c 1 "$grpc_dir/grpc_echo" call "$address" "$2" "$3" || echo nan
    kill "$server"
    wait "$server" 2> /dev/null || true
    rm -f "$work/echo.sock"
}

tool_rt() {  # TRANSPORT TOOL: the 8 B round trip
    local half
    case "$1 $2" in
        "tcp ucx") half=$(ucx_am_lat 8 20000 -x tcp -d lo) ;;
        "shm ucx") half=$(ucx_am_lat 8 20000 -d memory -x posix) ;;
        "tcp fi") half=$(fi_lat 8 20000 -p tcp -e msg) ;;
        "shm fi") half=$(fi_lat 8 20000 -p shm -e rdm) ;;
    esac
    awk -v h="$half" 'BEGIN { if (h == "") print "nan"; else printf "%.3f", 2 * h }'
}

sizes=(8 4096 1048576)
iterations() { case $1 in 8) echo 20000 ;; 4096) echo 10000 ;; *) echo 200 ;; esac; }
declare -A ratios
for ((r = 1; r <= rounds; r++)); do
    for tr in "${transports[@]}"; do
        before=$(floor)
        read -r t tm < <(transit_rt_both "$tr" 8 20000)
        u=$(tool_rt "$tr" ucx)
        f=$(tool_rt "$tr" fi)
        ratios[$tr ucx]+="$(ratio "$tm" "$u") "
        ratios[$tr fi]+="$(ratio "$t" "$f") "
        line="round $r $tr 8 B: transit mean ${t}us median ${tm}us ucx_perftest ${u}us fi_pingpong ${f}us"
        line+=" (cache line ${before}->$(floor)us);"
        for s in "${sizes[@]}"; do
            n=$(iterations "$s")
            if ((r % 2)); then
                t=$(transit_rt "$tr" "$s" "$n") g=$(grpc_rt "$tr" "$s" "$n")
            else
                g=$(grpc_rt "$tr" "$s" "$n") t=$(transit_rt "$tr" "$s" "$n")
            fi
            ratios[$tr grpc $s]+="$(ratio "$t" "$g") "
            line+=" $s B transit ${t}us gRPC ${g}us"
        done
        echo "$line (round trips)" >&2
    done
done

echo "| RPC round trip, Transit / peer ($rounds alternating rounds) | target | median of the ratios | per round |"
echo "| --- | --- | --- | --- |"
for tr in "${transports[@]}"; do
    echo "| $tr 8 B median, against ucx_perftest am_lat typical | <= 1.1 | $(median <<<"${ratios[$tr ucx]}") | ${ratios[$tr ucx]}|"
    echo "| $tr 8 B mean, against fi_pingpong | <= 1.1 | $(median <<<"${ratios[$tr fi]}") | ${ratios[$tr fi]}|"
    for s in "${sizes[@]}"; do
        echo "| $tr $s B, against gRPC unary echo | < 0.2 | $(median <<<"${ratios[$tr grpc $s]}") | ${ratios[$tr grpc $s]}|"
    done
done

for tr in "${transports[@]}"; do
    echo
    echo "Transit over $tr ($(btl_of "$tr")):"
    echo
    echo "| clients | first answer (us) | round trip 8 B (us) | requests/s 8 B | round trip 4 KiB (us) | requests/s 4 KiB | round trip 1 MiB (us) | requests/s 1 MiB |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    for clients in 1 2 4 8; do
        row=$(transit_rpc "$tr" "$clients" | awk -F, '
            /^# first/ { first = $0; sub(/.*: /, "", first); sub(/ us/, "", first) }
            /^[0-9]/ { rest = rest sprintf(" %s | %s |", $2, $3) }
            END { printf " %s |%s", first, rest }')
        echo "| $clients |$row"
    done
done
