/* The TSan build's stand-in for Criterion's logging (see criterion.h). */
#ifndef BATON_TSAN_CRITERION_LOGGING_H
#define BATON_TSAN_CRITERION_LOGGING_H

#include <criterion/criterion.h>

enum criterion_severity { CR_LOG_INFO, CR_LOG_WARNING, CR_LOG_ERROR };
#define cr_log(severity, ...) th_log(__VA_ARGS__)
#define cr_log_error(...) th_log(__VA_ARGS__)

#endif
