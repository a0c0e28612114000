#!/bin/sh
# slurm.sh [-n NP] [-t SECONDS] [--keep-going] [--steps] [--spare] [--] PROGRAM [ARGS...]
# Runs PROGRAM as a Slurm job step, `srun --mpi=pmix -N 2 -n NP`, on a
# two-node Slurm cluster made on this machine: the two nodes of twonode.sh
# (network namespaces joined by a veth pair, 10.233.0.1 and 10.233.0.2, each
# with its own hostname), a slurmd on each with its own spool and /tmp, the
# controller on nodeA, and a munged of its own for their credentials.  Ranks
# are placed cyclically (rank 0 on nodeA, rank 1 on nodeB, ...).  Each rank
# learns who it is, its peers' addresses and the job's secret from Slurm's
# PMIx server alone: nothing Transit-specific is configured.
# --keep-going: a rank that fails does not end the step (srun --no-kill;
# Slurm's KillOnBadExit=0 keeps the others running, as on most clusters).
# --steps: PROGRAM is a shell script run on nodeA once the cluster is up; it
# starts its own steps with srun (a server and its clients, say).
# --spare: each node also gets a spare interface in 172.31.0.0/16, one subnet
# on both nodes but not joined (as twonode.sh --spare).
# TRANSIT_* variables reach every rank (srun exports the environment).
# Needs root, iproute2, unshare, nsenter and Slurm with its pmix plugin
# (Debian: slurmd slurmctld slurm-client munge): exits 77 (skipped) without
# them.  Every daemon, namespace and file it makes is removed on exit.
here=$(cd "$(dirname "$0")" && pwd)
np=2 limit=120 nokill="" steps="" spare=""
while [ $# -gt 0 ]; do
  case $1 in
    -n) np=$2; shift 2 ;;
    -t) limit=$2; shift 2 ;;
    --keep-going) nokill=--no-kill; shift ;;
    --steps) steps=1; shift ;;
    --spare) spare=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: slurm.sh [-n NP] [-t SECONDS] [--keep-going] [--steps] [--spare] [--] PROGRAM [ARGS...]" >&2
  exit 2
