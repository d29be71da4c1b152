# Part of cmake/man_page.cmake: in go-md2man's tables (between the format line ending in
# "." and .TE), puts every cell but a row's first in a text block (T{ ... T}) and lets
# those columns expand ("x"), so that tbl(1) wraps long cells to the page's width instead
# of overflowing it. go-md2man makes text blocks of long plain cells only.
/^\.TS$/ { intable = 1; format = 1; print; next }
intable && format && /;[ ]*$/ { print; next }
intable && format {
    if ($0 ~ /^l( l)*( \.)?[ ]*$/) {
        line = $0
        sub(/^l/, "L", line)
        gsub(/ l/, " lx", line)
        sub(/^L/, "l", line)
        print line
        if ($0 ~ /\.[ ]*$/)
            format = 0
        next
    }
    format = 0
}
/^\.TE$/ { intable = 0; print; next }
# go-md2man ends a text block with "T}" alone on its line and puts the row's next cell on
# the line after, which tbl reads as a new row: join the two.
intable && /^T\}$/ {
    if ((getline nextline) > 0) {
        if (nextline ~ /^\t/)
            $0 = "T}" nextline
        else {
            print
            $0 = nextline
            if ($0 ~ /^\.TE$/) { intable = 0; print; next }
        }
    }
}
intable && index($0, "\t") {
    n = split($0, cell, "\t")
    out = cell[1]
    for (i = 2; i <= n; i++) {
        if (cell[i] == "" || cell[i] ~ /^T\{/)
            out = out "\t" cell[i]
        else
            out = out "\tT{\n" cell[i] "\nT}"
    }
    print out
    next
}
{ print }
