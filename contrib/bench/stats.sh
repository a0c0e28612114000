# Shared by the comparison scripts (sourced, not run): ratios of two figures,
# medians of a list of them, the machine's cache-line round trip, one
# transit_bench figure, and the libraries' own ping-pong tools in their
# client/server modes.  Needs $bin (the directory holding cacheline_pingpong
# and transit_bench).

# a / b to three decimals; nan when either is missing (empty or nan) or b is zero.
ratio() {
    awk -v a="$1" -v b="$2" \
        'BEGIN { if (a == "" || b == "" || a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.3f", a / b }'
}

# The median of the numbers on stdin (whitespace-separated; nan entries skipped).
median() {
    tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -g |
        awk '{v[NR]=$1} END {if (NR) print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; else print "nan"}'
}

# The machine's cache-line half round trip now (us): which mode it is in.  Taken
# before and after each round; a round whose two values differ mixed the modes.
floor() { "$bin/cacheline_pingpong" 200000 2>/dev/null | awk '{print $5}'; }

# The libraries' tools, server on core 0 and client on core 1 of this machine,
# each printing the half round trip in microseconds.
#   ucx_am_lat SIZE ITERATIONS UCT_ARGS...  ucx_perftest -t am_lat, its typical figure
#   fi_lat SIZE ITERATIONS FI_ARGS...       fi_pingpong, its mean (usec/xfer)
ucx_am_lat() {
    local size=$1 iterations=$2 port=$((20000 + RANDOM % 20000))
    shift 2
    taskset -c 0 ucx_perftest "$@" -t am_lat -s "$size" -n "$iterations" -p "$port" \
        > /dev/null 2>&1 &
    sleep 0.3
    taskset -c 1 ucx_perftest localhost "$@" -t am_lat -s "$size" -n "$iterations" \
        -p "$port" 2>/dev/null | awk '/Final:/ {print $3}'
    wait
}
fi_lat() {
    local size=$1 iterations=$2 port=$((20000 + RANDOM % 20000))
    shift 2
    taskset -c 0 fi_pingpong "$@" -S "$size" -I "$iterations" -B "$port" > /dev/null 2>&1 &
    sleep 0.3
    taskset -c 1 fi_pingpong "$@" -S "$size" -I "$iterations" -P "$port" localhost \
        2>/dev/null | awk -v s="$size" '$1 == s {print $7}'
    wait
}

# transit_value BTL TEST SIZE [ARGS...]: transit_bench TEST's figure at SIZE
# bytes (us, MB/s or M msg/s) between two ranks bound to cores over BTL; ARGS
# go to transit_bench.  Empty when the run failed.
transit_value() {
    local btl=$1 test=$2 size=$3
    shift 3
    TRANSIT_MCA_btl=$btl "$bin/transit_run" -n 2 --bind-to core "$bin/transit_bench" "$test" \
        --min "$size" --max "$size" --csv "$@" 2>/dev/null | grep '^[0-9]' | tail -1 | cut -d, -f2 ||
        true
}
