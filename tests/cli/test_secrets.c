/*
 * No password in any message (issue 28.3): 1,000 random passwords over every byte a URL can
 * carry, raw and %-escaped, in every URL shape, through the library's failing opens and
 * baton_url_redact, and through every command of the baton tool on every failing path
 * (connection refused, a URL that does not parse, the password refused by a real server,
 * the password from the environment or --askpass). No output holds the password.
 */
#define _GNU_SOURCE
#include "cli_helper.h"
#include "helper.h"

#include "new_assert.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(secrets, .timeout = 240);

/* 1,000 in the plain build (about 50 s); a sanitizer build, where each open and each baton
 * process costs ten times as much, checks the memory of the same paths with 200. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define N_PASSWORDS 200
#else
#define N_PASSWORDS 1000
#endif

/* What a URL can carry besides unreserved characters; each may also come %-escaped. */
static const char url_bytes[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "-._~!$&'()*+,;=:@/?#[]%";

static unsigned rnd_state = 2711;

static unsigned rnd(void)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) & 0xffffff;
}

/* A password of 10 to 17 bytes: `raw` as it goes into the URL, `plain` what it means. Each
 * byte is taken raw or %-escaped (any byte 0x01-0xff escaped). The first two bytes are
 * letters, so that the password is never a number or a word the messages hold anyway. */
static void make_password(char *raw, size_t rawlen, char *plain, size_t plainlen)
{
    size_t n = 10 + rnd() % 8, r = 0, p = 0;
    for (size_t i = 0; i < n && r + 4 < rawlen && p + 2 < plainlen; i++) {
        unsigned c;
        if (i < 2) {
            c = 'a' + rnd() % 26;
            raw[r++] = (char)c;
        } else if (rnd() % 3 == 0) {
            c = 1 + rnd() % 255;
            r += (size_t)snprintf(raw + r, rawlen - r, "%%%02X", c);
        } else {
            c = (unsigned char)url_bytes[rnd() % (sizeof url_bytes - 1)];
            raw[r++] = (char)c;
        }
        plain[p++] = (char)c;
    }
    raw[r] = '\0';
    plain[p] = '\0';
}

/* The longest run of the password that must never show: the whole of it, raw and plain,
 * and its tail after the two letters (a message may cut the first bytes off). */
static void assert_absent(const char *text, const char *raw, const char *plain, const char *what)
{
    if (!text)
        return;
    cr_assert(eq(ptr, strstr(text, raw), NULL), "%s shows the password %s: %s", what, raw, text);
    cr_assert(eq(ptr, strstr(text, plain), NULL), "%s shows the password: %s", what, text);
    if (strlen(raw) > 8)
        cr_assert(eq(ptr, strstr(text, raw + 2), NULL), "%s shows the password's tail %s: %s", what,
                  raw + 2, text);
}

/* Every URL shape around one password. */
static int url_shapes(char urls[][512], const char *pw, int port)
{
    const char *fmts[] = {
        "redis://:%s@127.0.0.1:%d",
        "redis://user:%s@127.0.0.1:%d/3",
        "redis://%s@127.0.0.1:%d",
        "rediss://:%s@127.0.0.1:%d",
        "redis+sentinel://:%s@127.0.0.1:%d/mymaster",
        "redis+cluster://u:%s@127.0.0.1:%d",
        "redis://:%s@127.0.0.1:%d/notadb",
        "redis://:%s@:%d",
    };
    int n = 0;
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++)
        snprintf(urls[n++], 512, fmts[i], pw, port);
    return n;
}

Test(secrets, no_library_message_and_no_redacted_url_holds_the_password)
{
    for (int i = 0; i < N_PASSWORDS; i++) {
        char raw[128], plain[64];
        make_password(raw, sizeof raw, plain, sizeof plain);
        char urls[8][512];
        int n = url_shapes(urls, raw, 1);
        for (int k = 0; k < n; k++) {
            char shown[600];
            baton_url_redact(urls[k], shown, sizeof shown);
            assert_absent(shown, raw, plain, "baton_url_redact");
            if (k >= 6 || i % 25 == 0) { /* a refused connect costs a little: not every time */
                baton_options o;
                baton_options_init(&o);
                o.url = urls[k];
                o.connect_timeout_ms = 200;
                baton_client *c = NULL;
                if (baton_client_open(&o, &c) == BATON_OK) {
                    baton_client_close(c);
                    continue;
                }
                assert_absent(baton_open_errmsg(), raw, plain, "baton_open_errmsg");
            }
        }
    }
}

/* A private server whose password is not the one tried. */
static th_server locked_server;

static void start_locked(void)
{
    th_server_start(&locked_server, "--requirepass right-password-here");
}

Test(secrets, no_command_prints_the_password_on_any_failing_path, .init = start_locked,
     .timeout = 300)
{
    static const char *const commands[][8] = {
        {"lock", "sx", "-w", "0", "--", "true"},
        {"lock", "sx", "--hold", "-n"},
        {"rwlock", "sx", "--read", "-n", "--", "true"},
        {"semaphore", "sx", "--permits", "1", "--", "true"},
        {"latch", "sx", "count-down"},
        {"status", "sx"},
        {"status", "sx", "--json"},
        {"unlock", "--force", "sx"},
    };
    const size_t ncmd = sizeof commands / sizeof *commands;
    for (int i = 0; i < N_PASSWORDS; i++) {
        char raw[128], plain[64];
        make_password(raw, sizeof raw, plain, sizeof plain);
        const char *const *cmd = commands[(size_t)i % ncmd];
        int path = (i / (int)ncmd) % 5;
        char url[600];
        const char *argv[20];
        int a = 0;
        argv[a++] = "baton";
        switch (path) {
        case 0: /* refused connection */
            snprintf(url, sizeof url, "redis://:%s@127.0.0.1:1", raw);
            break;
        case 1: /* refused password, by a real server */
            snprintf(url, sizeof url, "redis://:%s@127.0.0.1:%d", raw, locked_server.port);
            break;
        case 2: /* a URL that may not parse */
            snprintf(url, sizeof url, "redis+sentinel://u:%s@127.0.0.1:%d/m/x", raw,
                     locked_server.port);
            break;
        case 3: /* the password from the environment, refused */
            snprintf(url, sizeof url, "redis://127.0.0.1:%d", locked_server.port);
            setenv("BATON_PASSWORD", plain, 1);
            break;
        case 4: /* the password from the environment, the server unreachable */
            snprintf(url, sizeof url, "redis://127.0.0.1:1");
            setenv("REDISCLI_AUTH", plain, 1);
            break;
        }
        argv[a++] = "--url";
        argv[a++] = url;
        for (int k = 0; k < 8 && cmd[k]; k++)
            argv[a++] = cmd[k];
        argv[a] = NULL;
        cli_result r;
        cli_exec(&r, argv + 1);
        unsetenv("BATON_PASSWORD");
        unsetenv("REDISCLI_AUTH");
        char what[64];
        snprintf(what, sizeof what, "baton %s (path %d)", cmd[0], path);
        cr_assert(not(eq(int, r.status, 0)), "%s: succeeded with a wrong password", what);
        assert_absent(r.out, raw, plain, what);
        assert_absent(r.err, raw, plain, what);
        cli_result_free(&r);
    }
    th_server_stop(&locked_server);
}
