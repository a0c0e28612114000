#!/usr/bin/env bash
# The installed SDK used the way a third party uses it.  One step per ctest
# entry (see CMakeLists.txt); the steps share a work directory under $TMPDIR
# whose path is kept in <state file>.
#
#   sdk_test.sh <step> <state file> <cmake> <transit build dir> <transit source dir>
#
# steps:
#   install       cmake --install the build into a fresh temporary prefix; check
#                 the layout, that the package files hold no build or source path,
#                 and that every installed header compiles alone.
#   build         copy contrib/example-btl out of the tree, configure it with only
#                 CMAKE_PREFIX_PATH=<prefix>, build and install it.
#   info          transit_info (installed) loads it through mca_base_component_path.
#   conformance   the installed transit_btl_conformance passes on it, in one
#                 process (loopback) and in two (transit_run -n 2).
#   job           two-process jobs (transit_bench latency, put_latency) over
#                 TRANSIT_MCA_btl=self,unix.
#   abi           the example rebuilt against a copy of the SDK whose ABI major is
#                 changed is refused with "built against ..., this is ...".
#   cleanup       removes the work directory.
set -euo pipefail

step=$1 state=$2 cmake=$3 build=$4 source=$5
name=unix  # the example's component name

fail() {
    echo "sdk[$step]: FAILED: $*" >&2
    exit 1
}
note() { echo "sdk[$step]: $*"; }

work_dir() {
    [[ -f $state ]] || fail "no work directory: the install step did not run"
    cat "$state"
}

# Runs a command, showing its output only when it fails (or with SDK_TEST_VERBOSE).
quiet() {
    local log
    log=$(mktemp)
    if "$@" >"$log" 2>&1; then
        [[ -z ${SDK_TEST_VERBOSE:-} ]] || cat "$log"
        rm -f "$log"
    else
        local rc=$?
        cat "$log" >&2
        rm -f "$log"
        fail "exit status $rc: $*"
    fi
}

# A C program built with nothing but `pkg-config transit` (no C++ flag may
# reach the C compiler) runs without LD_LIBRARY_PATH.
check_c_program() {  # <prefix> <work dir>
    local p=$1 w=$2 flags
    flags=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --cflags --libs transit)
    cat >"$w/hello.c" <<'C'
#include <stdio.h>
#include <transit/transit.h>
int main(void) {
    transit_context* ctx = NULL;
    int rc = transit_init(NULL, NULL, &ctx);
    if (rc != TRANSIT_SUCCESS) return 2;
    printf("rank %u of %u\n", transit_rank(ctx), transit_size(ctx));
    return transit_finalize(ctx) == TRANSIT_SUCCESS ? 0 : 3;
}
C
    # shellcheck disable=SC2086
    quiet cc -Wall -Werror -o "$w/hello" "$w/hello.c" $flags
    # A sanitizer build's libtransit needs the sanitizer runtime loaded first,
    # which a plain C program does not do: there it is only built.
    if grep -q '^TRANSIT_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then return; fi
    local out
    out=$(env -u LD_LIBRARY_PATH TRANSIT_MCA_btl=self "$w/hello") ||
        fail "a C program built with pkg-config transit does not run (exit $?): $out"
    [[ $out == "rank 0 of 1" ]] || fail "the C program printed: $out"
}

