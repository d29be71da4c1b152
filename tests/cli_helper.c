/* The baton command's test helper; see cli_helper.h. */
#define _GNU_SOURCE
#include "cli_helper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BATON_CLI_PATH
#error "BATON_CLI_PATH must name the built baton binary"
#endif

static char tmpdir[64];
static pid_t tmpdir_owner;

/* Removes the directory when the process that made it exits (not its forked children). */
static void remove_tmpdir(void)
{
    if (getpid() != tmpdir_owner)
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) {
        /* a leftover temporary directory: harmless */
    }
}

const char *cli_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/baton-cli-test-%d-XXXXXX", (int)getpid());
        cr_assert(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
        tmpdir_owner = getpid();
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

char *cli_path(const char *base)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", cli_tmpdir(), th_tmpname(base)) > 0);
    return p;
}

char *cli_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

bool cli_wait_file(const char *path, int64_t ms)
{
    int64_t end = th_ms() + ms;
    while (access(path, F_OK) != 0) {
        if (th_ms() >= end)
            return false;
        th_sleep_ms(10);
    }
    return true;
}

/* argv for execv: "baton", args..., NULL. */
static char **make_argv(const char *const *args)
{
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    cr_assert(argv);
    argv[0] = (char *)"baton";
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    return argv;
}

static void child_env(void)
{
    if (!getenv("BATON_URL"))
        setenv("BATON_URL", th_url(), 1);
}

void cli_exec(cli_result *r, const char *const *args)
{
    char **argv = make_argv(args);
    argv[0] = (char *)BATON_CLI_PATH;
    cli_exec_program(r, (const char *const *)argv);
    free(argv);
}

void cli_exec_program(cli_result *r, const char *const *argv)
{
    memset(r, 0, sizeof *r);
    int out[2], err[2];
    cr_assert(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0);
    child_env();
    fflush(NULL);
    int64_t t0 = th_ms();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        execv(argv[0], (char **)argv);
        _exit(99);
    }
    close(out[1]);
    close(err[1]);
    char *bufs[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    FILE *ms[2] = {open_memstream(&bufs[0], &lens[0]), open_memstream(&bufs[1], &lens[1])};
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(p, 2, -1) < 0) {
            cr_assert(errno == EINTR);
            continue;
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents)
                continue;
            char chunk[4096];
            ssize_t n = read(p[i].fd, chunk, sizeof chunk);
            if (n > 0) {
                fwrite(chunk, 1, (size_t)n, ms[i]);
            } else if (n == 0 || errno != EINTR) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            }
        }
    }
    fclose(ms[0]);
    fclose(ms[1]);
    r->out = bufs[0];
    r->err = bufs[1];
    r->status = th_wait(pid);
    r->ms = th_ms() - t0;
}

void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

pid_t cli_spawn(const char *const *args)
{
    cli_tmpdir(); /* made by this process, which removes it at exit */
    char **argv = make_argv(args);
    child_env();
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char path[128];
        snprintf(path, sizeof path, "%s/bg-%d.out", cli_tmpdir(), (int)getpid());
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        snprintf(path, sizeof path, "%s/bg-%d.err", cli_tmpdir(), (int)getpid());
        int fe = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || fe < 0)
            _exit(98);
        dup2(fd, 1);
        dup2(fe, 2);
        execv(BATON_CLI_PATH, argv);
        _exit(99);
    }
    free(argv);
    return pid;
}

char *cli_bg_err(pid_t pid)
{
    char path[128];
    snprintf(path, sizeof path, "%s/bg-%d.err", cli_tmpdir(), (int)pid);
    char *s = cli_read_file(path);
    return s ? s : strdup("");
}

/* ------------------------------- JSON ------------------------------------------------- */

typedef struct reader {
    const char *s;
    int depth;
} reader;

static json *parse_value(reader *r);

