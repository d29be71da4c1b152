/* The TSan build's stand-in for Criterion's new assertions: eq(type, a, b) and friends,
 * printing both sides on failure. See ../criterion.h. */
#ifndef BATON_TSAN_CRITERION_NEW_ASSERT_H
#define BATON_TSAN_CRITERION_NEW_ASSERT_H

#include <criterion/criterion.h>

#define th_cmp_of_int th_cmp_i64
#define th_cmp_of_i8 th_cmp_i64
#define th_cmp_of_i16 th_cmp_i64
#define th_cmp_of_i32 th_cmp_i64
#define th_cmp_of_i64 th_cmp_i64
#define th_cmp_of_long th_cmp_i64
#define th_cmp_of_uint th_cmp_u64
#define th_cmp_of_u8 th_cmp_u64
#define th_cmp_of_u16 th_cmp_u64
#define th_cmp_of_u32 th_cmp_u64
#define th_cmp_of_u64 th_cmp_u64
#define th_cmp_of_sz th_cmp_u64
#define th_cmp_of_ulong th_cmp_u64
#define th_cmp_of_flt th_cmp_dbl
#define th_cmp_of_dbl th_cmp_dbl
#define th_cmp_of_str th_cmp_str
#define th_cmp_of_ptr th_cmp_ptr
#define th_cast_int (int64_t)
#define th_cast_i8 (int64_t)
#define th_cast_i16 (int64_t)
#define th_cast_i32 (int64_t)
#define th_cast_i64 (int64_t)
#define th_cast_long (int64_t)
#define th_cast_uint (uint64_t)
#define th_cast_u8 (uint64_t)
#define th_cast_u16 (uint64_t)
#define th_cast_u32 (uint64_t)
#define th_cast_u64 (uint64_t)
#define th_cast_sz (uint64_t)
#define th_cast_ulong (uint64_t)
#define th_cast_flt (double)
#define th_cast_dbl (double)
#define th_cast_str (const char *)
#define th_cast_ptr (const void *)

#define th_cmp_(T, a, b, op) th_cmp_of_##T(th_cast_##T(a), th_cast_##T(b), op, #a, #b)
#define eq(T, a, b) th_cmp_(T, a, b, 0)
#define ne(T, a, b) th_cmp_(T, a, b, 1)
#define lt(T, a, b) th_cmp_(T, a, b, 2)
#define le(T, a, b) th_cmp_(T, a, b, 3)
#define gt(T, a, b) th_cmp_(T, a, b, 4)
#define ge(T, a, b) th_cmp_(T, a, b, 5)
#define not(x) (!(x))
#define zero(T, x) eq(T, x, 0)

#endif
