#!/usr/bin/env bash
# Installs what Transit needs (Debian 12 packages), configures and builds it.
#   contrib/setup.sh           -> build/ (Release): library, plugins, tools, examples
#   contrib/setup.sh --tests   -> the same and the tests
#   TRANSIT_BUILD_DIR=b TRANSIT_BUILD_TYPE=Debug TRANSIT_CMAKE_ARGS="-DTRANSIT_SANITIZE=ON" contrib/setup.sh --tests
# Set TRANSIT_SKIP_APT=1 to skip the package step.  Not installed: gnuplot,
# which only contrib/bench/plot.sh needs (apt-get install gnuplot-nox).  Warnings are errors here
# (a developer's build); TRANSIT_WERROR=OFF turns that off.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${TRANSIT_BUILD_DIR:-$src/build}
tests=OFF
case "${1:-}" in
  "") ;;
  --tests) tests=ON ;;
  *) echo "usage: contrib/setup.sh [--tests]" >&2; exit 2 ;;
esac

packages=(
  cmake g++ make pkg-config git ca-certificates
  libgtest-dev libltdl-dev libpmix-dev libhwloc-dev libibverbs-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  openmpi-bin libopenmpi-dev python3-mpi4py
  libfabric-dev libfabric-bin libucx-dev ucx-utils
  clang libclang-rt-14-dev iproute2 procps help2man
)
# The tests also start jobs with Slurm's srun on a two-node cluster they make
# (tests/twonode/slurm.sh).
if [ $tests = ON ]; then
  packages+=(slurmd slurmctld slurm-client munge)
fi

if [ "${TRANSIT_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# shellcheck disable=SC2086
# The main job needs only what a user installs; the tests are ~140 more
# translation units, built when asked for.
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=${TRANSIT_BUILD_TYPE:-Release} \
  -DTRANSIT_BUILD_TESTS=$tests -DTRANSIT_WERROR=${TRANSIT_WERROR:-ON} ${TRANSIT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
command -v gnuplot >/dev/null ||
  echo "setup: contrib/bench/plot.sh also needs gnuplot: apt-get install gnuplot-nox"
