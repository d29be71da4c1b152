# bench/run --installed: the benchmark builds against an installed baton (issue 29: the
# bench uses include/baton/ only). Installs the build into a temporary prefix
# (cmake --install), compiles bench/baton-bench.c and bench/syscount.c with nothing but
# that prefix's baton.pc (its include directory and -lbaton) and hiredis's, with -Werror,
# then runs s1 and s2 briefly against a private redis-server: both must finish, and the
# socket system calls of the shared libbaton must be counted (syscalls_per_rt is a number).
# Sourced by bench/run, which has built baton ($dir) and set $top and $work.

installed_check() {
    prefix="$work/prefix"
    cmake --install "$dir" --prefix "$prefix" >"$work/install.log" 2>&1 || {
        cat "$work/install.log" >&2
        return 1
    }
    pc=$(find "$prefix" -name baton.pc | head -n 1)
    [ -n "$pc" ] || { say "bench: no baton.pc under $prefix"; return 1; }
    libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir baton)
    # the scenarios whose modules this libbaton has
    defs=
    nm -D "$libdir/libbaton.so" | grep -q ' T baton_fairlock_open$' &&
        defs="$defs -DBATON_BENCH_HAVE_FAIRLOCK"
    nm -D "$libdir/libbaton.so" | grep -q ' T baton_semaphore_open$' &&
        defs="$defs -DBATON_BENCH_HAVE_SEMAPHORE"
    cflags="$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags baton) $(pkg-config --cflags hiredis)"
    libs="$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --libs baton) $(pkg-config --libs hiredis)"
    say "bench: compiling baton-bench against $prefix: cc $cflags$defs ... $libs"
    # shellcheck disable=SC2086
    cc -std=c11 -O2 -Wall -Wextra -Werror -Wno-missing-field-initializers $cflags $defs \
        -o "$work/baton-bench" "$top/bench/baton-bench.c" "$top/bench/syscount.c" \
        $libs -lpthread -lm -ldl -rdynamic -Wl,-rpath,"$libdir" || return 1
    # nothing of the source tree's src/ reached the compiler
    case "$cflags" in *"$top/src"*) say "bench: src/ in the include path"; return 1 ;; esac
    ldd "$work/baton-bench" | grep -q "$libdir/libbaton.so" ||
        { say "bench: the bench is not linked with $libdir/libbaton.so"; return 1; }
    redis_start
    for args in "--scenario s1 --n 300" "--scenario s2 --k 20"; do
        # shellcheck disable=SC2086
        "$work/baton-bench" --port "$REDIS_PORT" $args >"$work/inst.out" || return 1
        say "  $(cut -c1-160 "$work/inst.out")"
        grep -q 'syscalls_per_rt=[0-9]' "$work/inst.out" ||
            { say "bench: syscalls_per_rt was not counted"; return 1; }
    done
    redis_stop
    say "bench: baton-bench builds and runs against the installed baton ($prefix)"
}
