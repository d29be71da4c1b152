/*
 * A minimal stand-in for Criterion, used only in the ThreadSanitizer build: Criterion's
 * runner cannot start under TSan (its boxfort arena fails: Snaipe/Criterion#274), so this
 * header maps the subset of Criterion the tests use onto runner.c, which runs each test in
 * a forked child with an alarm for its timeout, like Criterion does. The test sources are
 * the same in every build.
 */
#ifndef BATON_TSAN_CRITERION_H
#define BATON_TSAN_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct th_suite {
    const char *name;
    double timeout;
    void (*init)(void);
    void (*fini)(void);
    const char *description;
    struct th_suite *next;
};

struct th_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    double timeout;
    void (*init)(void);
    void (*fini)(void);
    const char *description;
    struct th_test *next;
};

void th_register_suite(struct th_suite *s);
void th_register_test(struct th_test *t);
__attribute__((noreturn, format(printf, 4, 5))) void
th_fail(const char *file, int line, const char *expr, const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void th_log(const char *fmt, ...);
bool th_cmp_i64(int64_t a, int64_t b, int op, const char *ea, const char *eb);
bool th_cmp_u64(uint64_t a, uint64_t b, int op, const char *ea, const char *eb);
bool th_cmp_dbl(double a, double b, int op, const char *ea, const char *eb);
bool th_cmp_str(const char *a, const char *b, int op, const char *ea, const char *eb);
bool th_cmp_ptr(const void *a, const void *b, int op, const char *ea, const char *eb);

#define TestSuite(S, ...)                                                                          \
    static struct th_suite th_suite_##S = {.name = #S, __VA_ARGS__};                               \
    __attribute__((constructor)) static void th_suite_reg_##S(void)                                \
    {                                                                                              \
        th_register_suite(&th_suite_##S);                                                          \
    }

#define Test(S, N, ...)                                                                            \
    static void S##_##N##_impl(void);                                                              \
    static struct th_test th_test_##S##_##N = {                                                    \
        .suite = #S, .name = #N, .fn = S##_##N##_impl, __VA_ARGS__};                               \
    __attribute__((constructor)) static void th_test_reg_##S##_##N(void)                           \
    {                                                                                              \
        th_register_test(&th_test_##S##_##N);                                                      \
    }                                                                                              \
    static void S##_##N##_impl(void)

#define cr_assert(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            th_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                                    \
    } while (0)
#define cr_expect cr_assert
#define cr_assert_fail(...) th_fail(__FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_eq(a, b, ...)                                                                    \
    cr_assert(th_cmp_i64((int64_t)(a), (int64_t)(b), 0, #a, #b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...)                                                                   \
    cr_assert(th_cmp_i64((int64_t)(a), (int64_t)(b), 1, #a, #b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...)                                                                    \
    cr_assert(th_cmp_i64((int64_t)(a), (int64_t)(b), 2, #a, #b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...)                                                                   \
    cr_assert(th_cmp_i64((int64_t)(a), (int64_t)(b), 3, #a, #b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...)                                                                    \
    cr_assert(th_cmp_i64((int64_t)(a), (int64_t)(b), 4, #a, #b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...)                                                                   \
    cr_assert(th_cmp_i64((int64_t)(a), (int64_t)(b), 5, #a, #b), __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(th_cmp_str((a), (b), 0, #a, #b), __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(th_cmp_str((a), (b), 1, #a, #b), __VA_ARGS__)
#define cr_expect_eq cr_assert_eq
#define cr_log_info(...) th_log(__VA_ARGS__)

#define cr_log_warn(...) th_log(__VA_ARGS__)

#endif
