/*
 * Criterion's assertion API (criterion/new/assert.h), for every test that uses it: include
 * this instead.
 *
 * Criterion 2.4.1 (Debian 12) defines gt(Tag, a, b) in C as !(a < b), that is a >= b: an
 * assertion gt(int, n, 0) passed with n == 0 (test_cluster's count of sharded scripts did,
 * for weeks). Its C++ form is right. Here gt is a > b for every tag; test_unit's
 * criterion_gt_is_strict checks that it refuses equal values.
 */
#ifndef BATON_TEST_NEW_ASSERT_H
#define BATON_TEST_NEW_ASSERT_H

#include <criterion/new/assert.h>

#undef CRI_BINOP_T_GT
#define CRI_BINOP_T_GT(Tag, Actual, Ref)                                                           \
    (CRI_BINOP_LT_TAG(Tag, !, Actual, Ref) && CRI_BINOP_EQ_TAG(Tag, !, Actual, Ref))

#endif /* BATON_TEST_NEW_ASSERT_H */