static void eat_space(reader *r)
{
    while (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')
        r->s++;
}

static json *new_json(json_type t)
{
    json *j = calloc(1, sizeof *j);
    cr_assert(j);
    j->type = t;
    return j;
}

static void put_utf8(FILE *m, unsigned cp)
{
    if (cp < 0x80) {
        fputc((int)cp, m);
    } else if (cp < 0x800) {
        fputc((int)(0xc0 | (cp >> 6)), m);
        fputc((int)(0x80 | (cp & 0x3f)), m);
    } else if (cp < 0x10000) {
        fputc((int)(0xe0 | (cp >> 12)), m);
        fputc((int)(0x80 | ((cp >> 6) & 0x3f)), m);
        fputc((int)(0x80 | (cp & 0x3f)), m);
    } else {
        fputc((int)(0xf0 | (cp >> 18)), m);
        fputc((int)(0x80 | ((cp >> 12) & 0x3f)), m);
        fputc((int)(0x80 | ((cp >> 6) & 0x3f)), m);
        fputc((int)(0x80 | (cp & 0x3f)), m);
    }
}

static bool hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

/* A string at r->s (which is at the opening quote); NULL if invalid. */
static char *parse_string(reader *r)
{
    if (*r->s != '"')
        return NULL;
    r->s++;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    bool ok = false;
    for (;;) {
        unsigned char c = (unsigned char)*r->s;
        if (c == '\0' || c < 0x20)
            break;
        if (c == '"') {
            r->s++;
            ok = true;
            break;
        }
        if (c != '\\') {
            fputc(c, m);
            r->s++;
            continue;
        }
        char e = r->s[1];
        r->s += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            fputc("\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"], m);
        } else if (e == 'u') {
            unsigned cp;
            if (!hex4(r->s, &cp))
                break;
            r->s += 4;
            if (cp >= 0xd800 && cp < 0xdc00) {
                unsigned lo;
                if (r->s[0] != '\\' || r->s[1] != 'u' || !hex4(r->s + 2, &lo) || lo < 0xdc00 ||
                    lo > 0xdfff)
                    break;
                r->s += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                break;
            }
            put_utf8(m, cp);
        } else {
            break;
        }
    }
    fclose(m);
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

static json *parse_number(reader *r)
{
    const char *s = r->s;
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return NULL;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return NULL;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return NULL;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    json *j = new_json(JSON_NUMBER);
    j->number = strtod(r->s, NULL);
    r->s = s;
    return j;
}

static void push(json *j, json *item, char *key)
{
    j->items = realloc(j->items, (j->n + 1) * sizeof *j->items);
    cr_assert(j->items);
    j->items[j->n] = item;
    if (j->type == JSON_OBJECT) {
        j->keys = realloc(j->keys, (j->n + 1) * sizeof *j->keys);
        cr_assert(j->keys);
        j->keys[j->n] = key;
    }
    j->n++;
}

static json *parse_container(reader *r, json_type t)
{
    char close = t == JSON_ARRAY ? ']' : '}';
    json *j = new_json(t);
    r->s++;
    eat_space(r);
    if (*r->s == close) {
        r->s++;
        return j;
    }
    for (;;) {
        char *key = NULL;
        eat_space(r);
        if (t == JSON_OBJECT) {
            key = parse_string(r);
            eat_space(r);
            if (!key || *r->s != ':') {
                free(key);
                json_free(j);
                return NULL;
            }
            r->s++;
        }
        json *v = parse_value(r);
        if (!v) {
            free(key);
            json_free(j);
            return NULL;
        }
        push(j, v, key);
        eat_space(r);
        if (*r->s == ',') {
            r->s++;
            continue;
        }
        if (*r->s == close) {
            r->s++;
            return j;
        }
        json_free(j);
        return NULL;
    }
}

static json *parse_value(reader *r)
{
    if (++r->depth > 64)
        return NULL;
    eat_space(r);
    json *j = NULL;
    char c = *r->s;
    if (c == '{' || c == '[') {
        j = parse_container(r, c == '{' ? JSON_OBJECT : JSON_ARRAY);
    } else if (c == '"') {
        char *s = parse_string(r);
        if (s) {
            j = new_json(JSON_STRING);
            j->string = s;
        }
    } else if (strncmp(r->s, "true", 4) == 0 || strncmp(r->s, "false", 5) == 0) {
        j = new_json(JSON_BOOL);
        j->boolean = c == 't';
        r->s += j->boolean ? 4 : 5;
    } else if (strncmp(r->s, "null", 4) == 0) {
        j = new_json(JSON_NULL);
        r->s += 4;
    } else {
        j = parse_number(r);
    }
    r->depth--;
    return j;
}

json *json_parse(const char *text)
{
    if (!text)
        return NULL;
    reader r = {text, 0};
    json *j = parse_value(&r);
    if (!j)
        return NULL;
    eat_space(&r);
    if (*r.s != '\0') {
        json_free(j);
        return NULL;
    }
    return j;
}

void json_free(json *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        json_free(j->items[i]);
        if (j->keys)
            free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->string);
    free(j);
}

json *json_get(const json *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

json *json_at(const json *arr, size_t i)
{
    if (!arr || arr->type != JSON_ARRAY || i >= arr->n)
        return NULL;
    return arr->items[i];
}
