#!/usr/bin/env bash
# Latency and bandwidth against message size, Transit beside Open MPI, one PNG.
#   contrib/bench/plot.sh vader|tcp [DIR]
# Writes the measured data (transit_latency.dat, transit_bw.dat, openmpi.dat)
# and the plot perf-vader.png or perf-tcp.png into DIR (default: perf-vader or
# perf-tcp in the current directory), so each figure stays beside its data.
# One sweep each (so noisy: the ratios from compare.sh are the figures to quote).
# Needs gnuplot (Debian: apt-get install gnuplot-nox), a build in build/, openmpi-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${TRANSIT_BIN:-$top/build/bin}
peer=${PEER_BENCH:-$here/run_mpi_peer.sh}
mode=${1:-vader}
case $mode in vader | tcp) ;; *) echo "usage: $0 vader|tcp [DIR]" >&2; exit 2 ;; esac
out=${2:-perf-$mode}
command -v gnuplot >/dev/null || { echo "plot.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
png=$out/perf-$mode.png

sizes=1
for ((s = 2; s <= 4194304; s *= 2)); do sizes+=",$s"; done
PP_SIZES=$sizes PP_TRIALS=3 "$peer" "$mode" 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ {print $1, $2, $5}' >"$out/openmpi.dat"
for t in latency bw; do
    TRANSIT_MCA_btl=self,$mode "$bin/transit_run" -n 2 --bind-to core "$bin/transit_bench" $t \
        --min 1 --max 4M --csv 2>/dev/null | grep '^[0-9]' | tr , ' ' >"$out/transit_$t.dat"
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
plot "$out/transit_latency.dat" using 1:2 with linespoints title "Transit", \
     "$out/openmpi.dat" using 1:2 with linespoints title "Open MPI ob1"
set ylabel "bandwidth (MB/s)"
set key top left
plot "$out/transit_bw.dat" using 1:2 with linespoints title "Transit", \
     "$out/openmpi.dat" using 1:3 with linespoints title "Open MPI ob1"
unset multiplot
GP
echo "plot.sh: wrote $png and its data in $out"
