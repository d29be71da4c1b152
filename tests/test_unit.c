/*
 * Unit tests without a server: URL parsing, name and key derivation (Redisson's brace
 * rule), argument checks, and the error-code tables.
 */
#include "helper.h"
#include "internal.h"

#include <criterion/new/assert.h>
#include <string.h>

TestSuite(unit, .timeout = 10);

static baton__endpoint parse_ok(const char *url)
{
    baton__endpoint ep;
    char err[200] = "";
    int rc = baton__url_parse(url, &ep, err, sizeof err);
    cr_assert(eq(int, rc, BATON_OK), "%s: %s", url, err);
    return ep;
}

static void parse_bad(const char *url, const char *secret)
{
    baton__endpoint ep;
    char err[200] = "";
    int rc = baton__url_parse(url, &ep, err, sizeof err);
    cr_assert(eq(int, rc, BATON_EINVAL), "%s should be rejected", url);
    cr_assert(ne(str, err, ""), "%s: no message", url);
    if (secret)
        cr_assert(strstr(err, secret) == NULL, "message repeats the password: %s", err);
}

Test(unit, url_host_port_db)
{
    baton__endpoint ep = parse_ok("redis://example.org:6380/3");
    cr_assert(eq(str, ep.host, "example.org"));
    cr_assert(eq(int, ep.port, 6380));
    cr_assert(eq(int, ep.db, 3));
    cr_assert(eq(ptr, ep.password, NULL));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis://127.0.0.1");
    cr_assert(eq(str, ep.host, "127.0.0.1"));
    cr_assert(eq(int, ep.port, 6379));
    cr_assert(eq(int, ep.db, 0));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis://[::1]:7000/");
    cr_assert(eq(str, ep.host, "::1"));
    cr_assert(eq(int, ep.port, 7000));
    baton__endpoint_free(&ep);
}

Test(unit, url_credentials)
{
    baton__endpoint ep = parse_ok("redis://alice:s3cret@h:1/2");
    cr_assert(eq(str, ep.username, "alice"));
    cr_assert(eq(str, ep.password, "s3cret"));
    cr_assert(eq(str, ep.host, "h"));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis://:pw@h");
    cr_assert(eq(ptr, ep.username, NULL));
    cr_assert(eq(str, ep.password, "pw"));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis://onlypw@h");
    cr_assert(eq(str, ep.password, "onlypw"));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis://u:p%40ss%3Aw@h"); /* escaped '@' and ':' */
    cr_assert(eq(str, ep.password, "p@ss:w"));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis://u:a@b@h:9"); /* the last '@' ends the userinfo */
    cr_assert(eq(str, ep.password, "a@b"));
    cr_assert(eq(str, ep.host, "h"));
    cr_assert(eq(int, ep.port, 9));
    baton__endpoint_free(&ep);
}

Test(unit, url_unix)
{
    baton__endpoint ep = parse_ok("unix:///run/redis.sock?db=4");
    cr_assert(eq(str, ep.path, "/run/redis.sock"));
    cr_assert(eq(ptr, ep.host, NULL));
    cr_assert(eq(int, ep.db, 4));
    baton__endpoint_free(&ep);
    ep = parse_ok("unix:///tmp/r.sock");
    cr_assert(eq(int, ep.db, 0));
    baton__endpoint_free(&ep);
}

Test(unit, url_rejects)
{
    parse_bad(NULL, NULL);
    parse_bad("", NULL);
    parse_bad("http://h", NULL);
    parse_bad("redis://", NULL);
    parse_bad("redis://h:0", NULL);
    parse_bad("redis://h:65536", NULL);
    parse_bad("redis://h:12ab", NULL);
    parse_bad("redis://h/x", NULL);
    parse_bad("redis://h/-1", NULL);
    parse_bad("redis://u:topsecret@h:99999", "topsecret");
    parse_bad("redis://u:topsecret@:1", "topsecret");
    parse_bad("redis://u:hunter%zz2@h", "hunter");
    parse_bad("redis://[::1", NULL);
    parse_bad("unix://relative.sock", NULL);
    parse_bad("unix:///s.sock?db=x", NULL);
    parse_bad("unix:///s.sock?foo=1", NULL);
}