fi
skip() { echo "slurm: $*; skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
for tool in unshare nsenter timeout munged slurmctld slurmd srun sinfo; do
  command -v $tool >/dev/null 2>&1 || skip "needs $tool"
done
. "$here/../fixtures/veth_pair.sh"

tag=$$
a=slmA$tag b=slmB$tag va=sla$tag vb=slb$tag sa=sls$tag
# Not under /tmp: each node gets a /tmp of its own over it.
work=$(mktemp -d /var/tmp/transit-slurm.XXXXXX) || exit 1
cleanup() {
  for pidfile in "$work"/*.pid; do
    [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null
  done
  if [ -n "$spare" ]; then
    spare_nodes_down "$a" "$b" "$va" "$sa"
  else
    veth_pair_down "$a" "$b" "$va"
  fi
  # The nodes' /tmp were bind mounts in their own mount namespaces, gone
  # with their processes: only the files are left.
  rm -rf "$work"
}
trap 'status=$?; cleanup; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
unshare --uts --mount true 2>/dev/null || skip "cannot create UTS and mount namespaces here"
if [ -n "$spare" ]; then
  spare_nodes_up "$a" "$b" "$va" "$vb" 10.233.0 "$sa"
else
  veth_pair_up "$a" "$b" "$va" "$vb" 10.233.0
fi
case $? in
  0) ;;
  77) skip "needs root, iproute2 and network namespaces" ;;
  *) echo "slurm: cannot set up the two nodes"; exit 1 ;;
esac

# Credentials: a munged of this cluster alone, with a fresh key.
head -c 1024 /dev/urandom > "$work/munge.key" && chmod 600 "$work/munge.key"
munged --force --socket="$work/munge.socket" --key-file="$work/munge.key" \
  --pid-file="$work/munged.pid" --log-file="$work/munged.log" \
  --seed-file="$work/munged.seed" || { echo "slurm: munged did not start"; cat "$work/munged.log"; exit 1; }

conf=$work/slurm.conf
cat > "$conf" <<EOF
ClusterName=transit
SlurmctldHost=nodeA(10.233.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket
CredType=cred/munge
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/spool-%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=nodeA NodeAddr=10.233.0.1 CPUs=2 State=UNKNOWN
NodeName=nodeB NodeAddr=10.233.0.2 CPUs=2 State=UNKNOWN
PartitionName=all Nodes=nodeA,nodeB Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
mkdir -p "$work/ctld" "$work/tmp-nodeA" "$work/tmp-nodeB"
# A build, source tree or program under the machine's /tmp (a clone in
# /tmp/x) stays where it is on the nodes: its top directory is bound into
# each node's /tmp at the same path.
keep=""
for path in "$PWD" "$here" "$1"; do
  case $path in
    /tmp/?*) top=${path#/tmp/}; top=${top%%/*}
      case " $keep " in *" $top "*) ;; *) keep="$keep $top" ;; esac ;;
  esac
done
for top in $keep; do mkdir -p "$work/tmp-nodeA/$top" "$work/tmp-nodeB/$top"; done
export TRANSIT_SLURM_KEEP="$keep"
export SLURM_CONF="$conf"
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no pmix plugin here"

# on NODE COMMAND...: COMMAND in NODE's network namespace, with NODE as its
# hostname and, in a mount namespace of its own, a /tmp of its own (Slurm's
# pmix plugin makes /tmp/spmix_appdir_<uid>_<job>.<step> on every node, and
# a second node sharing /tmp fails on it), an /etc/hosts that names both
# nodes, as a cluster's does, and a /sys that shows the node's interfaces
# (sysfs shows those of the namespace that mounted it: UCX lists its tcp
# devices there) with the machine's cgroups under it, which slurmd needs
# (`ip netns exec` remounts /sys without them, and slurmd then dies).
printf '127.0.0.1 localhost\n10.233.0.1 nodeA\n10.233.0.2 nodeB\n' > "$work/hosts"
on() {
  node=$1
  shift
  eval "ns=\$ns_$node"
  mkdir -p "$work/cgroup-$node"
  nsenter --net="/run/netns/$ns" unshare --uts --mount sh -c '
    for top in $TRANSIT_SLURM_KEEP; do mount --rbind "/tmp/$top" "$2/$top" || exit 1; done &&
    hostname "$1" && mount --rbind "$2" /tmp && mount --bind "$3" /etc/hosts &&
      mount --rbind /sys/fs/cgroup "$4" && mount -t sysfs sysfs /sys &&
      mount --move "$4" /sys/fs/cgroup && shift 4 && exec "$@"' \
    on "$node" "$work/tmp-$node" "$work/hosts" "$work/cgroup-$node" "$@"
}
ns_nodeA=$a ns_nodeB=$b
# A machine that cannot give a node its own mounts (a container without the
# right) cannot run the cluster: skipped, saying why.
on nodeA true 2>"$work/on.err" || skip "cannot give a node its own /tmp, /etc/hosts and /sys here ($(head -c 200 "$work/on.err"))"

on nodeA slurmctld -i >/dev/null 2>&1 || { echo "slurm: slurmctld did not start"; cat "$work/slurmctld.log"; exit 1; }
for node in nodeA nodeB; do
  on $node slurmd -N $node >/dev/null 2>&1 || {
    echo "slurm: slurmd of $node did not start"; cat "$work/slurmd-$node.log"; exit 1; }
done
# Both nodes registered and idle before the step: at most 30 s.
ready=""
for _ in $(seq 300); do
  if [ "$(on nodeA sinfo -h -N -o %T 2>/dev/null | grep -c '^idle')" = 2 ]; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "slurm: the nodes did not register within 30 s"
  on nodeA sinfo -N
  tail -n 20 "$work/slurmctld.log" "$work"/slurmd-*.log
  exit 1
fi

# In the background, so that a signal to this script ends the step at once.
if [ -n "$steps" ]; then
  on nodeA timeout -k 10 "$limit" sh "$@" &
else
  on nodeA timeout -k 10 "$limit" srun --mpi=pmix -N 2 -n "$np" --distribution=cyclic \
    --label --overcommit $nokill --kill-on-bad-exit=0 "$@" &
fi
job=$!
trap 'kill -TERM $job 2>/dev/null; exit 130' INT
trap 'kill -TERM $job 2>/dev/null; exit 143' TERM
wait $job
