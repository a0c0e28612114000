#!/bin/sh
# netns_job.sh TRANSIT_RUN NP PROGRAM [ARGS...]
# Two "nodes" on one machine: two network namespaces joined by a veth pair,
# 10.231.0.1/24 and 10.231.0.2/24.  Even ranks run in the first, odd ranks in
# the second, so tcp must carry the cross-namespace pairs over the veth (never
# loopback) while same-namespace pairs use loopback.  Needs root and iproute2;
# exits 77 (skipped) without them.  The namespaces are deleted on exit.
if [ "$1" = "--in-namespace" ]; then
  shift
  case $((TRANSIT_RANK % 2)) in
    0) ns=$TCP_TEST_NS_A ;;
    *) ns=$TCP_TEST_NS_B ;;
  esac
  exec ip netns exec "$ns" "$@"
fi
run=$1 np=$2
shift 2
. "$(dirname "$0")/../fixtures/veth_pair.sh"
tag=$$
a=tcpA$tag b=tcpB$tag va=tva$tag vb=tvb$tag
veth_pair_or_skip netns_job "$a" "$b" "$va" "$vb" 10.231.0
export TCP_TEST_NS_A="$a" TCP_TEST_NS_B="$b"
# The launcher runs in the first namespace; PMIx's server must be reachable
# from the second one too, so it listens on the veth instead of loopback.
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$va"
ip netns exec "$a" "$run" -n "$np" --timeout 120 --tag-output sh "$0" --in-namespace "$@"
