#!/bin/sh
# transit_bench rpc as a user runs it: the server alone, then a job of client
# ranks connecting to it by address.  $1: transit_run, $2: transit_bench,
# $3: client ranks; the rest goes to the clients.  Prints the clients' table.
set -eu
run=$1
bench=$2
clients=$3
shift 3
address=$(mktemp)
trap 'kill $pid 2>/dev/null || true; rm -f "$address"' EXIT
"$bench" rpc --listen --serve "$clients" > "$address" &
pid=$!
for _ in $(seq 100); do [ -s "$address" ] && break; sleep 0.1; done
[ -s "$address" ] || { echo "rpc_job: the server printed no address"; exit 1; }
"$run" -n "$clients" --timeout 120 "$bench" rpc --connect "$(head -n 1 "$address")" "$@"
# The server leaves once every client has said goodbye.
wait $pid
echo "rpc_job: server exited 0"
