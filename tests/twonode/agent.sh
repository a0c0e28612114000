#!/bin/sh
# agent.sh HOST COMMAND...
# mpirun's remote shell for the two-node set-up (twonode.sh): instead of ssh,
# it runs COMMAND (one shell command line, as ssh would hand it to the remote
# shell) in HOST's network namespace, with HOST as its hostname in a UTS
# namespace of its own.  twonode.sh names each node's namespace in
# TWONODE_NS_<HOST>.
host=$1
shift
eval "ns=\${TWONODE_NS_$host:-}"
if [ -z "$ns" ]; then
  echo "agent.sh: no node named \"$host\" in this set-up" >&2
  exit 255
fi
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' agent "$host" "$*"
