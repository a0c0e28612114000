#!/bin/sh
# path_measure.sh STRESS
# The transport to a rank on another node is chosen by what is measured
# (bml_base_measure, on by default): four ranks on two nodes over the default
# selection, each rank must print its decision for both ranks of the other
# node (bml_base_verbose 10: per candidate the least 8 B round trip and the
# best bulk transfer, by get where the transport offers it), choose the
# fastest at 8 B for small messages and for large ones the widest, or the
# small messages' choice when it reads within a quarter of the widest, measure
# tcp's and uct's bulk by get, take turns (of each pair the lower rank makes
# all its probes first, the higher after its word), decide on both ranks'
# figures (each sends its own with its word that it is done) and so choose
# alike on both ends of every pair, deliver every message of the stress
# program over the chosen paths, and print no error line.
# Needs what twonode.sh needs: exits 77 (skipped) without it.
here=$(cd "$(dirname "$0")" && pwd)
stress=$1
out=$(mktemp "${TMPDIR:-/tmp}/path_measure.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
TRANSIT_MCA_bml_base_verbose=10 sh "$here/twonode.sh" -n 4 -t 90 "$stress" --messages 2000 \
  > "$out" 2>&1
status=$?
[ "$status" = 77 ] && exit 77
grep -E "measured|small messages over|no probe answered|PASS|FAIL|error:" "$out"
fail=0
if [ "$status" != 0 ]; then
  echo "path_measure: FAIL: the job exited $status"; fail=1
fi
# Ranks map by node: 0 and 2 on nodeA, 1 and 3 on nodeB.
for pair in "0 1" "0 3" "2 1" "2 3" "1 0" "1 2" "3 0" "3 2"; do
  set -- $pair
  if ! grep -q "r$1\] bml: rank $2: small messages over [^ ]*, large over" "$out"; then
    echo "path_measure: FAIL: rank $1 printed no measured choice for rank $2"; fail=1
  fi
done
# Each decision follows its own figures.
if ! python3 - "$out" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
measured = {}
chosen = {}
bad = 0
for l in lines:
    m = re.search(r"r(\d+)\] bml: rank (\d+) measured [^:]*: in \d+ ms, (.*)$", l)
    if m:
        figs = {}
        me, peer = int(m.group(1)), int(m.group(2))
        turn = "probes first" if me < peer else f"probes after rank {peer}'s"
        if turn not in m.group(3).split("; "):
            print(f"path_measure: FAIL: rank {me} did not take its turn for rank {peer}: {l}")
            bad = 1
        if "both ranks' figures" not in m.group(3).split("; "):
            print(f"path_measure: FAIL: rank {me} decided without rank {peer}'s figures: {l}")
            bad = 1
        for part in m.group(3).split("; "):
            if ": " not in part:
                continue
            name, rest = part.split(": ", 1)
            us = re.search(r"([0-9.]+) us", rest)
            mbps = re.search(r"([0-9.]+) MB/s by (get|frames)", rest)
            figs[name] = (float(us.group(1)) if us else None,
                          float(mbps.group(1)) if mbps else None,
                          mbps.group(2) if mbps else None)
        measured[(m.group(1), m.group(2))] = figs
        for name, (_, _, how) in figs.items():
            if (name.startswith("tcp:") or name.startswith("uct:tcp")) and how not in ("get", None):
                print(f"path_measure: FAIL: rank {m.group(1)} measured {name}'s bulk by {how}, not by get")
                bad = 1
    m = re.search(r"r(\d+)\] bml: rank (\d+): small messages over (\S+), large over (\S+?),? ", l + " ")
    if m:
        # By component: a module's name holds its node's device.
        chosen[(m.group(1), m.group(2))] = (m.group(3).split(":")[0], m.group(4).split(":")[0])
    if m and (m.group(1), m.group(2)) in measured:
        figs = measured[(m.group(1), m.group(2))]
        lat = {n: f[0] for n, f in figs.items() if f[0] is not None}
        bw = {n: f[1] for n, f in figs.items() if f[1] is not None}
        # Figures are printed to 0.1: a tie in print is a tie.
        if lat and lat.get(m.group(3), float("inf")) > min(lat.values()):
            print(f"path_measure: FAIL: rank {m.group(1)} chose {m.group(3)} for small messages, {lat}")
            bad = 1
        # The widest, or the small messages' choice when it reads within a
        # quarter of the widest (PathMeasure::bulk_choice).
        if bw:
            widest = max(bw.values())
            kept = m.group(3) in bw and bw[m.group(3)] * 1.25 > widest
            want = m.group(3) if kept else max(bw, key=bw.get)
            if m.group(4) != want and bw.get(m.group(4), -1.0) < widest:
                print(f"path_measure: FAIL: rank {m.group(1)} chose {m.group(4)} for large messages, {bw}")
                bad = 1
# Both ends of a pair choose alike.
for (me, peer), choice in chosen.items():
    other = chosen.get((peer, me))
    if other is not None and other != choice:
        print(f"path_measure: FAIL: rank {me} chose {choice} for rank {peer}, which chose {other}")
        bad = 1
sys.exit(bad)
PY
then
  fail=1
fi
if grep -q "error:" "$out"; then
  echo "path_measure: FAIL: an error line in the job's output"; fail=1
fi
[ "$fail" = 0 ] && echo "path_measure: PASS"
exit "$fail"
