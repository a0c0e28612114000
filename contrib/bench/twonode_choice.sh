#!/bin/sh
# twonode_choice.sh [ROUNDS] [mpirun|srun]
# The default selection's choice across nodes against each transport alone:
# one rank on each of the two "nodes" of tests/twonode (network namespaces
# joined by a veth pair), started by Open MPI's mpirun (twonode.sh) or by
# Slurm's srun --mpi=pmix (slurm.sh).  Per round, in turn: the default
# (bml_base_measure: the transport chosen by round trips measured at
# start-up), the default without measuring (the most exclusive transport),
# and btl=self,vader,X for X in tcp, ofi, uct; each runs transit_bench for the
# 8 B latency (us, lower is better) and the 1 MiB bandwidth (MB/s).  Prints
# every round, then per configuration the median, and the default against the
# best single transport: the one with the best median over the run (what a
# user would pin with btl= after measuring), round by round (latency: <= 1 is
# as fast; bandwidth: >= 1); and, for comparison, against the best single
# figure of each round, which noise biases in the singles' favour.  Needs root (and Slurm for srun); build in
# build/ or TRANSIT_BIN.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${TRANSIT_BIN:-$top/build/bin}
rounds=${1:-3}
launcher=${2:-mpirun}
case $launcher in
  mpirun) run="sh $top/tests/twonode/twonode.sh -n 2 -t 120" ;;
  srun) run="sh $top/tests/twonode/slurm.sh -n 2 -t 120" ;;
  *) echo "twonode_choice.sh: launcher is mpirun or srun" >&2; exit 2 ;;
esac
configs="default unmeasured tcp ofi uct"
out=$(mktemp -d "${TMPDIR:-/tmp}/twonode_choice.XXXXXX")
trap 'rm -rf "$out"' EXIT

# One figure: the value of the first CSV row rank 0 printed.
figure() {
  cfg=$1; shift
  case $cfg in
    default) set -- env "$@" ;;
    unmeasured) set -- env TRANSIT_MCA_bml_base_measure=false "$@" ;;
    *) set -- env TRANSIT_MCA_btl=self,vader,$cfg "$@" ;;
  esac
  # mpirun tags rank 0's lines "[1,0]<stdout>:", srun --label "0: ".
  "$@" 2>/dev/null | sed -n -e 's/^\[1,0\]<stdout>://' -e 's/^0: //' \
    -e 's/^[0-9][0-9]*,\([0-9.]*\)$/\1/p' | head -n 1
}

echo "round config lat8_us bw1M_MBs"
r=1
while [ "$r" -le "$rounds" ]; do
  for cfg in $configs; do
    lat=$(figure "$cfg" $run "$bin/transit_bench" latency --min 8 --max 8 --csv)
    bw=$(figure "$cfg" $run "$bin/transit_bench" bw --min 1M --max 1M --csv)
    echo "$r $cfg ${lat:-NA} ${bw:-NA}" | tee -a "$out/rows"
  done
  r=$((r + 1))
done

python3 - "$out/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, cfg, lat, bw in rows:
    by.setdefault(cfg, []).append((int(r), lat, bw))
def num(v):
    return None if v == "NA" else float(v)
print("\nconfig      lat8 median (us)  bw1M median (MB/s)")
for cfg, vals in by.items():
    lats = [num(l) for _, l, _ in vals if num(l) is not None]
    bws = [num(b) for _, _, b in vals if num(b) is not None]
    print(f"{cfg:11} {statistics.median(lats) if lats else float('nan'):16.2f}  "
          f"{statistics.median(bws) if bws else float('nan'):18.1f}")
singles = [c for c in by if c not in ("default", "unmeasured")]
def median_of(cfg, col):
    xs = [num(v[col + 1]) for v in by[cfg] if num(v[col + 1]) is not None]
    return statistics.median(xs) if xs else None
def ratios(col, better):
    """default / the best single transport by its median over the run (the one a
    user would pin after measuring), round by round; and default / the round's
    best single figure (an oracle: with noisy figures, the best of three is
    biased in the singles' favour)."""
    meds = {c: median_of(c, col) for c in singles if median_of(c, col) is not None}
    if not meds or "default" not in by:
        return None, [], []
    best = better(meds, key=meds.get)
    pinned, oracle = [], []
    for rnd in sorted({int(r) for r, *_ in rows}):
        row = {cfg: (num(l), num(b)) for r, cfg, l, b in rows if int(r) == rnd}
        d = row.get("default", (None, None))[col]
        if d is None:
            continue
        if best in row and row[best][col] is not None:
            pinned.append(d / row[best][col])
        figs = [row[c][col] for c in singles if c in row and row[c][col] is not None]
        if figs:
            oracle.append(d / (min(figs) if better is min else max(figs)))
    return best, pinned, oracle
fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
for name, col, better in (("8 B latency", 0, min), ("1 MiB bandwidth", 1, max)):
    best, pinned, oracle = ratios(col, better)
    if not pinned:
        continue
    print(f"\n{name}: the best single transport by median is {best}")
    print(f"  default / {best}: median {statistics.median(pinned):.2f} ({fmt(pinned)})")
    print(f"  default / the round's best single: median {statistics.median(oracle):.2f} "
          f"({fmt(oracle)})")
PY
