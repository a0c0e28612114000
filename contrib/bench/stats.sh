# Shared by the comparison scripts (sourced, not run): ratios of two figures,
# medians of a list of them, the machine's cache-line round trip and one
# transit_bench figure.  Needs $bin (the directory holding cacheline_pingpong
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