step_install() {
    if [[ -f $state ]]; then rm -rf "$(cat "$state")"; fi
    local w
    w=$(mktemp -d "${TMPDIR:-/tmp}/transit-sdk-test.XXXXXX")
    echo "$w" >"$state"
    local p=$w/prefix
    note "installing $build into $p (this needs the whole build: cmake --build $build)"
    quiet "$cmake" --install "$build" --prefix "$p"

    local f
    for f in bin/transit_info bin/transit_run bin/transit_bench bin/transit_btl_conformance \
        bin/transit_btl_departure lib/libtransit.so lib/transit/transit_btl_self.so \
        include/transit/version.hpp \
        include/transit/btl/module.hpp lib/cmake/Transit/TransitConfig.cmake \
        lib/cmake/Transit/TransitConfigVersion.cmake lib/cmake/Transit/TransitTargets.cmake \
        lib/cmake/Transit/TransitComponent.cmake lib/pkgconfig/transit.pc \
        lib/pkgconfig/transit-cxx.pc etc/transit-mca-params.conf; do
        [[ -e $p/$f ]] || fail "$f is missing from the installed tree"
    done
    ls "$p"/lib/libtransit.so.* >/dev/null 2>&1 || fail "lib/libtransit.so.<version> is missing"
    [[ -s $p/share/man/man3/transit.3 && -s $p/share/man/man3/transit_send.3 ]] ||
        fail "share/man/man3/transit.3 (the C API) or its alias transit_send.3 is missing"
    # Man pages, when the build made them (help2man installed).
    if [[ -d $build/man ]]; then
        for f in transit_run transit_info transit_bench; do
            [[ -s $p/share/man/man1/$f.1 ]] || fail "share/man/man1/$f.1 is missing"
            grep -q "^.SH OPTIONS" "$p/share/man/man1/$f.1" ||
                fail "share/man/man1/$f.1 does not describe the options"
        done
        [[ -s $p/share/man/man7/transit_params.7 ]] || fail "share/man/man7/transit_params.7 is missing"
    fi
    # Nothing else at the top, in lib/ or in the package directory (lib/openmpi
    # holds the Open MPI adapter, contrib/openmpi-btl, when it was built).
    for f in "$p"/* "$p"/lib/* "$p"/lib/cmake/* "$p"/lib/cmake/Transit/*; do
        case ${f#"$p"/} in
            bin | etc | include | share | lib | lib/libtransit.so* | lib/transit | lib/openmpi | \
                lib/cmake | lib/pkgconfig | lib/cmake/Transit | \
                lib/cmake/Transit/Transit*.cmake) ;;
            *) fail "unexpected in the installed tree: ${f#"$p"/}" ;;
        esac
    done

    # The plugin directory holds real components only, never test fixtures.
    for f in "$p"/lib/transit/*; do
        [[ $(basename "$f") =~ ^transit_[a-z0-9_]+\.so$ ]] || fail "unexpected file $f"
        [[ -e $source/components/$(basename "$f" .so | sed 's/^transit_btl_//') ]] ||
            fail "$(basename "$f") is not one of components/"
    done

    # Exactly the public headers: the same list as include/transit in the source.
    diff <(cd "$source/include" && find transit -type f | sort) \
        <(cd "$p/include" && find transit -type f | sort) >&2 ||
        fail "installed headers differ from include/transit (above)"

    # No build-tree or source-tree path may leak into what a plugin build reads.
    local leak
    leak=$(grep -lF -e "$build" -e "$source/" "$p"/lib/cmake/Transit/*.cmake \
        "$p"/lib/pkgconfig/transit*.pc || true)
    [[ -z $leak ]] || fail "build or source paths in: $leak"

    # pkg-config names the install prefix, even found through a relative
    # PKG_CONFIG_PATH: the run path it gives is absolute.
    local plugindir libs
    plugindir=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --variable=plugindir transit)
    [[ $(realpath "$plugindir") == $(realpath "$p/lib/transit") ]] ||
        fail "transit.pc's plugindir is $plugindir, not $p/lib/transit"
    libs=$(cd "$p/lib" && PKG_CONFIG_PATH=pkgconfig pkg-config --libs transit)
    [[ $libs == *"-Wl,-rpath,$p/lib "* || $libs == *"-Wl,-rpath,$p/lib" ]] ||
        fail "pkg-config --libs transit through a relative PKG_CONFIG_PATH: $libs"

    # The examples' sources, and a build file that builds them here.
    for f in CMakeLists.txt hello.c hello.cpp echo_server.cpp echo_client.cpp; do
        [[ -s $p/share/transit/examples/$f ]] || fail "share/transit/examples/$f is missing"
    done
    quiet "$cmake" -S "$p/share/transit/examples" -B "$w/examples" -DCMAKE_PREFIX_PATH="$p"
    quiet "$cmake" --build "$w/examples"
    [[ -x $w/examples/hello_c && -x $w/examples/hello_cxx ]] ||
        fail "the installed examples did not build"

    # Every header compiles on its own with the installed include directory
    # only: no public header needs an internal one.
    local cflags hdr
    cflags=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --cflags transit-cxx)
    while read -r hdr; do
        # shellcheck disable=SC2086
        echo "#include <$hdr>" | g++ $cflags -Wall -Wextra -Werror -fsyntax-only -x c++ - ||
            fail "<$hdr> does not compile alone against the installed SDK"
    done < <(cd "$p/include" && find transit -name '*.hpp' | sort)
    echo "#include <transit/transit.h>" | gcc -I"$p/include" -fsyntax-only -x c - ||
        fail "<transit/transit.h> does not compile as C"
    check_c_program "$p" "$w"
    note "ok: layout, package files and headers"
}

configure_example() {  # <prefix> <source copy> <build dir>
    quiet "$cmake" -S "$2" -B "$3" -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
    quiet "$cmake" --build "$3" -j2
    [[ -f $3/transit_btl_$name.so ]] || fail "$3/transit_btl_$name.so was not built"
}

step_build() {
    local w
    w=$(work_dir)
    # A copy outside the source tree: a relative path into Transit's sources
    # would break here instead of going unnoticed.
    rm -rf "$w/example" "$w/example-build" "$w/plugins"
    cp -r "$source/contrib/example-btl" "$w/example"
    configure_example "$w/prefix" "$w/example" "$w/example-build"

    local cc=$w/example-build/compile_commands.json
    ! grep -qF "$source/" "$cc" || fail "the example's build reads from the source tree: $cc"
    grep -q -- "-std=c++20" "$cc" || fail "the example was not compiled as C++20"
    grep -q -- "-fvisibility=hidden" "$cc" || fail "the example was not compiled with hidden visibility"

    # The descriptor is exported; the component's own classes are not.
    local so=$w/example-build/transit_btl_$name.so
    # Captured first: under pipefail, grep -q quitting early can SIGPIPE the writer.
    local symbols cxx_symbols libs
    symbols=$(nm -D --defined-only "$so")
    cxx_symbols=$(nm -DC --defined-only "$so")
    libs=$(ldd "$so")
    grep -q " transit_btl_${name}_component$" <<<"$symbols" ||
        fail "the descriptor transit_btl_${name}_component is not exported"
    ! grep -q "UnixModule" <<<"$cxx_symbols" ||
        fail "the component's classes are exported (visibility is not hidden)"
    grep -q "$w/prefix/lib/libtransit.so" <<<"$libs" ||
        fail "the plugin is not linked to the installed libtransit"

    # transit_add_component's install rule: <prefix>/lib/transit.
    quiet "$cmake" --install "$w/example-build" --prefix "$w/plugins"
    [[ -f $w/plugins/lib/transit/transit_btl_$name.so ]] ||
        fail "cmake --install did not put the plugin in <prefix>/lib/transit"
    note "ok: built from the installed SDK only"
}

plugin_env() {
    local w
    w=$(work_dir)
    export TRANSIT_MCA_mca_base_component_path=$w/plugins/lib/transit
    export PATH=$w/prefix/bin:$PATH
    # In a sanitizer build: libpmix keeps a few allocations until exit, which is
    # not ours to fix; any other leak still fails the step.
    echo "leak:libpmix.so" >"$w/lsan.supp"
    export LSAN_OPTIONS=suppressions=$w/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}
}

step_info() {
    plugin_env
    local out key=mca:btl:$name
    out=$(transit_info --all --parsable) || fail "transit_info failed"
    grep -q "^$key:path:$TRANSIT_MCA_mca_base_component_path/transit_btl_$name.so$" <<<"$out" ||
        fail "transit_info does not list $name from $TRANSIT_MCA_mca_base_component_path:
$(grep "^mca:btl:[^:]*:\(path\|state\|reason\)" <<<"$out")"
    local state
    state=$(sed -n "s/^$key:state://p" <<<"$out")
    [[ $state == loaded || $state == opened || $state == active ]] ||
        fail "$name is $state: $(sed -n "s/^$key:reason://p" <<<"$out")"
    grep -q "^$key:version:1.0.0$" <<<"$out" || fail "$name's version is not 1.0.0"
    grep -q "^mca:btl:$name:param:btl_${name}_eager_limit:value:" <<<"$out" ||
        fail "$name's parameters are not registered"
    # Its parameters are checked like Transit's own: a bad value is an error
    # that names the parameter, never a silent fallback.
    out=$(env TRANSIT_MCA_btl=self,$name "TRANSIT_MCA_btl_${name}_max_send_size=1M" \
        transit_btl_conformance --component "$name" --gtest_filter='*AllocAndFree*' 2>&1) &&
        fail "btl_${name}_max_send_size=1M was accepted"
    grep -q "parameter btl_${name}_max_send_size: value \"1M\" (from environment .*) is out of range; expected [0-9]*\.\.131072" <<<"$out" ||
        fail "no error naming btl_${name}_max_send_size:
$out"
    note "ok: transit_info lists $name ($state); a bad parameter value is reported"
}

step_conformance() {
    plugin_env
    local size=${SDK_CONFORMANCE_MAX_SIZE:-1M}
    note "loopback: transit_btl_conformance --component $name"
    quiet env TRANSIT_MCA_btl=self,$name transit_btl_conformance --component "$name" \
        --max-size "$size" --timeout 60
    note "two processes: transit_run -n 2 transit_btl_conformance --component $name"
    quiet env TRANSIT_MCA_btl=self,$name transit_run -n 2 --timeout 600 \
        transit_btl_conformance --component "$name" --max-size "$size" --timeout 60
    note "departure: transit_run -n 2 transit_btl_departure --component $name --mode finalize"
    quiet env TRANSIT_MCA_btl=self,$name transit_run -n 2 --timeout 120 \
        transit_btl_departure --component "$name" --mode finalize
    note "ok: the installed conformance suite passes on $name"
}

step_job() {
    plugin_env
    local out
    # Only self and unix are selected, so every byte between the ranks crosses
    # the example's sockets; the bml's verbose lines show it was chosen.
    out=$(TRANSIT_MCA_btl=self,$name TRANSIT_MCA_bml_base_verbose=10 \
        transit_run -n 2 --timeout 300 transit_bench latency --max 256k 2>&1) ||
        fail "transit_run -n 2 transit_bench latency over $name:
$out"
    grep -q "send: *$name" <<<"$out" || fail "the bml did not put $name in a send list:
$out"
    grep -qE "^ *262144 " <<<"$out" || fail "no result for 256k messages:
$out"
    # One-sided through the pml: the example offers no rdma(), so the pml
    # carries the puts in messages.
    out=$(TRANSIT_MCA_btl=self,$name transit_run -n 2 --timeout 300 \
        transit_bench put_latency --max 16k 2>&1) || fail "transit_bench put_latency over $name:
$out"
    grep -qE "^ *16384 " <<<"$out" || fail "no put result for 16k:
$out"
    note "ok: two ranks exchanged messages over $name"
}

step_abi() {
    plugin_env  # for the sanitizer settings; the plugin path is set below
    local w
    w=$(work_dir)
    # The same plugin, built against an SDK that says the next ABI major: a copy
    # of the installed prefix with version.hpp (and the package's numbers) changed.
    local major other
    major=$(sed -n 's/.*abi_major = \([0-9]*\);.*/\1/p' "$w/prefix/include/transit/version.hpp")
    [[ -n $major ]] || fail "no abi_major in the installed version.hpp"
    other=$((major + 1))
    local fake=$w/sdk-abi$other
    rm -rf "$fake" "$w/example-abi$other"
    cp -a "$w/prefix" "$fake"
    sed -i "s/abi_major = [0-9]*;/abi_major = $other;/" "$fake/include/transit/version.hpp"
    sed -i "s/^set(TRANSIT_ABI_VERSION_MAJOR .*)/set(TRANSIT_ABI_VERSION_MAJOR $other)/" \
        "$fake/lib/cmake/Transit/TransitConfig.cmake"
    grep -q "abi_major = $other;" "$fake/include/transit/version.hpp" ||
        fail "could not change the ABI"
    configure_example "$fake" "$w/example" "$w/example-abi$other"

    local out
    out=$(TRANSIT_MCA_mca_base_component_path=$w/example-abi$other "$w/prefix/bin/transit_info" \
        --parsable) || fail "transit_info failed"
    local key=mca:btl:$name state reason
    state=$(sed -n "s/^$key:state://p" <<<"$out")
    reason=$(sed -n "s/^$key:reason://p" <<<"$out")
    [[ $state == failed ]] || fail "the ABI $other plugin was not refused (state '$state')"
    [[ $reason == *"built against Transit ABI $other."*"this is ABI $major."* ]] ||
        fail "refused, but the reason does not say what it was built against: '$reason'"
    note "ok: refused with \"$reason\""
}

step_cleanup() {
    if [[ -f $state ]]; then rm -rf "$(cat "$state")" "$state"; fi
}

"step_$step"
