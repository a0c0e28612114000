#!/bin/sh
# Run as every rank of a twonode.sh job: even ranks must be on nodeA
# (10.233.0.1), odd ranks on nodeB (10.233.0.2), in a namespace that has no
# other address than its node's.
rank=${OMPI_COMM_WORLD_RANK:?not started by mpirun}
if [ $((rank % 2)) = 0 ]; then node=nodeA addr=10.233.0.1; else node=nodeB addr=10.233.0.2; fi
addrs=$(ip -4 -o addr show | awk '{print $4}' | sort | tr '\n' ' ')
if [ "$(hostname)" != "$node" ] || [ "$addrs" != "$addr/24 127.0.0.1/8 " ]; then
  echo "where_am_i: rank $rank is on $(hostname) with $addrs; expected $node with $addr/24"
  exit 1
fi
echo "where_am_i: rank $rank on $node ($addr)"
