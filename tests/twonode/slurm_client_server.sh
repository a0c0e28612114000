#!/bin/sh
# slurm_client_server.sh ECHO_SERVER ECHO_CLIENT, run by slurm.sh --steps on
# nodeA of its Slurm cluster: a server and its clients as separate Slurm jobs
# on the two nodes, as an RPC service runs under a batch system.  The server
# (examples/echo) starts with `srun --mpi=pmix -w nodeA` and prints its
# address; three clients, each `srun --mpi=pmix -w nodeB`, send a word and
# must get it back; a last one tells the server to quit.  Every step must
# exit 0 and print no error line.
server=$1 client=$2
dir=$(mktemp -d) || exit 1
trap 'kill "$spid" 2>/dev/null; rm -rf "$dir"' EXIT
srun --mpi=pmix -N 1 -n 1 -w nodeA "$server" > "$dir/address" 2> "$dir/server.err" &
spid=$!
for _ in $(seq 300); do [ -s "$dir/address" ] && break; sleep 0.1; done
address=$(head -n 1 "$dir/address")
fail=0
if [ -z "$address" ]; then
  echo "client_server: FAIL: the server printed no address in 30 s"; cat "$dir/server.err"
  exit 1
fi
echo "client_server: server at $address"
for word in hello across nodes; do
  answer=$(srun --mpi=pmix -N 1 -n 1 -w nodeB "$client" "$address" "$word" 2>> "$dir/client.err")
  status=$?
  echo "client_server: sent '$word', got '$answer' (status $status)"
  if [ "$status" != 0 ] || [ "$answer" != "$word" ]; then
    echo "client_server: FAIL: the client's answer"; fail=1
  fi
done
srun --mpi=pmix -N 1 -n 1 -w nodeB "$client" "$address" --quit > /dev/null 2>> "$dir/client.err" ||
  { echo "client_server: FAIL: the quitting client"; fail=1; }
wait "$spid"
status=$?
cat "$dir/server.err" "$dir/client.err"
if [ "$status" != 0 ]; then
  echo "client_server: FAIL: the server's step exited $status"; fail=1
fi
if grep -q "error:" "$dir/server.err" "$dir/client.err"; then
  echo "client_server: FAIL: an error line"; fail=1
fi
[ "$fail" = 0 ] && echo "client_server: PASS"
exit "$fail"
