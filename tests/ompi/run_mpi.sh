#!/usr/bin/env bash
# Runs one MPI test program under Debian's mpirun with Open MPI's ob1 and the
# Transit adapter as the only transport besides Open MPI's self:
#   run_mpi.sh <adapter dir> <ranks> <transit transports or ""> <program> [args]
# TRANSIT_OMPI_MPIRUN_ARGS: more mpirun options (words split on blanks).
# A job that does not finish in TRANSIT_OMPI_TEST_TIMEOUT seconds (default 240)
# fails instead of hanging.
set -euo pipefail
adapter_dir=$1 ranks=$2 include=$3
shift 3
# Open MPI's own components (ob1, self) must stay findable: our directory
# goes in front of Open MPI's default path, it does not replace it.
default_path=$(ompi_info --parsable --level 9 --param mca base 2>/dev/null |
  sed -n 's/^mca:mca:base:param:mca_base_component_path:value://p' | tr -d '"')
export OMPI_MCA_mca_base_component_path="$adapter_dir${default_path:+:$default_path}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
# Containers give /dev/shm to everyone; Open MPI's own shared-memory pieces
# are not used here (btl self,transit), so nothing else needs tuning.
args=(-n "$ranks" --oversubscribe --mca pml ob1 --mca btl self,transit
      --mca btl_transit_verbose "${TRANSIT_OMPI_VERBOSE:-0}")
[ -n "$include" ] && args+=(--mca btl_transit_include "$include")
# shellcheck disable=SC2206 # split on purpose
[ -n "${TRANSIT_OMPI_MPIRUN_ARGS:-}" ] && args+=($TRANSIT_OMPI_MPIRUN_ARGS)
# Transit's own parameters reach every rank, wherever it runs.
for var in $(compgen -e | grep '^TRANSIT_MCA_' || true); do args+=(-x "$var"); done
exec timeout --kill-after=10 "${TRANSIT_OMPI_TEST_TIMEOUT:-240}" mpirun "${args[@]}" "$@"
