#!/usr/bin/env bash
# Latency and bandwidth against message size, Transit beside Open MPI, one PNG.
#   contrib/bench/plot.sh vader|tcp [out.png]
# One sweep each (so noisy: the ratios from compare.sh are the figures to quote).
# Needs gnuplot (Debian: gnuplot-nox), a build in build/, openmpi-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${TRANSIT_BIN:-$top/build/bin}
peer=${PEER_BENCH:-$here/run_mpi_peer.sh}
mode=${1:-vader}
png=${2:-$top/docs/perf-$mode.png}
case $mode in vader | tcp) ;; *) echo "usage: $0 vader|tcp [out.png]" >&2; exit 2 ;; esac
command -v gnuplot >/dev/null || { echo "plot.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sizes=1
for ((s = 2; s <= 4194304; s *= 2)); do sizes+=",$s"; done
PP_SIZES=$sizes PP_TRIALS=3 "$peer" "$mode" 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ {print $1, $2, $5}' >"$work/peer"
for t in latency bw; do
    TRANSIT_MCA_btl=self,$mode "$bin/transit_run" -n 2 --bind-to core "$bin/transit_bench" $t \
        --min 1 --max 4M --csv 2>/dev/null | grep '^[0-9]' | tr , ' ' >"$work/transit_$t"
done

gnuplot <<GP
set terminal pngcairo size 1200,480 font ",10"
set output "$png"
set multiplot layout 1,2 title "Transit vs Open MPI 4.1 ($mode), 2 ranks on separate cores"
set logscale x 2
set format x "2^{%L}"
set xlabel "message size (bytes)"
set grid
set key top left
set ylabel "half round trip (us)"
set logscale y
plot "$work/transit_latency" using 1:2 with linespoints title "Transit", \
     "$work/peer" using 1:2 with linespoints title "Open MPI ob1"
set ylabel "bandwidth (MB/s)"
set key top left
plot "$work/transit_bw" using 1:2 with linespoints title "Transit", \
     "$work/peer" using 1:3 with linespoints title "Open MPI ob1"
unset multiplot
GP
echo "plot.sh: wrote $png"
