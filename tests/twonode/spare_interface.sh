#!/bin/sh
# spare_interface.sh ECHO_SERVER ECHO_CLIENT STRESS
# Two nodes that each carry a spare interface in one private subnet
# (172.31.0.0/16 on both) that is not joined: tcp must find the path that
# answers, not declare the other node's ranks failed, not print an error for
# the address that did not answer, and answer a client fast.
#  1. A client/server pair across the nodes (the echo example): no "error:"
#     line, and the client's first answer no more than 1.5 s slower than that of
#     a client told to leave the spare interface alone (btl_tcp_if_exclude),
#     measured just before (the machine may be loaded).  The measured client
#     waits up to 5 s for a server's connection (btl_tcp_server_connect_timeout),
#     so a client that waits for the spare address shows it (ARP gives up
#     after about 3 s).
#  2. A job over self,vader,tcp (twonode.sh --spare, the stress program with
#     200 messages): every message delivered, no "error:" line.
#  3. The same job over the default selection (ofi and uct beside tcp).
# Needs root, iproute2 and mpirun: exits 77 (skipped) without them.
here=$(cd "$(dirname "$0")" && pwd)
server=$1 client=$2 stress=$3
. "$here/../fixtures/veth_pair.sh"
tag=$$
a=spA$tag b=spB$tag va=spa$tag vb=spb$tag sa=sps$tag
work=$(mktemp -d "${TMPDIR:-/tmp}/spare.XXXXXX") || exit 1
cleanup() {
  spare_nodes_down "$a" "$b" "$va" "$sa"
  rm -rf "$work"
}
trap 'status=$?; cleanup; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
spare_nodes_up "$a" "$b" "$va" "$vb" 10.234.0 "$sa"
case $? in
  0) ;;
  77) echo "spare_interface: needs root, iproute2 and network namespaces; skipped"; exit 77 ;;
  *) echo "spare_interface: cannot set up the two nodes"; exit 1 ;;
esac
fail=0

# 1. client/server over the default selection's tcp (another node: tcp carries it).
ip netns exec "$a" "$server" > "$work/server.out" 2> "$work/server.err" &
pid=$!
for _ in $(seq 100); do [ -s "$work/server.out" ] && break; sleep 0.1; done
if [ ! -s "$work/server.out" ]; then
  echo "spare_interface: FAIL: the server printed no address in 10 s"; cat "$work/server.err"
  kill "$pid"; exit 1
fi
address=$(head -n 1 "$work/server.out")
start=$(date +%s%N)
TRANSIT_MCA_btl_tcp_if_exclude="${sa}b" ip netns exec "$b" "$client" "$address" hello \
  > /dev/null 2>> "$work/client.err"
base=$((($(date +%s%N) - start) / 1000000))
start=$(date +%s%N)
answer=$(TRANSIT_MCA_btl_tcp_server_connect_timeout=5 ip netns exec "$b" "$client" "$address" \
  hello 2>> "$work/client.err")
status=$?
ms=$((($(date +%s%N) - start) / 1000000))
ip netns exec "$b" "$client" "$address" --quit > /dev/null 2>> "$work/client.err"
wait $pid
cat "$work/server.err" "$work/client.err"
echo "spare_interface: client/server: answer '$answer' (status $status) in $ms ms" \
  "($base ms without the spare interface)"
if [ "$status" != 0 ] || [ "$answer" != hello ]; then
  echo "spare_interface: FAIL: the client got no answer"; fail=1
fi
if [ "$ms" -gt $((base + 1500)) ]; then
  echo "spare_interface: FAIL: the first answer took $ms ms ($base ms without the spare)"; fail=1
fi
if grep -q "error:" "$work/server.err" "$work/client.err"; then
  echo "spare_interface: FAIL: an error line in a successful client/server run"; fail=1
fi

# 2. a job across the nodes over tcp.
TRANSIT_MCA_btl=self,vader,tcp sh "$here/twonode.sh" --spare -n 2 -t 60 "$stress" --messages 200 \
  > "$work/job.out" 2>&1
status=$?
cat "$work/job.out"
if [ "$status" = 77 ]; then exit 77; fi
if [ "$status" != 0 ]; then
  echo "spare_interface: FAIL: the job over tcp exited $status"; fail=1
fi
if grep -q "error:" "$work/job.out"; then
  echo "spare_interface: FAIL: an error line in the job's output"; fail=1
fi
# 3. the same job over the default selection (no btl list): ofi's tcp;ofi_rxm
#    and UCT's tcp beside tcp, the bml striping across them.  Each must use
#    the interface the other node answers on (the one holding the address of
#    the node's name), not the spare one its library lists first.
env -u TRANSIT_MCA_btl sh "$here/twonode.sh" --spare -n 2 -t 60 "$stress" --messages 200 \
  > "$work/default.out" 2>&1
status=$?
cat "$work/default.out"
if [ "$status" != 0 ]; then
  echo "spare_interface: FAIL: the job over the default selection exited $status"; fail=1
fi
if grep -q "error:" "$work/default.out"; then
  echo "spare_interface: FAIL: an error line in the default selection's job"; fail=1
fi
[ "$fail" = 0 ] && echo "spare_interface: PASS"
exit $fail
