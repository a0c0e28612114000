#!/bin/sh
# run_libfuzzer.sh CLANGXX OUTPUT SECONDS SEEDS [compile flags...] -- SOURCES...
# Compiles a libFuzzer target with clang++ (for builds whose compiler is g++;
# CLANGXX "-" when OUTPUT is already built) and runs it for SECONDS, starting
# from the seed corpus SEEDS (read only: new inputs go next to OUTPUT).  Any
# crash, hang, leak or sanitizer report fails the test.
set -e
cxx=$1 out=$2 seconds=$3 seeds=$4
shift 4
flags=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do flags="$flags $1"; shift; done
[ "$#" -gt 0 ] && shift
if [ "$cxx" != "-" ]; then
  # -O0 and line tables only: a target runs a few seconds here, and these
  # compile in about 60 % of the time -O1 -g takes; a report still names
  # the file and line of every frame.
  # shellcheck disable=SC2086
  "$cxx" -std=c++20 -gline-tables-only -O0 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    $flags "$@" -o "$out"
fi
corpus="$out.corpus"
mkdir -p "$corpus"
[ -d "$seeds" ] || seeds=""
# shellcheck disable=SC2086
exec "$out" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
  "$corpus" $seeds
