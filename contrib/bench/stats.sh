# Shared by the comparison scripts (sourced, not run): ratios of two figures,
# medians of a list of them, and the machine's cache-line round trip.
# Needs $bin (the directory holding cacheline_pingpong).

# a / b to three decimals; nan when either is missing or b is zero.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "nan"; else printf "%.3f", a / b }'; }

# The median of the numbers on stdin (whitespace-separated; nan entries skipped).
median() {
    tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -g |
        awk '{v[NR]=$1} END {if (NR) print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; else print "nan"}'
}

# The machine's cache-line half round trip now (us): which mode it is in.  Taken
# before and after each round; a round whose two values differ mixed the modes.
floor() { "$bin/cacheline_pingpong" 200000 2>/dev/null | awk '{print $5}'; }
