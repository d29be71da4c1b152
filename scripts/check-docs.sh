#!/bin/sh
# The `docs` test: every code block of README.md and docs/*.md that is a whole program (it
# has a main) compiles and links as written, against the library just built; and every
# public header compiles alone as C11 and as C++11 with -Wall -Wextra -pedantic -Werror.
#
# usage: scripts/check-docs.sh SOURCE_DIR LIBRARY   (LIBRARY: the built libbaton.so)
set -eu
src=$1
lib=$2
cc=${CC:-cc}
cxx=${CXX:-c++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
programs=0

# ---- the documents' programs --------------------------------------------------------------
for doc in "$src/README.md" "$src"/docs/*.md; do
    # each ```c block into its own file, named after the document and its first line
    awk -v out="$work/$(basename "$doc" .md)" '
        /^```c[ \t]*$/ { inblock = 1; n++; start = NR; file = out "-" n "-line" NR ".c"; next }
        /^```/ && inblock { inblock = 0; close(file); next }
        inblock { print > file }
    ' "$doc"
done
for f in "$work"/*.c; do
    [ -e "$f" ] || continue
    grep -q '^int main(' "$f" || continue
    programs=$((programs + 1))
    if ! "$cc" -std=c11 -Wall -Wextra -pedantic -Werror -I "$src/include" "$f" "$lib" \
        -o "$f.out" 2>"$f.err"; then
        echo "docs: $(basename "$f") does not compile as written:" >&2
        cat "$f.err" >&2
        fail=1
    fi
done
if [ "$programs" -lt 3 ]; then
    echo "docs: only $programs whole programs found in README.md and docs/ (want >= 3)" >&2
    fail=1
fi

# ---- each public header alone ------------------------------------------------------------
headers=0
for h in "$src"/include/baton/*.h; do
    headers=$((headers + 1))
    name=baton/$(basename "$h")
    printf '#include <%s>\nint baton_docs_check_;\n' "$name" >"$work/h.c"
    cp "$work/h.c" "$work/h.cpp"
    if ! "$cc" -std=c11 -Wall -Wextra -pedantic -Werror -I "$src/include" -c "$work/h.c" \
        -o "$work/h.o" 2>"$work/h.err"; then
        echo "docs: $name does not compile alone as C11:" >&2
        cat "$work/h.err" >&2
        fail=1
    fi
    if ! "$cxx" -std=c++11 -Wall -Wextra -pedantic -Werror -I "$src/include" -c "$work/h.cpp" \
        -o "$work/h.o" 2>"$work/h.err"; then
        echo "docs: $name does not compile alone as C++11:" >&2
        cat "$work/h.err" >&2
        fail=1
    fi
done
# ---- the README a newcomer opens first: short, and every link of it and of docs/ leads somewhere
readme_lines=$(wc -l <"$src/README.md")
if [ "$readme_lines" -gt 250 ]; then
    echo "docs: README.md has $readme_lines lines (at most 250: move the detail to docs/)" >&2
    fail=1
fi
links=0
for doc in "$src/README.md" "$src"/docs/*.md "$src/CONTRIBUTING.md"; do
    dir=$(dirname "$doc")
    # the headings' anchors, as GitHub makes them
    sed -n 's/^#\{1,6\} //p' "$doc" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g' \
        >"$work/anchors"
    for target in $(grep -o '](\([^)#: ]*\)\(#[^) ]*\)\{0,1\})' "$doc" | sed 's/^](//; s/)$//'); do
        links=$((links + 1))
        file=${target%%#*}
        anchor=
        case $target in *'#'*) anchor=${target#*#} ;; esac
        if [ -n "$file" ] && [ ! -e "$dir/$file" ]; then
            echo "docs: $(basename "$doc") links to $target: no such file" >&2
            fail=1
        elif [ -z "$file" ] && [ -n "$anchor" ] && ! grep -qx -- "$anchor" "$work/anchors"; then
            echo "docs: $(basename "$doc") links to #$anchor: no such heading" >&2
            fail=1
        fi
    done
done

echo "docs: README.md $readme_lines lines, $links links followed; $programs programs from README.md and docs/ compiled and linked; $headers headers alone as C11 and C++11"
exit $fail
