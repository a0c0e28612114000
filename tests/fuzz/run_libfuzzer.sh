#!/bin/sh
# run_libfuzzer.sh CLANGXX OUTPUT SECONDS [compile flags...] -- SOURCES...
# Compiles a libFuzzer target with clang++ (for builds whose compiler is g++)
# and runs it for SECONDS.  Any crash, leak or sanitizer report fails the test.
set -e
cxx=$1 out=$2 seconds=$3
shift 3
flags=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do flags="$flags $1"; shift; done
[ "$1" = "--" ] && shift
# shellcheck disable=SC2086
"$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  $flags "$@" -o "$out"
corpus="$out.corpus"
mkdir -p "$corpus"
exec "$out" -max_total_time="$seconds" -rss_limit_mb=1024 -print_final_stats=1 "$corpus"
