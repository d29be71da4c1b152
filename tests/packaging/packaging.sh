#!/bin/sh
# baton as other projects consume it:
#  1. vendored: tests/vendor/ does add_subdirectory() of this source tree (with a directory
#     named baton in its build tree); it configures, builds (the baton command included) and
#     its program runs; baton's tests, examples and benchmark are not built; the parent's
#     `cmake --install` installs nothing of baton (BATON_INSTALL is OFF when baton is not the
#     top-level project), and everything with -DBATON_INSTALL=ON.
#  2. installed: `cmake --install BUILD --prefix P`; `pkg-config --cflags baton` is baton's
#     include path alone, `--libs` is -L and -lbaton alone, `--static --libs` adds hiredis,
#     OpenSSL and the threads; programs compiled with those flags (dynamic and static) link
#     and run, and
#     tests/vendor/ built with find_package(baton) from P links and runs.
#   tests/packaging/packaging.sh BUILD_DIR SOURCE_DIR [SANITIZER]
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
# the parent's `cmake --install` installs the parent's program and nothing of baton...
quiet cmake --install "$work/vendored" --prefix "$work/vendored-prefix"
got=$(cd "$work/vendored-prefix" && find . -type f -o -type l | sort | tr '\n' ' ')
[ "$got" = "./bin/consumer " ] || fail "vendored, cmake --install installed more than bin/consumer: $got"
# ...unless the parent asks for it with BATON_INSTALL=ON
quiet cmake -S "$src/tests/vendor" -B "$work/vendored" -DBATON_INSTALL=ON
quiet cmake --build "$work/vendored" -j 2 # relinks the command for its install RPATH
quiet cmake --install "$work/vendored" --prefix "$work/vendored-all"
for f in include/baton/baton.h bin/baton bin/consumer; do
    [ -e "$work/vendored-all/$f" ] || fail "vendored with BATON_INSTALL=ON: no $f installed"
done
[ -n "$(find "$work/vendored-all" -name baton.pc)" ] || fail "vendored with BATON_INSTALL=ON: no baton.pc"
# the installed command runs from the parent's prefix (issue 46.15: it could not find
# libbaton.so, exit 127): vendored, it links libbaton statically, whatever the parent's
# RPATH settings; the same with the parent skipping every install RPATH
env -u LD_LIBRARY_PATH "$work/vendored-all/bin/baton" --version >/dev/null ||
    fail "vendored, the installed baton does not run: $(env -u LD_LIBRARY_PATH "$work/vendored-all/bin/baton" --version 2>&1)"
quiet cmake -S "$src/tests/vendor" -B "$work/vendored" -DBATON_INSTALL=ON -DCMAKE_SKIP_INSTALL_RPATH=ON
quiet cmake --build "$work/vendored" -j 2
quiet cmake --install "$work/vendored" --prefix "$work/vendored-norpath"
out=$(env -u LD_LIBRARY_PATH "$work/vendored-norpath/bin/baton" --version 2>&1) ||
    fail "vendored without install RPATH, the installed baton does not run: $out"
readelf -d "$work/vendored-norpath/bin/baton" | grep -q 'NEEDED.*libbaton' &&
    fail "vendored, the baton command needs libbaton.so (it should link it statically)"

# ---- 2. installed: pkg-config and find_package ---------------------------------------------
prefix="$work/prefix"
quiet cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(dirname "$(find "$prefix" -name baton.pc)")")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# baton.pc names its private dependencies in Libs.private, not Requires.private: the
# compile flags are baton's include path alone (no -I/usr/include/hiredis, no hiredis's
# -D_FILE_OFFSET_BITS=64), a dynamic link is -L and -lbaton alone, and only a static link
# gets hiredis, OpenSSL and the threads.
cflags=$(pkg-config --cflags baton)
for f in $cflags; do
    case "$f" in
        -I*/include) ;;
        *) fail "pkg-config --cflags baton: '$f' is not baton's include path (all: $cflags)" ;;
    esac
done
[ "$(echo "$cflags" | wc -w)" -eq 1 ] || fail "pkg-config --cflags baton: $cflags"
libs=$(pkg-config --libs baton)
for f in $libs; do
    case "$f" in
        -L*) ;;
        -lbaton) ;;
        *) fail "pkg-config --libs baton: '$f' besides -L and -lbaton (all: $libs)" ;;
    esac
done
case " $libs " in *" -lbaton "*) ;; *) fail "pkg-config --libs baton lacks -lbaton: $libs" ;; esac
static=$(pkg-config --static --libs baton)
for want in -lbaton -lhiredis -lssl -lcrypto -lpthread; do
    case " $static " in *" $want "*) ;; *) fail "pkg-config --static --libs baton lacks $want: $static" ;; esac
done
# shellcheck disable=SC2086
quiet cc $sanflag -o "$work/pc-consumer" "$src/tests/vendor/main.c" $cflags $libs
LD_LIBRARY_PATH="$libdir" "$work/pc-consumer" >/dev/null || fail "pkg-config consumer"
# a static link with --static's flags: the archive and the private libraries it names
static_flags=$(echo "$static" | sed 's/ -lbaton / -l:libbaton.a /')
# shellcheck disable=SC2086
quiet cc $sanflag -DBATON_STATIC -o "$work/pc-static" "$src/tests/vendor/main.c" $cflags $static_flags
readelf -d "$work/pc-static" | grep -q 'NEEDED.*libbaton' && fail "the static consumer needs libbaton.so"
"$work/pc-static" >/dev/null || fail "pkg-config --static consumer"
quiet cmake -S "$src/tests/vendor" -B "$work/found" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="$sanflag" -DCMAKE_EXE_LINKER_FLAGS="$sanflag"
grep -rq hiredis "$work/found/CMakeFiles/consumer.dir/flags.make" &&
    fail "find_package(baton) gives consumers hiredis's include path"
quiet cmake --build "$work/found"
LD_LIBRARY_PATH="$libdir" "$work/found/consumer" >/dev/null || fail "find_package consumer"
echo "packaging: vendored, pkg-config ($libs) and find_package consumers build and run"
