#!/bin/sh
# lazy_plugin_job.sh TRANSIT_RUN TRANSIT_BENCH PLUGIN_DIR: a two-rank job whose
# component path holds a plugin that calls a function nobody defines.  Passes
# when the loader refuses it with the system loader's reason and the job runs
# on the other transports; before, it was opened and the job died at its first
# call ("symbol lookup error", exit 127).
out=$(TRANSIT_MCA_mca_base_component_path="$3" TRANSIT_MCA_btl_base_verbose=1 \
  "$1" -n 2 --timeout 60 "$2" latency --max 8 -i 20 -w 2 2>&1)
status=$?
echo "$out"
if [ "$status" -ne 0 ]; then echo "FAIL: the job exited with status $status"; exit 1; fi
if ! printf '%s\n' "$out" | grep -qF "rejected lazysym ($3/transit_btl_lazysym.so): cannot load: "; then
  echo "FAIL: the plugin was not rejected at load"; exit 1
fi
if ! printf '%s\n' "$out" | grep -qF "undefined symbol: transit_fixture_missing_function"; then
  echo "FAIL: the reason does not name the undefined symbol"; exit 1
fi
if printf '%s\n' "$out" | grep -qF "symbol lookup error"; then
  echo "FAIL: a rank died in the plugin"; exit 1
fi
echo "PASS: the plugin was refused and the job ran on"
