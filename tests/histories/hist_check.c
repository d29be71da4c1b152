/*
 * Checks recorded histories again: hist_check FILE... (the merged history.txt of a kept
 * run, or its per-process .hist files). Prints the verdicts and the counts; exits 1 when a
 * checker found a violation.
 */
#define _GNU_SOURCE
#include "hist.h"

#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hist_check FILE...\n");
        return 2;
    }
    hist h = {0};
    for (int i = 1; i < argc; i++)
        if (!hist_read_file(&h, argv[i]))
            return 2;
    hist_sort(&h);
    hist_params p;
    hist_params_default(&p);
    const char *w = getenv("HIST_WATCHDOG_MS");
    if (w)
        p.watchdog_ms = atoll(w);
    const char *x = getenv("HIST_EXCERPTS");
    if (x)
        p.excerpts = atoi(x);
    long bad = hist_check_all(&h, &p, stdout);
    hist_counts c;
    hist_count(&h, &c);
    printf("counts operations %ld ok %ld fail %ld unknown %ld faults %ld\n", c.ops, c.ok, c.fail,
           c.info, c.faults);
    hist_free(&h);
    return bad ? 1 : 0;
}
