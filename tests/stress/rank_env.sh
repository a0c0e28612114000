#!/bin/sh
# rank_env.sh VAR=VALUE PROGRAM [ARGS...]
# Odd ranks run PROGRAM with VAR=VALUE in their environment, even ranks without
# it: a job whose ranks differ in their transports (TRANSIT_RANK is set by
# transit_run).
setting=$1
shift
if [ $((TRANSIT_RANK % 2)) -eq 1 ]; then export "$setting"; fi
exec "$@"
