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
  # shellcheck disable=SC2086
  "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    $flags "$@" -o "$out"
fi
corpus="$out.corpus"
mkdir -p "$corpus"
[ -d "$seeds" ] || seeds=""
# shellcheck disable=SC2086
exec "$out" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
  "$corpus" $seeds
