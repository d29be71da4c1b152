#!/bin/sh
# A Debian 13 ("trixie") root made with debootstrap, with Redis 8, Valkey 8, their tools,
# OpenSSL and groff in it, and the way to run this machine's programs against those servers.
# The root is cached (BATON_TRIXIE_CACHE, default /var/cache/baton) and reused when present:
#   $cache/trixie-minbase   debootstrap's minbase, kept as it came (the "fresh root")
#   $cache/trixie           a copy of it with the servers installed
# Needs root (debootstrap, chroot). The mirror is BATON_DEBIAN_MIRROR
# (default http://deb.debian.org/debian).
#
#   trixie-root.sh root              make the server root if missing; print its path
#   trixie-root.sh shims DIR         write redis-server, redis-cli, valkey-server, valkey-cli,
#                                    openssl and groff shims in DIR that run the root's
#                                    binaries through the root's own loader on host paths
#   trixie-root.sh run redis|valkey CMD...
#                                    run CMD on this machine with those shims first on PATH
#                                    and BATON_SERVER=redis-server or valkey-server
#   trixie-root.sh fresh CMD...      run CMD (sh -c) as root inside a new copy of the minbase
#                                    root, with /proc, /sys and /dev mounted and this tree
#                                    copied to /baton (its own namespace: nothing stays
#                                    mounted); the copy is removed afterwards unless
#                                    BATON_TRIXIE_KEEP=1
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${BATON_TRIXIE_CACHE:-/var/cache/baton}
mirror=${BATON_DEBIAN_MIRROR:-http://deb.debian.org/debian}
minbase=$cache/trixie-minbase
root=$cache/trixie
# what the server root holds beyond minbase
pkgs="redis-server redis-tools valkey-server valkey-tools openssl groff-base go-md2man"

say() { echo "trixie-root: $*" >&2; }

make_minbase() {
    [ -f "$minbase/.baton-minbase" ] && return 0
    "$top/scripts/deps.sh" debootstrap
    mkdir -p "$cache"
    rm -rf "$minbase.tmp"
    say "debootstrap trixie (minbase) from $mirror into $minbase ..."
    debootstrap --variant=minbase trixie "$minbase.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
        tail -20 "$cache/debootstrap.log" >&2
        say "debootstrap failed (log: $cache/debootstrap.log)"
        exit 1
    }
    date -u +%FT%TZ >"$minbase.tmp/.baton-minbase"
    rm -rf "$minbase"
    mv "$minbase.tmp" "$minbase"
}

# chroot_run DIR CMD: CMD (sh -c) inside DIR with /proc, /sys, /dev mounted in a private
# mount namespace, so that every mount goes with the process whatever happens
chroot_run() {
    _r=$1
    shift
    cp -L /etc/resolv.conf "$_r/etc/resolv.conf" 2>/dev/null || :
    unshare --mount --propagation private sh -c '
        r=$1; shift
        # the root a mount point of its own: "ip netns exec" makes / a slave mount
        mount --bind "$r" "$r" &&
        mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" &&
        mount --rbind /dev "$r/dev" || exit 1
        exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            ${CI:+CI=$CI} /bin/sh -c "$@"' chroot_run "$_r" "$@"
}

make_root() {
    if [ -f "$root/.baton-ready" ] && [ "$(cat "$root/.baton-ready")" = "$pkgs" ]; then
        return 0
    fi
    make_minbase
    if [ ! -f "$root/.baton-copied" ]; then
        rm -rf "$root"
        cp -a "$minbase" "$root"
        touch "$root/.baton-copied"
    fi
    # no service starts in the root: baton starts its own servers
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod +x "$root/usr/sbin/policy-rc.d"
    say "installing $pkgs in $root ..."
    chroot_run "$root" "export DEBIAN_FRONTEND=noninteractive &&
        apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs" \
        >"$cache/trixie-apt.log" 2>&1 || {
        tail -20 "$cache/trixie-apt.log" >&2
        say "installing in the root failed (log: $cache/trixie-apt.log)"
        exit 1
    }
    echo "$pkgs" >"$root/.baton-ready"
}

# shim DIR NAME BIN [ENV]: DIR/NAME runs the root's BIN through the root's loader (written
# aside and renamed: another run may be executing the old one)
shim() {
    cat >"$1/$2.$$" <<EOF
#!/bin/sh
# $2 of the Debian 13 root $root (scripts/trixie-root.sh)
$4exec "$root/lib64/ld-linux-x86-64.so.2" --argv0 "$2" \\
    --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" \\
    "$root$3" "\$@"
EOF
    chmod +x "$1/$2.$$"
    mv -f "$1/$2.$$" "$1/$2"
}

make_shims() {
    mkdir -p "$1"
    for b in redis-server redis-cli redis-benchmark valkey-server valkey-cli valkey-benchmark; do
        shim "$1" "$b" "/usr/bin/$b"
    done
    shim "$1" openssl /usr/bin/openssl \
        "OPENSSL_CONF=$root/usr/lib/ssl/openssl.cnf OPENSSL_MODULES=$root/usr/lib/x86_64-linux-gnu/ossl-modules "
    # groff's own files (fonts, macros) are found through GROFF_FONT_PATH/GROFF_TMAC_PATH
    for b in groff troff grotty tbl go-md2man; do
        shim "$1" "$b" "/usr/bin/$b" \
            "GROFF_FONT_PATH=$root/usr/share/groff/current/font GROFF_TMAC_PATH=$root/usr/share/groff/current/tmac:$root/usr/share/groff/site-tmac GROFF_BIN_PATH=$1 "
    done
}

cmd=${1:-root}
[ $# -gt 0 ] && shift
case $cmd in
    root)
        make_root
        echo "$root" ;;
    shims)
        [ -n "${1:-}" ] || { say "usage: trixie-root.sh shims DIR"; exit 2; }
        make_root
        make_shims "$1"
        echo "$1" ;;
    run)
        case ${1:-} in
            redis) server=redis-server ;;
            valkey) server=valkey-server ;;
            *) say "usage: trixie-root.sh run redis|valkey CMD..."; exit 2 ;;
        esac
        shift
        make_root
        shims=$cache/shims
        make_shims "$shims"
        say "$("$shims/$server" --version)"
        PATH=$shims:$PATH BATON_SERVER=$server exec "$@" ;;
    fresh)
        make_minbase
        fresh=$(mktemp -d "$cache/fresh.XXXXXX")
        trap 'if [ "${BATON_TRIXIE_KEEP:-}" != 1 ]; then rm -rf "$fresh"; else say "kept $fresh"; fi' EXIT
        say "fresh root $fresh"
        cp -a "$minbase/." "$fresh/"
        mkdir -p "$fresh/baton"
        # the tree as it is (tracked and new files, not the build directories)
        (cd "$top" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
            tar -C "$fresh/baton" -xf -
        chroot_run "$fresh" "cd /baton && $*" ;;
    *)
        say "unknown command $cmd (root, shims, run, fresh)"; exit 2 ;;
esac
