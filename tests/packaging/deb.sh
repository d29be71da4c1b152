#!/bin/sh
# The Debian packages, as `dpkg-buildpackage -us -uc -b` makes them from debian/ (a copy of
# the source tree, so the checkout stays clean):
#  - three packages: libbaton0.N (named after the SONAME libbaton.so.0.N, Debian policy 8.1),
#    libbaton-dev and baton, each with the files it should have and no other;
#  - lintian reports no error (its warnings are printed);
#  - installed into a fresh root (dpkg -x of the three .debs: the root holds nothing else of
#    baton), `baton --version` runs against the root's libbaton, its man page is found, and
#    two consumers of libbaton-dev build and run: one with the root's pkg-config flags (baton.pc
#    alone: hiredis's and OpenSSL's .pc are not consulted; the packaged baton.pc says
#    prefix=/usr, so PKG_CONFIG_SYSROOT_DIR points into the root), one with
#    find_package(baton).
#   tests/packaging/deb.sh SOURCE_DIR
# Needs dpkg-dev, debhelper and lintian (apt-get install dpkg-dev debhelper lintian) and the
# Build-Depends of debian/control. dpkg-buildpackage takes about 75 s on 2 cores.
set -eu
src=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/baton-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() {
    echo "deb: $*" >&2
    exit 1
}
quiet() {
    "$@" >"$work/log" 2>&1 || { tail -n 60 "$work/log" >&2; fail "failed: $*"; }
}
for tool in dpkg-buildpackage dh lintian; do
    command -v "$tool" >/dev/null ||
        fail "$tool not found: apt-get install dpkg-dev debhelper lintian"
done

# ---- build ---------------------------------------------------------------------------------
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
upstream=${version%-*}
tree="$work/baton-$upstream"
mkdir "$tree"
# the source tree without build directories, the checkout's .git or debhelper's leftovers
tar -C "$src" --exclude='./build*' --exclude=./.git --exclude='./obj-*' --exclude=./Testing \
    --exclude=./debian/tmp --exclude='./debian/.debhelper' -cf - . | tar -C "$tree" -xf -
