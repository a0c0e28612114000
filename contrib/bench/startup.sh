#!/usr/bin/env bash
# Start-up of a whole job: init, one byte to every rank, barrier (startup_transit
# and its MPI twin startup_mpi), alternating Transit's default selection,
# Transit with btl=self,vader and Open MPI (Debian's mpirun, default settings).
#
#   contrib/bench/startup.sh [rounds] [sizes...]      (default: 3 rounds, 2 8 32 64)
#
# Per size and configuration, the median over the rounds of: wall time of the
# job (launcher included), the slowest rank's init time, the slowest rank's
# time from the end of init until a byte went to and came from every peer, and
# the mean PSS per rank (/proc/self/smaps_rollup after the barrier); then each
# figure's ratio to Open MPI's.  Ranks beyond the cores are oversubscribed for
# every side.  Needs a build in build/ (or TRANSIT_BIN) and Debian's openmpi-bin
# + libopenmpi-dev.  A job that fails or runs past TIMEOUT (120 s) prints "fail".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${TRANSIT_BIN:-$top/build/bin}
rounds=${1:-3}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(2 8 32 64)
timeout_s=${TIMEOUT:-120}
work=${TMPDIR:-/tmp}/transit-startup-bench
mkdir -p "$work"
mpi_exe=$work/startup_mpi
if [ ! -x "$mpi_exe" ] || [ "$here/startup_mpi.cpp" -nt "$mpi_exe" ]; then
    mpicxx -O2 -std=c++20 -o "$mpi_exe" "$here/startup_mpi.cpp"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run() {  # config ranks -> "wall init first pss_mb" or "fail"
    local config=$1 n=$2 out start end
    start=$(date +%s.%N)
    case $config in
      default) out=$("$bin/transit_run" --timeout "$timeout_s" -n "$n" "$bin/startup_transit" 2>/dev/null) || out=fail ;;
      vader) out=$("$bin/transit_run" --timeout "$timeout_s" --mca btl self,vader -n "$n" \
                 "$bin/startup_transit" 2>/dev/null) || out=fail ;;
      ompi) out=$(timeout "$timeout_s" mpirun --oversubscribe -np "$n" "$mpi_exe" 2>/dev/null) || out=fail ;;
    esac
    end=$(date +%s.%N)
    if [ "$out" = fail ] || [ "$(grep -c '^startup rank' <<<"$out")" -ne "$n" ]; then
        echo fail
        return
    fi
    awk -v wall="$(echo "$end - $start" | bc)" '
        /^startup rank/ { if ($5 > init) init = $5; if ($7 > first) first = $7; pss += $9; n++ }
        END { printf "%.3f %.3f %.4f %.1f\n", wall, init, first, pss / n / 1024 }' <<<"$out"
}

median() { sort -g | awk '{v[NR] = $1} END { if (NR == 0) print "fail"; else print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "fail" || b == "fail" || b == 0) print "-"; else printf "%.2fx", a / b }'; }

configs=(default vader ompi)
printf '%-6s %-8s %9s %9s %11s %9s   %s\n' ranks config wall_s init_s first_all_s pss_MB \
    "ratios to Open MPI (wall init first pss)"
for n in "${sizes[@]}"; do
    declare -A res=()
    for ((r = 0; r < rounds; r++)); do
        for c in "${configs[@]}"; do
            line=$(run "$c" "$n")
            echo "round $r ranks $n $c: $line" >&2
            res[$c]+="$line"$'\n'
        done
    done
    declare -A med=()
    for c in "${configs[@]}"; do
        fields=()
        for k in 1 2 3 4; do
            fields+=("$(printf '%s' "${res[$c]}" | grep -v '^fail' | awk -v k=$k 'NF {print $k}' | median)")
        done
        med[$c]="${fields[*]}"
    done
    read -r ow oi of op <<<"${med[ompi]}"
    for c in "${configs[@]}"; do
        read -r w i f p <<<"${med[$c]}"
        rs=""
        [ "$c" = ompi ] || rs="$(ratio "$w" "$ow") $(ratio "$i" "$oi") $(ratio "$f" "$of") $(ratio "$p" "$op")"
        printf '%-6s %-8s %9s %9s %11s %9s   %s\n' "$n" "$c" "$w" "$i" "$f" "$p" "$rs"
    done
    unset res med
done
