/*
 * What the tests of the baton command share: running the built binary (its path comes from
 * the compile definition BATON_CLI_PATH) in the foreground with its output captured or in
 * the background, temporary files, and a small strict JSON reader for `status --json`.
 */
#ifndef BATON_TEST_CLI_HELPER_H
#define BATON_TEST_CLI_HELPER_H

#include "helper.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The NULL-terminated argument list cli_exec and cli_spawn take: ARGS("lock", name). */
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* One finished run of baton. */
typedef struct cli_result {
    int status; /* exit status, or 128 + signal */
    char *out;  /* stdout, NUL-terminated; free with cli_result_free */
    char *err;  /* stderr */
    int64_t ms; /* wall time from start to exit */
} cli_result;

/* Runs baton with the NULL-terminated arguments (not counting "baton") against the test
 * server (BATON_URL is set to it unless the caller's environment sets it), waits for it. */
void cli_exec(cli_result *r, const char *const *args);
void cli_result_free(cli_result *r);
/* The same for any program: argv[0] is its path. */
void cli_exec_program(cli_result *r, const char *const *argv);

/* Starts baton in the background, its stdout and stderr going to files in cli_tmpdir();
 * returns its pid. cli_bg_err(pid) gives what it wrote on stderr so far (caller frees). */
pid_t cli_spawn(const char *const *args);
char *cli_bg_err(pid_t pid);

/* A private temporary directory for this test process, and paths in it (caller frees). */
const char *cli_tmpdir(void);
char *cli_path(const char *base);

/* Reads a whole file (NULL if absent; caller frees). */
char *cli_read_file(const char *path);
/* Waits up to ms for a file to exist; returns whether it does. */
bool cli_wait_file(const char *path, int64_t ms);

/* ------------------------------- JSON ------------------------------------------------- */

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json {
    json_type type;
    bool boolean;
    double number;
    char *string;        /* JSON_STRING: decoded (UTF-8) */
    struct json **items; /* JSON_ARRAY and JSON_OBJECT values */
    char **keys;         /* JSON_OBJECT keys */
    size_t n;
} json;

/* Parses RFC 8259 JSON (the whole text, surrounding whitespace allowed); NULL if invalid. */
json *json_parse(const char *text);
void json_free(json *j);
/* obj[key], or NULL if obj is not an object or has no such key. */
json *json_get(const json *obj, const char *key);
/* arr[i], or NULL. */
json *json_at(const json *arr, size_t i);

#endif
