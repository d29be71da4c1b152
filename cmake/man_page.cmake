# Run as: cmake -DMD2MAN=go-md2man -DIN=docs/baton.1.md -DOUT=baton.1 -DVERSION=x.y.z
#               -P man_page.cmake
# Makes the man page baton(1) from its Markdown source, docs/baton.1.md, the one text of
# the reference: go-md2man renders it to roff; then the title line gets the section, the
# version and the manual's name, the NAME line the "name \- summary" form that whatis(1)
# reads, in-page links lose their "#anchor" targets, the tables' cells wrap to the page's
# width (cmake/man_tables.awk), and a first line tells man(1) to run tbl(1).
execute_process(COMMAND ${MD2MAN} -in ${IN} -out ${OUT}.md2man RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "go-md2man failed on ${IN}")
endif()
get_filename_component(_here ${CMAKE_SCRIPT_MODE_FILE} DIRECTORY)
execute_process(COMMAND awk -f ${_here}/man_tables.awk ${OUT}.md2man OUTPUT_FILE ${OUT}.tmp
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "awk failed on ${OUT}.md2man")
endif()
file(READ ${OUT}.tmp roff)
string(REGEX REPLACE "\n\\.TH [^\n]*" "\n.TH BATON 1 \"\" \"baton ${VERSION}\" \"User Commands\""
       roff "${roff}")
string(REPLACE "\\fBbaton\\fP — " "baton \\- " roff "${roff}")
string(REGEX REPLACE "[ \n]\\\\\\[la\\]#[a-z0-9-]*\\\\\\[ra\\]" "" roff "${roff}")
file(WRITE ${OUT} "'\\\" t\n${roff}")
file(REMOVE ${OUT}.md2man ${OUT}.tmp)