Test(unit, names_and_keys)
{
    char *k = baton__derive_key("redisson_lock__channel:", "myLock", NULL);
    cr_assert(eq(str, k, "redisson_lock__channel:{myLock}"));
    free(k);
    /* a name that already has '{' is used as it is (Redisson's rule) */
    k = baton__derive_key("redisson_lock__channel:", "my{tag}lock", NULL);
    cr_assert(eq(str, k, "redisson_lock__channel:my{tag}lock"));
    free(k);
    k = baton__derive_key("redisson_unlock_latch:", "a", ":");
    cr_assert(eq(str, k, "redisson_unlock_latch:{a}:"));
    free(k);
    k = baton__derive_key("redisson_countdownlatch__channel__", "L", NULL);
    cr_assert(eq(str, k, "redisson_countdownlatch__channel__{L}"));
    free(k);
}

Test(unit, argument_checks)
{
    char big[BATON_MAX_NAME_LEN + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert(eq(int, baton__check_name(big), BATON_EINVAL));
    big[BATON_MAX_NAME_LEN] = '\0';
    cr_assert(eq(int, baton__check_name(big), BATON_OK));
    cr_assert(eq(int, baton__check_name(""), BATON_EINVAL));
    cr_assert(eq(int, baton__check_name(NULL), BATON_EINVAL));

    cr_assert(eq(int, baton__check_wait(BATON_WAIT_FOREVER), BATON_OK));
    cr_assert(eq(int, baton__check_wait(0), BATON_OK));
    cr_assert(eq(int, baton__check_wait(-2), BATON_EINVAL));
    cr_assert(eq(int, baton__check_wait(BATON_MAX_DURATION_MS + 1), BATON_EINVAL));
    cr_assert(eq(int, baton__check_lease(BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton__check_lease(0), BATON_EINVAL));
    cr_assert(eq(int, baton__check_lease(-5), BATON_EINVAL));
    cr_assert(eq(int, baton__check_lease(INT64_MAX), BATON_EINVAL));
    cr_assert(eq(int, baton__check_lease(1), BATON_OK));
}

Test(unit, error_tables)
{
    int codes[] = {BATON_OK,     BATON_ETIMEDOUT, BATON_ENOTHELD, BATON_EINVAL,    BATON_ECONN,
                   BATON_EPROTO, BATON_EAUTH,     BATON_ENOMEM,   BATON_ECANCELED, BATON_ENOTSUP};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        cr_assert(ne(str, (char *)baton_strerror(codes[i]), "unknown error"));
        cr_assert(eq(int, strncmp(baton_err_name(codes[i]), "BATON_", 6), 0));
        cr_assert(ne(str, (char *)baton_err_name(codes[i]), "BATON_UNKNOWN"));
    }
    cr_assert(eq(str, (char *)baton_err_name(BATON_ETIMEDOUT), "BATON_ETIMEDOUT"));
    cr_assert(eq(str, (char *)baton_strerror(12345), "unknown error"));
    cr_assert(eq(str, (char *)baton_err_name(-999), "BATON_UNKNOWN"));
    cr_assert(eq(str, (char *)baton_version(), BATON_VERSION_STRING));
}

Test(unit, scripts_are_embedded)
{
    int n = 0;
    for (const baton__script *s = baton__scripts(); s->name; s++, n++) {
        cr_assert(eq(sz, strlen(s->body), s->len), "%s", s->name);
        cr_assert(eq(sz, strlen(s->sha1), 40), "%s", s->name);
        cr_assert(eq(int, strncmp(s->body, "-- ", 3), 0), "%s must open with a comment", s->name);
    }
    cr_assert(ge(int, n, 4));
    cr_assert(not(eq(ptr, (void *)baton__script_find("lock_acquire"), NULL)));
    cr_assert(eq(ptr, (void *)baton__script_find("nope"), NULL));
}
