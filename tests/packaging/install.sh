#!/bin/bash
# The installed tree, as a user gets it from `cmake --install BUILD --prefix P`: man(1)
# finds baton(1) under P/share/man and renders it without a warning; the bash completion
# lands in P/share/bash-completion/completions/baton and completes subcommands, options and
# COMMAND; and it offers every option and subcommand that docs/baton.1.md names (the page
# itself is made from that file at build time, so the two cannot differ).
#   tests/packaging/install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
prefix=$(mktemp -d /tmp/baton-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail() {
    echo "install: $*" >&2
    exit 1
}

cmake --install "$build" --prefix "$prefix" >/dev/null

# ---- the man page ----------------------------------------------------------------------
page=$(MANPATH="$prefix/share/man" man -w baton) || fail "man -w baton found nothing"
[ "$page" = "$prefix/share/man/man1/baton.1" ] || fail "man -w baton: $page"
text=$(MANWIDTH=80 man -l "$page" 2>"$prefix/man.err") || fail "man -l $page failed"
[ ! -s "$prefix/man.err" ] || fail "man -l $page: $(cat "$prefix/man.err")"
for want in "BATON(1)" "EXIT STATUS" "--watchdog DUR" "BATON_FENCING_TOKEN" "│"; do
    grep -qF -- "$want" <<<"$text" || fail "the rendered page lacks '$want'"
done
whatis=$(lexgrog "$page" 2>/dev/null || true)
grep -q 'baton - run commands' <<<"$whatis" || fail "whatis line: $whatis"

# ---- the completion ----------------------------------------------------------------------
comp="$prefix/share/bash-completion/completions/baton"
[ -f "$comp" ] || fail "no $comp"
# shellcheck source=/dev/null
. "$comp"
complete -p baton | grep -q -- '-F _baton' || fail "complete -p baton: $(complete -p baton)"
# offers WORDS...: completing the command line "$line" offers each of WORDS.
offers() {
    local line=$1
    shift
    read -r -a COMP_WORDS <<<"$line"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _baton
    local w
    for w in "$@"; do
        [[ " ${COMPREPLY[*]} " == *" $w "* ]] ||
            fail "'$line' does not offer '$w' (offers: ${COMPREPLY[*]})"
    done
}
offers "baton " lock semaphore latch rwlock status unlock --url --tls-ca --help
offers "baton l" lock latch
offers "baton --url redis://h lock jobs -" --wait -n -w -E -q --lease --watchdog --fair --hold
offers "baton lock jobs --wait 0 -" --fair --
offers "baton rwlock cfg --" --read --write
offers "baton semaphore api " set add drain delete --permits --take
offers "baton latch b " set count-down count await delete
offers "baton status x --" --json --watch
offers "baton list --" --json --max-keys
offers "baton " list --password-file --name --tls --cacert -u
offers "baton unlock --" --force
offers "baton --tls-insecure --sync-replicas 1 --user u --askpass " lock
offers "baton lock jobs -- " sh
: >"$prefix/ca.pem"
offers "baton --tls-ca $prefix/c" "$prefix/ca.pem"
offers "baton lock jobs -- cat $prefix/c" "$prefix/ca.pem"

# ---- in step with docs/baton.1.md ----------------------------------------------------------
# The options in the page's option tables and SYNOPSIS, and the SYNOPSIS's subcommands.
md="$src/docs/baton.1.md"
named=$(
    {
        grep '^| `-' "$md" | cut -d'|' -f2
        sed -n '/^## SYNOPSIS/,/^## /p' "$md"
    } | grep -oE -- '(^|[ `\[])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ `[]//' | sort -u
)
subcommands=$(sed -n '/^## SYNOPSIS/,/^## /p' "$md" | grep '^baton ' |
    sed 's/\[[^]]*\]//g' | awk '{ print $2 }' | grep -v '^-' | sort -u)
latch_verbs=$(grep -oE '^\| `(set|count-down|count|await|delete)[ `]' "$md" | tr -d '|` ')
[ -n "$named" ] && [ -n "$subcommands" ] && [ -n "$latch_verbs" ] || fail "nothing read from $md"
for w in $named $subcommands $latch_verbs; do
    grep -qE -- "(^|[ \"])$w( |\"|\))" "$comp" || fail "$md names '$w'; $comp does not offer it"
done
echo "install: man -w baton -> $page; completion offers the page's $(wc -w <<<"$named $subcommands $latch_verbs") names"
