#!/bin/sh
# netns_peers.sh PROGRAM [ARGS...]
# A server and its clients on two "nodes": two network namespaces joined by a
# veth pair (10.232.0.1/24 and 10.232.0.2/24).  PROGRAM's driver starts the
# server in the first (TRANSIT_TEST_SERVER_NS) and every client in the second
# (TRANSIT_TEST_CLIENT_NS), so the clients reach the server by its address over
# the veth, never loopback.  Needs root and iproute2; exits 77 (skipped) without
# them.  The namespaces are deleted on exit.
. "$(dirname "$0")/../fixtures/veth_pair.sh"
tag=$$
a=dynA$tag b=dynB$tag va=dva$tag vb=dvb$tag
veth_pair_or_skip netns_peers "$a" "$b" "$va" "$vb" 10.232.0
TRANSIT_TEST_SERVER_NS="$a" TRANSIT_TEST_CLIENT_NS="$b" "$@"
