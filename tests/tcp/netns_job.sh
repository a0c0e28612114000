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
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1; then
  echo "netns_job: needs root and iproute2; skipped"; exit 77
fi
tag=$$
a=tcpA$tag b=tcpB$tag va=tva$tag vb=tvb$tag
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT INT TERM
if ! ip netns add "$a" || ! ip netns add "$b"; then
  echo "netns_job: cannot create network namespaces here; skipped"; exit 77
fi
set -e
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add 10.231.0.1/24 dev "$va"
ip -n "$b" addr add 10.231.0.2/24 dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up
set +e
# tcp only uses interfaces that are up with a carrier: wait for the veth's.
for i in $(seq 50); do
  ip -n "$a" link show "$va" | grep -q 'state UP' && ip -n "$b" link show "$vb" | grep -q 'state UP' && break
  sleep 0.1
done
export TCP_TEST_NS_A="$a" TCP_TEST_NS_B="$b"
# The launcher runs in the first namespace; PMIx's server must be reachable
# from the second one too, so it listens on the veth instead of loopback.
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$va"
ip netns exec "$a" "$run" -n "$np" --timeout 120 --tag-output sh "$0" --in-namespace "$@"
