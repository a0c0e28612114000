#!/bin/sh
# The README's client/server example, as a user runs it: the echo server and
# its clients started separately.  $1: echo_server, $2: echo_client.
set -eu
server=$1
client=$2
out=$(mktemp)
trap 'kill $pid 2>/dev/null || true; rm -f "$out"' EXIT
"$server" > "$out" &
pid=$!
for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.1; done
[ -s "$out" ] || { echo "the server printed no address in 10 s"; exit 1; }
address=$(head -n 1 "$out")
answer=$("$client" "$address" hello world)
[ "$answer" = "hello
world" ] || { echo "unexpected answer: $answer"; exit 1; }
"$client" "$address" --quit > /dev/null
wait $pid
echo "example: PASS"
