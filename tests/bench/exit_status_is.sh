#!/bin/sh
# exit_status_is.sh STATUS COMMAND [ARGS...]: runs the command, prints its
# output and then "status N"; succeeds only when N is STATUS.
want=$1
shift
"$@" 2>&1
got=$?
echo "status $got"
[ "$got" -eq "$want" ]
