#!/bin/sh
# man_lint.sh MAN_DIR
# The man pages built in MAN_DIR exist and are clean: man --warnings (groff's
# warnings) prints nothing for any of them, each tool's page has ENVIRONMENT,
# EXAMPLES and SEE ALSO, and every section 3 alias points to transit(3).
# Exits 77 (skipped) where man is not installed.
dir=$1
command -v man >/dev/null 2>&1 || { echo "man_lint: no man command: skipped"; exit 77; }
bad=0
for page in transit_run.1 transit_info.1 transit_bench.1 transit.3 transit_params.7; do
  if [ ! -s "$dir/$page" ]; then
    echo "man_lint: $dir/$page is missing"
    bad=1
  fi
done
for page in "$dir"/*.[1-9]; do
  [ -f "$page" ] || continue
  if [ "$(head -c 4 "$page")" = ".so " ]; then
    grep -qx '\.so man3/transit\.3' "$page" || { echo "man_lint: $page: not an alias of transit(3)"; bad=1; }
    continue
  fi
  warnings=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$page" 2>&1 >/dev/null)
  if [ -n "$warnings" ]; then
    echo "man_lint: $page:"
    echo "$warnings"
    bad=1
  fi
done
for tool in transit_run transit_info transit_bench; do
  for section in ENVIRONMENT EXAMPLES "SEE ALSO"; do
    grep -q "^\.SH \"\{0,1\}$section" "$dir/$tool.1" 2>/dev/null ||
      { echo "man_lint: $tool.1 has no $section section"; bad=1; }
  done
done
[ "$bad" = 0 ] || { echo "man_lint: FAILED"; exit 1; }
echo "man_lint: $(ls "$dir" | wc -l) pages clean"
