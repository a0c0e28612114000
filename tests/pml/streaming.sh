#!/usr/bin/env bash
# Runs a job over btl/unix for the streaming tests (test_streaming.cpp).
#
#   streaming.sh busy <n> <command...>
#       the command beside <n> busy processes (each spins on a core for good, as
#       other jobs of a loaded node do), which end with it; its exit status.
#   streaming.sh stress <n> <command...>
#       the same, with btl/unix's fragment size, send buffer and eager limit
#       drawn from a seed (TRANSIT_TEST_SEED, else a random one), printed
#       first so a failure can be run again; the program draws its traffic
#       from the same seed.
set -euo pipefail

mode=$1 busy=$2
shift 2

if [[ $mode == stress ]]; then
    seed=${TRANSIT_TEST_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
    RANDOM=$seed
    frag=$((1024 + RANDOM % 64513))  # 1 KiB to 64 KiB
    eager=$((128 + RANDOM % (frag < 8192 ? frag - 127 : 8065)))  # 128 B to min(frag, 8 KiB)
    depth=$((1 + RANDOM % 16))  # datagrams in flight, about
    export TRANSIT_TEST_SEED=$seed
    export TRANSIT_MCA_btl_unix_max_send_size=$frag
    export TRANSIT_MCA_btl_unix_eager_limit=$eager
    export TRANSIT_MCA_btl_unix_send_buffer=$((depth * (frag + 512)))
    echo "streaming stress: seed $seed: fragments of $frag bytes, eager limit $eager," \
        "send buffer $TRANSIT_MCA_btl_unix_send_buffer ($depth fragments)," \
        "$busy busy processes (rerun: TRANSIT_TEST_SEED=$seed)"
elif [[ $mode != busy ]]; then
    echo "streaming.sh: unknown mode '$mode'" >&2
    exit 2
fi

pids=()
stop_busy() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_busy EXIT
for ((i = 0; i < busy; i++)); do
    (while :; do :; done) &
    pids+=($!)
done
status=0
"$@" || status=$?
exit "$status"