start=$(date +%s)
(cd "$tree" && quiet dpkg-buildpackage -us -uc -b)
echo "deb: dpkg-buildpackage -us -uc -b took $(($(date +%s) - start)) s"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# The library package is named after the SONAME the build set: libbaton.so.0.3 -> libbaton0.3.
soname=$(readelf -d "$tree/debian/tmp/usr/lib/$ma/libbaton.so.$upstream" |
    sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
libpkg=libbaton${soname#libbaton.so.}
if [ -z "$soname" ] || [ ! -f "$work/${libpkg}_${version}_$arch.deb" ]; then
    fail "the SONAME is '$soname' but there is no $libpkg package: rename it in debian/"
fi
lib="$work/${libpkg}_${version}_$arch.deb"
dev="$work/libbaton-dev_${version}_$arch.deb"
cli="$work/baton_${version}_$arch.deb"

# contents PACKAGE EXPECTED...: the package's files and links (not directories, not
# /usr/share/doc) are exactly EXPECTED.
contents() {
    deb=$1
    shift
    got=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./|/|' |
        grep -v '^/usr/share/doc/' | sort | tr '\n' ' ')
    want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
    [ "$got" = "$want" ] || fail "$(basename "$deb") has: $got
  expected: $want"
}
headers=$(cd "$src/include" && find baton -name '*.h' | sed 's|^|/usr/include/|')
# shellcheck disable=SC2086
contents "$dev" $headers "/usr/lib/$ma/libbaton.so" "/usr/lib/$ma/libbaton.a" \
    "/usr/lib/$ma/pkgconfig/baton.pc" "/usr/lib/$ma/cmake/baton/batonConfig.cmake" \
    "/usr/lib/$ma/cmake/baton/batonConfigVersion.cmake" \
    "/usr/lib/$ma/cmake/baton/batonTargets.cmake" "/usr/lib/$ma/cmake/baton/batonTargets-none.cmake"
contents "$lib" "/usr/lib/$ma/$soname" "/usr/lib/$ma/libbaton.so.$upstream"
contents "$cli" /usr/bin/baton /usr/share/man/man1/baton.1.gz \
    /usr/share/bash-completion/completions/baton
# the documentation and the example units, plain text under /usr/share/doc/baton (issue 46.12)
docs=$(dpkg-deb -c "$cli" | awk '{ print $6 }' | sed 's|^\./|/|' | grep '^/usr/share/doc/baton/')
for f in README.md security.md systemd.md election.md barrier.md guarantees.md baton.1.md \
    examples/baton-hold@.service examples/baton-worker.service examples/primary-app.service \
    examples/baton-notify.service; do
    printf '%s\n' "$docs" | grep -qx "/usr/share/doc/baton/$f" ||
        fail "baton does not ship /usr/share/doc/baton/$f: $docs"
done
# (>= the version that added the newest symbol the CLI uses: the symbols file's, at most
# $upstream)
dpkg-deb -f "$cli" Depends | grep -q "$libpkg (>= " ||
    fail "baton does not depend on $libpkg: $(dpkg-deb -f "$cli" Depends)"
dpkg-deb -f "$dev" Depends | grep -q "$libpkg (= $version)" ||
    fail "libbaton-dev does not depend on $libpkg (= $version): $(dpkg-deb -f "$dev" Depends)"
dpkg-deb -I "$lib" symbols | grep -q " baton_lock_acquire@Base" || fail "$libpkg has no symbols file"

# ---- lintian: no error -----------------------------------------------------------------------
lintian --fail-on error "$work/baton_${version}_$arch.changes" >"$work/lintian" 2>&1 || {
    cat "$work/lintian" >&2
    fail "lintian reports errors"
}
grep -E '^[EW]:' "$work/lintian" | sed 's/^/deb: lintian: /' || true

# ---- a fresh root with the three packages ---------------------------------------------------
root="$work/root"
for deb in "$lib" "$dev" "$cli"; do
    dpkg -x "$deb" "$root"
done
export LD_LIBRARY_PATH="$root/usr/lib/$ma"
# the command finds its libbaton in the root, and nowhere else
ldd "$root/usr/bin/baton" | grep -q "$soname => $root/usr/lib/$ma/$soname" ||
    fail "baton does not load the root's $soname: $(ldd "$root/usr/bin/baton")"
readelf -d "$root/usr/bin/baton" | grep -Eq 'RPATH|RUNPATH' && fail "/usr/bin/baton has an RPATH"
v=$("$root/usr/bin/baton" --version) || fail "baton --version failed"
[ "$v" = "baton $upstream (libbaton $upstream)" ] || fail "baton --version: $v"
page=$(MANPATH="$root/usr/share/man" man -w baton) || fail "man -w baton found nothing in the root"
[ "$page" = "$root/usr/share/man/man1/baton.1.gz" ] || fail "man -w baton: $page"
# SEE ALSO points where the documentation is, and every file it names is there
see=$(MANWIDTH=200 man -l "$page" 2>/dev/null | sed -n '/^SEE ALSO/,$p')
printf '%s' "$see" | grep -q '/usr/share/doc/baton/' || fail "SEE ALSO does not name /usr/share/doc/baton: $see"
for f in $(printf '%s' "$see" | grep -oE '[A-Za-z.-]+\.md' | sort -u); do
    [ -f "$root/usr/share/doc/baton/$f" ] || fail "SEE ALSO names $f, not in /usr/share/doc/baton"
done
# the example units pass systemd-analyze verify (when systemd is there); their only
# complaint may be the placeholder programs they run (/usr/local/bin/...)
if command -v systemd-analyze >/dev/null; then
    units="$work/units"
    mkdir "$units"
    cp "$root"/usr/share/doc/baton/examples/*.service "$units/"
    ln -s "baton-hold@.service" "$units/baton-hold@primary.service"
    for u in "$units"/*.service; do
        case "$u" in *@.service) continue ;; esac
        out=$(cd "$units" && systemd-analyze verify --man=no "$u" 2>&1 |
            grep -v 'Command /usr/local/bin/[a-z-]* is not executable' || true)
        [ -z "$out" ] || fail "systemd-analyze verify $(basename "$u"): $out"
    done
fi

# pkg-config sees the root's baton.pc only (PKG_CONFIG_LIBDIR replaces the system's path).
# Its prefix is /usr: installed, pkg-config leaves the system's directories out of the flags,
# so --cflags is empty and --libs is -lbaton; in the root (PKG_CONFIG_SYSROOT_DIR) they are
# the root's directories.
pc="$root/usr/lib/$ma/pkgconfig"
words() { # the words of $1, one space apart
    # shellcheck disable=SC2086
    echo $1
}
grep -qx 'prefix=/usr' "$pc/baton.pc" || fail "the packaged baton.pc's prefix is not /usr"
sys=$(PKG_CONFIG_LIBDIR="$pc" pkg-config --cflags --libs baton) || fail "pkg-config baton"
[ "$(words "$sys")" = "-lbaton" ] || fail "installed, pkg-config --cflags --libs baton: $sys"
static=$(PKG_CONFIG_LIBDIR="$pc" pkg-config --static --libs baton)
[ "$(words "$static")" = "-lbaton -lhiredis -lssl -lcrypto -lpthread" ] ||
    fail "installed, pkg-config --static --libs baton: $static"
export PKG_CONFIG_SYSROOT_DIR="$root"
cflags=$(PKG_CONFIG_LIBDIR="$pc" pkg-config --cflags baton) || fail "pkg-config --cflags baton"
libs=$(PKG_CONFIG_LIBDIR="$pc" pkg-config --libs baton) || fail "pkg-config --libs baton"
[ "$(words "$cflags")" = "-I$root/usr/include" ] || fail "in the root, pkg-config --cflags baton: $cflags"
# shellcheck disable=SC2086
quiet cc -o "$work/pc-consumer" "$src/tests/vendor/main.c" $cflags $libs
out=$("$work/pc-consumer") || fail "the pkg-config consumer failed: $out"
[ "$out" = "libbaton $upstream: empty URL: invalid argument" ] || fail "pkg-config consumer: $out"
ldd "$work/pc-consumer" | grep -q "$soname => $root/" || fail "the consumer loads another libbaton"
# find_package(baton) in the root: the CMake package is relocatable too
quiet cmake -S "$src/tests/vendor" -B "$work/found" -DCMAKE_PREFIX_PATH="$root/usr"
quiet cmake --build "$work/found"
out=$("$work/found/consumer") || fail "the find_package consumer failed: $out"
[ "$out" = "libbaton $upstream: empty URL: invalid argument" ] || fail "find_package consumer: $out"
echo "deb: $libpkg, libbaton-dev, baton $version built, lintian without error; in a fresh root:" \
    "$v; pkg-config and find_package consumers run"
