#!/bin/sh
# baton as other projects consume it:
#  1. vendored: tests/vendor/ does add_subdirectory() of this source tree (with a directory
#     named baton in its build tree); it configures, builds (the baton command included) and
#     its program runs; baton's tests, examples and benchmark are not built.
#  2. installed: `cmake --install BUILD --prefix P`; `pkg-config --libs baton` (not --static)
#     names no hiredis, a program compiled with pkg-config's flags links and runs, and
#     tests/vendor/ built with find_package(baton) from P links and runs.
#   tests/packaging.sh BUILD_DIR SOURCE_DIR [SANITIZER]
# A sanitizer build's installed library needs its consumers built with the same sanitizer
# (its runtime must come first), so they get the same flag.
set -eu
build=$1 src=$2 san=${3:-}
case "$san" in
    address) sanflag="-fsanitize=address,undefined" ;;
    undefined | thread) sanflag="-fsanitize=$san" ;;
    *) sanflag= ;;
esac
work=$(mktemp -d /tmp/baton-packaging.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() {
    echo "packaging: $*" >&2
    exit 1
}
quiet() {
    "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; fail "failed: $*"; }
}

# ---- 1. add_subdirectory -----------------------------------------------------------------
quiet cmake -S "$src/tests/vendor" -B "$work/vendored" -DBATON_SOURCE_DIR="$src"
quiet cmake --build "$work/vendored" -j 2
"$work/vendored/consumer" | grep -q "empty URL: invalid argument" || fail "vendored consumer"
[ -x "$work/vendored/baton/bin/baton" ] || fail "the baton command was not built in baton/bin"
[ ! -e "$work/vendored/baton/tests" ] || fail "baton's tests were built in a vendoring project"
[ ! -e "$work/vendored/baton/bench" ] || fail "baton's benchmark was built in a vendoring project"

# ---- 2. installed: pkg-config and find_package ---------------------------------------------
prefix="$work/prefix"
quiet cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(dirname "$(find "$prefix" -name baton.pc)")")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
libs=$(pkg-config --libs baton)
case "$libs" in *hiredis*) fail "pkg-config --libs baton names hiredis: $libs" ;; esac
cflags=$(pkg-config --cflags baton) # Requires.private adds hiredis's -I: pkg-config's rule
# shellcheck disable=SC2086
quiet cc $sanflag -o "$work/pc-consumer" "$src/tests/vendor/main.c" $cflags $libs
LD_LIBRARY_PATH="$libdir" "$work/pc-consumer" >/dev/null || fail "pkg-config consumer"
quiet cmake -S "$src/tests/vendor" -B "$work/found" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="$sanflag" -DCMAKE_EXE_LINKER_FLAGS="$sanflag"
grep -rq hiredis "$work/found/CMakeFiles/consumer.dir/flags.make" &&
    fail "find_package(baton) gives consumers hiredis's include path"
quiet cmake --build "$work/found"
LD_LIBRARY_PATH="$libdir" "$work/found/consumer" >/dev/null || fail "find_package consumer"
echo "packaging: vendored, pkg-config ($libs) and find_package consumers build and run"
