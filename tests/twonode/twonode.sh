#!/bin/sh
# twonode.sh [-n NP] [-t SECONDS] [--keep-going] [--spare] [--mca NAME VALUE]... [-x NAME=VALUE]... [--] PROGRAM [ARGS...]
# Runs PROGRAM under Open MPI's mpirun on two "nodes" made on this machine:
# network namespaces joined by a veth pair (10.233.0.1/24 and 10.233.0.2/24),
# each with its own hostname (nodeA, nodeB: UTS namespaces).  mpirun runs on
# nodeA with the host file "nodeA slots=2 / nodeB slots=2" and starts the
# orted of nodeB through agent.sh, as it would through ssh; ranks are mapped
# by node (rank 0 on nodeA, rank 1 on nodeB, ...).  NP defaults to 2.
# --keep-going: a rank that dies does not end the job (mpirun's recovery).
# --mca: an Open MPI parameter for mpirun (its own MPI programs' settings).
# -x NAME=VALUE: an environment variable for every rank (mpirun's -x).
# --spare: each node also gets a spare interface in 172.31.0.0/16 (nodeA
# 172.31.0.1, nodeB 172.31.0.2) whose other end leads nowhere: one subnet on
# both nodes, not joined, as management or storage networks often are.
# TRANSIT_* variables are passed to every rank.  Needs root, iproute2,
# unshare and mpirun: exits 77 (skipped) without them.  Every namespace and
# file it makes is removed on exit, whatever the job did.
here=$(cd "$(dirname "$0")" && pwd)
np=2 limit=120 keep="" spare=""
while [ $# -gt 0 ]; do
  case $1 in
    -n) np=$2; shift 2 ;;
    -t) limit=$2; shift 2 ;;
    --keep-going) keep="$keep --enable-recovery --mca orte_abort_on_non_zero_status 0"; shift ;;
    --mca) keep="$keep --mca $2 $3"; shift 3 ;;
    -x) keep="$keep -x $2"; shift 2 ;;
    --spare) spare=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: twonode.sh [-n NP] [-t SECONDS] [--keep-going] [--spare] [--mca NAME VALUE]... [--] PROGRAM [ARGS...]" >&2
  exit 2
fi
skip() { echo "twonode: $*; skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
for tool in unshare mpirun timeout; do
  command -v $tool >/dev/null 2>&1 || skip "needs $tool"
done
. "$here/../fixtures/veth_pair.sh"

# Names unique to this run: parallel runs never share a namespace or a veth.
tag=$$
a=twnA$tag b=twnB$tag va=twa$tag vb=twb$tag sa=tws$tag
work=$(mktemp -d "${TMPDIR:-/tmp}/twonode.XXXXXX") || exit 1
cleanup() {
  spare_nodes_down "$a" "$b" "$va" "$sa"
  rm -rf "/etc/netns/$a" "/etc/netns/$b" "$work"
}
trap 'status=$?; cleanup; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
unshare --uts true 2>/dev/null || skip "cannot create UTS namespaces here"
if [ -n "$spare" ]; then
  spare_nodes_up "$a" "$b" "$va" "$vb" 10.233.0 "$sa"
else
  veth_pair_up "$a" "$b" "$va" "$vb" 10.233.0
fi
case $? in
  0) ;;
  77) skip "needs root, iproute2 and network namespaces" ;;
  *) echo "twonode: cannot set up the two nodes"; exit 1 ;;
esac
for ns in "$a" "$b"; do
  # ip netns exec shows /etc/netns/<name>/hosts as /etc/hosts: each node
  # resolves both names, as on a cluster.
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.233.0.1 nodeA\n10.233.0.2 nodeB\n' > "/etc/netns/$ns/hosts"
done
printf 'nodeA slots=2\nnodeB slots=2\n' > "$work/hosts"
export TWONODE_NS_nodeA="$a" TWONODE_NS_nodeB="$b"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
forward=""
for var in $(env | sed -n 's/^\(TRANSIT_[A-Za-z0-9_]*\)=.*/\1/p'); do
  forward="$forward -x $var"
done
# --bind-to none: each orted believes it owns every core of the machine.
# In the background, so that a signal to this script ends the job at once
# (a foreground child would defer the trap until it ended by itself).
ip netns exec "$a" unshare --uts sh -c 'hostname nodeA && exec "$@"' twonode \
  timeout -k 10 "$limit" mpirun --allow-run-as-root --hostfile "$work/hosts" \
  -n "$np" --map-by node --bind-to none --tag-output \
  --mca plm_rsh_agent "$here/agent.sh" --mca oob_tcp_if_include 10.233.0.0/24 \
  --mca btl_tcp_if_include 10.233.0.0/24 $keep $forward "$@" &
job=$!
trap 'kill -TERM $job 2>/dev/null; exit 130' INT
trap 'kill -TERM $job 2>/dev/null; exit 143' TERM
wait $job
