/*
 * The ThreadSanitizer build's test runner (see criterion/criterion.h for why). Each test runs
 * in a forked child, with its init and fini, and an alarm for its timeout (suite's or
 * test's, else 30 s): a hung test is killed and counted as failed. Supports the options the
 * build passes (--jobs N, --verbose[=N]) and --filter suite/glob. Ends with the same kind of
 * synthesis line as Criterion, and the plain "N passed, N failed" line.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct th_suite *suites;
static struct th_test *tests;
static _Thread_local char cmp_msg[1024];

void th_register_suite(struct th_suite *s)
{
    s->next = suites;
    suites = s;
}

void th_register_test(struct th_test *t)
{
    t->next = tests;
    tests = t;
}

void th_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[----] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

void th_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "[----] %s:%d: Assertion Failed: %s\n", file, line, expr);
    if (cmp_msg[0])
        fprintf(stderr, "[----]   %s\n", cmp_msg);
    if (fmt && fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "[----]   ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    fflush(stderr);
    _exit(1);
}

static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};

static bool holds(int c, int op)
{
    switch (op) {
    case 0:
        return c == 0;
    case 1:
        return c != 0;
    case 2:
        return c < 0;
    case 3:
        return c <= 0;
    case 4:
        return c > 0;
    default:
        return c >= 0;
    }
}

bool th_cmp_i64(int64_t a, int64_t b, int op, const char *ea, const char *eb)
{
    bool ok = holds((a > b) - (a < b), op);
    if (!ok)
        snprintf(cmp_msg, sizeof cmp_msg, "%s %s %s: %lld vs %lld", ea, ops[op], eb, (long long)a,
                 (long long)b);
    return ok;
}

bool th_cmp_u64(uint64_t a, uint64_t b, int op, const char *ea, const char *eb)
{
    bool ok = holds((a > b) - (a < b), op);
    if (!ok)
        snprintf(cmp_msg, sizeof cmp_msg, "%s %s %s: %llu vs %llu", ea, ops[op], eb,
                 (unsigned long long)a, (unsigned long long)b);
    return ok;
}

bool th_cmp_dbl(double a, double b, int op, const char *ea, const char *eb)
{
    bool ok = holds((a > b) - (a < b), op);
    if (!ok)
        snprintf(cmp_msg, sizeof cmp_msg, "%s %s %s: %g vs %g", ea, ops[op], eb, a, b);
    return ok;
}

bool th_cmp_str(const char *a, const char *b, int op, const char *ea, const char *eb)
{
    int c = (a && b) ? strcmp(a, b) : (a ? 1 : (b ? -1 : 0));
    bool ok = holds(c, op);
    if (!ok)
        snprintf(cmp_msg, sizeof cmp_msg, "%s %s %s: \"%s\" vs \"%s\"", ea, ops[op], eb,
                 a ? a : "(null)", b ? b : "(null)");
    return ok;
}

bool th_cmp_ptr(const void *a, const void *b, int op, const char *ea, const char *eb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    bool ok = holds((x > y) - (x < y), op);
    if (!ok)
        snprintf(cmp_msg, sizeof cmp_msg, "%s %s %s: %p vs %p", ea, ops[op], eb, a, b);
    return ok;
}

static struct th_suite *suite_of(const char *name)
{
    for (struct th_suite *s = suites; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    const struct th_test *x = *(struct th_test *const *)a, *y = *(struct th_test *const *)b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
        else if (strcmp(argv[i], "--jobs") == 0 || strcmp(argv[i], "-j") == 0)
            i++; /* one at a time anyway */
    }
    size_t n = 0;
    for (struct th_test *t = tests; t; t = t->next)
        n++;
    struct th_test **list = calloc(n + 1, sizeof *list);
    n = 0;
    for (struct th_test *t = tests; t; t = t->next)
        list[n++] = t;
    qsort(list, n, sizeof *list, by_name);

    int passed = 0, failed = 0, crashed = 0, tested = 0;
    fprintf(stderr, "[====] Running %zu tests (TSan runner)\n", n);
    for (size_t i = 0; i < n; i++) {
        struct th_test *t = list[i];
        char full[512];
        snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
        if (filter && fnmatch(filter, full, 0) != 0)
            continue;
        struct th_suite *s = suite_of(t->suite);
        double timeout = t->timeout > 0 ? t->timeout : (s && s->timeout > 0 ? s->timeout : 30);
        tested++;
        fprintf(stderr, "[RUN ] %s::%s\n", t->suite, t->name);
        fflush(NULL);
        double t0 = now_s();
        pid_t pid = fork();
        if (pid == 0) {
            alarm((unsigned)(timeout + 0.999));
            if (s && s->init)
                s->init();
            if (t->init)
                t->init();
            t->fn();
            if (t->fini)
                t->fini();
            if (s && s->fini)
                s->fini();
            fflush(NULL);
            exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        double took = now_s() - t0;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passed++;
            fprintf(stderr, "[PASS] %s::%s: (%.2fs)\n", t->suite, t->name, took);
        } else if (WIFSIGNALED(st)) {
            crashed++;
            fprintf(stderr, "[FAIL] %s::%s: %s after %.2fs\n", t->suite, t->name,
                    WTERMSIG(st) == SIGALRM ? "timed out" : strsignal(WTERMSIG(st)), took);
        } else {
            failed++;
            fprintf(stderr, "[FAIL] %s::%s: (%.2fs)\n", t->suite, t->name, took);
        }
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d\n",
            tested, passed, failed, crashed);
    printf("%d passed, %d failed\n", passed, failed + crashed);
    free(list);
    return (failed || crashed) ? 1 : 0;
}
