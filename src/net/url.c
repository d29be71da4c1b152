/*
 * The connection URL parser:
 *   redis://[[user]:password@]host[:port][/db]                      one server
 *   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]
 *   redis+cluster://[[user]:password@]host[:port][,host[:port]...]
 *   unix:///path[?db=N]
 * with rediss for TLS in the first three. Pure string work, no I/O, so it is unit-tested
 * and fuzzed without a server. An error message names the part that is wrong and never
 * repeats the password.
 */
#include "net.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void baton__endpoint_free(baton__endpoint *ep)
{
    if (!ep)
        return;
    for (int i = 0; i < ep->nseeds; i++)
        free(ep->seeds[i].host);
    free(ep->master);
    free(ep->path);
    free(ep->username);
    if (ep->password) {
        memset(ep->password, 0, strlen(ep->password));
        free(ep->password);
    }
    memset(ep, 0, sizeof *ep);
}

/* Decodes %XX escapes (userinfo may carry '@' or ':' that way). NULL on a bad escape, and
 * on %00: a NUL would silently cut the credential short. */
static char *decode(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) {
                free(out);
                return NULL;
            }
            if (!isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2])) {
                free(out);
                return NULL;
            }
            char hex[3] = {s[i + 1], s[i + 2], 0};
            long v = strtol(hex, NULL, 16);
            if (v == 0) {
                free(out);
                return NULL;
            }
            out[j++] = (char)v;
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    return out;
}

/* Parses all of [s, s+n) as a decimal integer in [lo, hi]. */
static bool parse_int(const char *s, size_t n, long lo, long hi, int *out)
{
    if (n == 0 || n > 10)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static int fail(baton__endpoint *ep, char *errbuf, size_t errlen, const char *why)
{
    baton__endpoint_free(ep);
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "invalid URL: %s", why);
    return BATON_EINVAL;
}

#define FAIL(why) return fail(ep, errbuf, errlen, why)
#define NOMEM()                                                                                    \
    do {                                                                                           \
        baton__endpoint_free(ep);                                                                  \
        return BATON_ENOMEM;                                                                       \
    } while (0)

static int parse_unix(const char *rest, baton__endpoint *ep, char *errbuf, size_t errlen)
{
    /* rest follows "unix://": an absolute path, then optional ?db=N */
    if (rest[0] != '/')
        FAIL("unix:// needs an absolute path (unix:///path/to/socket)");
    const char *q = strchr(rest, '?');
    size_t plen = q ? (size_t)(q - rest) : strlen(rest);
    if (plen < 2)
        FAIL("unix:// path is empty");
    ep->path = decode(rest, plen);
    if (!ep->path)
        FAIL("bad %-escape in the socket path");
    if (q) {
        const char *query = q + 1;
        if (strncmp(query, "db=", 3) != 0)
            FAIL("the only query parameter is db=N");
        if (!parse_int(query + 3, strlen(query + 3), 0, 1000000, &ep->db))
            FAIL("db must be a number from 0");
    }
    return BATON_OK;
}

/* [user]:password or password, before the '@'. */
static int parse_userinfo(const char *p, const char *at, baton__endpoint *ep, char *errbuf,
                          size_t errlen)
{
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (colon) {
        if (colon > p) {
            ep->username = decode(p, (size_t)(colon - p));
            if (!ep->username)
                FAIL("bad %-escape (or %00) in the user name");
        }
        ep->password = decode(colon + 1, (size_t)(at - colon - 1));
        if (!ep->password)
            FAIL("bad %-escape (or %00) in the password");
        if (ep->password[0] == '\0') {
            free(ep->password);
            ep->password = NULL;
        }
    } else if (at > p) {
        /* redis://secret@host: Redis URLs put a lone word before '@' as the password */
        ep->password = decode(p, (size_t)(at - p));
        if (!ep->password)
            FAIL("bad %-escape (or %00) in the password");
    }
    return BATON_OK;
}

/* host[:port] or [v6]:port in [p, host_end), into out = &ep->seeds[ep->nseeds]. The seed
 * counts as soon as its host is allocated, so that a failure frees it with the endpoint;
 * the caller counts it (once) on success. */
static int parse_hostport(const char *p, const char *host_end, int default_port, baton__seed *out,
                          baton__endpoint *ep, char *errbuf, size_t errlen)
{
    const char *port_colon = NULL;
    const char *close = NULL;
    if (*p == '[') {
        close = memchr(p, ']', (size_t)(host_end - p));
        if (!close)
            FAIL("unclosed [ in an IPv6 host");
        out->host = baton__strndup(p + 1, (size_t)(close - p - 1));
    } else {
        port_colon = memchr(p, ':', (size_t)(host_end - p));
        out->host = baton__strndup(p, (size_t)((port_colon ? port_colon : host_end) - p));
    }
    if (!out->host)
        NOMEM();
    ep->nseeds++;
    if (close && close + 1 < host_end) {
        if (close[1] != ':')
            FAIL("junk after the IPv6 host");
        port_colon = close + 1;
    }
    if (out->host[0] == '\0')
        FAIL("the host is empty");
    for (const char *s = out->host; *s; s++)
        if (isspace((unsigned char)*s) || *s == '@' || *s == '/' || *s == '?' || *s == ',')
            FAIL("the host has a character hosts cannot have");
    out->port = default_port;
    if (port_colon &&
        !parse_int(port_colon + 1, (size_t)(host_end - port_colon - 1), 1, 65535, &out->port))
        FAIL("the port must be a number from 1 to 65535");
    ep->nseeds--;
    return BATON_OK;
}

/* The scheme of url: sets ep->kind and ep->tls, *rest to what follows "://" and
 * *default_port; NULL *rest when no scheme matches. */
static void parse_scheme(const char *url, baton__endpoint *ep, const char **rest, int *default_port)
{
    static const struct {
        const char *prefix;
        baton__ep_kind kind;
        bool tls;
        int default_port;
    } schemes[] = {
        {"redis://", BATON__EP_SINGLE, false, 6379},
        {"rediss://", BATON__EP_SINGLE, true, 6379},
        {"redis+sentinel://", BATON__EP_SENTINEL, false, 26379},
        {"rediss+sentinel://", BATON__EP_SENTINEL, true, 26379},
        {"redis+cluster://", BATON__EP_CLUSTER, false, 6379},
        {"rediss+cluster://", BATON__EP_CLUSTER, true, 6379},
    };
    *rest = NULL;
    *default_port = 6379;
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes && !*rest; i++)
        if (strncmp(url, schemes[i].prefix, strlen(schemes[i].prefix)) == 0) {
            *rest = url + strlen(schemes[i].prefix);
            ep->kind = schemes[i].kind;
            ep->tls = schemes[i].tls;
            *default_port = schemes[i].default_port;
        }
}

/* host[:port] items separated by commas, p..auth_end; one only for a single server. */
static int parse_hosts(const char *p, const char *auth_end, int default_port, baton__endpoint *ep,
                       char *errbuf, size_t errlen)
{
    while (p < auth_end) {
        const char *comma = memchr(p, ',', (size_t)(auth_end - p));
        const char *item_end = comma ? comma : auth_end;
        if (ep->kind == BATON__EP_SINGLE && comma)
            FAIL("several hosts need redis+sentinel:// or redis+cluster://");
        if (ep->nseeds == BATON__MAX_SEEDS)
            FAIL("too many hosts (at most 16)");
        int rc =
            parse_hostport(p, item_end, default_port, &ep->seeds[ep->nseeds], ep, errbuf, errlen);
        if (rc != BATON_OK)
            return rc;
        ep->nseeds++;
        p = comma ? comma + 1 : item_end;
        if (comma && p == auth_end)
            FAIL("the host is empty");
    }
    if (ep->nseeds == 0)
        FAIL("the host is empty");
    ep->host = ep->seeds[0].host;
    ep->port = ep->seeds[0].port;
    return BATON_OK;
}

/* What follows the hosts, from slash (NULL: nothing) to end: /master[/db] for Sentinel,
 * else /db (none on a Cluster). */
static int parse_path(const char *slash, const char *end, baton__endpoint *ep, char *errbuf,
                      size_t errlen)
{
    if (ep->kind == BATON__EP_SENTINEL) {
        const char *name = slash ? slash + 1 : end;
        const char *name_end = name < end ? memchr(name, '/', (size_t)(end - name)) : NULL;
        if (!name_end)
            name_end = end;
        if (name == name_end)
            FAIL("redis+sentinel:// needs the master's name: .../mymaster");
        ep->master = decode(name, (size_t)(name_end - name));
        if (!ep->master)
            FAIL("bad %-escape in the master's name");
        if (name_end < end && name_end + 1 < end &&
            !parse_int(name_end + 1, (size_t)(end - name_end - 1), 0, 1000000, &ep->db))
            FAIL("the database after the master's name must be a number from 0");
        return BATON_OK;
    }
    if (ep->kind == BATON__EP_CLUSTER && slash && slash + 1 < end)
        FAIL("a cluster has only database 0: no /db in redis+cluster://");
    if (slash && slash + 1 < end) {
        if (!parse_int(slash + 1, (size_t)(end - slash - 1), 0, 1000000, &ep->db))
            FAIL("the database after / must be a number from 0");
    }
    return BATON_OK;
}

int baton__url_parse(const char *url, baton__endpoint *ep, char *errbuf, size_t errlen)
{
    memset(ep, 0, sizeof *ep);
    if (!url)
        FAIL("URL is NULL");
    if (!*url)
        FAIL("URL is empty");
    if (strncmp(url, "unix://", 7) == 0)
        return parse_unix(url + 7, ep, errbuf, errlen);
    const char *p;
    int default_port;
    parse_scheme(url, ep, &p, &default_port);
    if (!p)
        FAIL("it must start with redis://, rediss://, redis+sentinel://, redis+cluster:// "
             "(rediss+ for TLS) or unix://");

    const char *end = p + strlen(p);
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *auth_end = end;
    if (slash)
        auth_end = slash;
    /* the last '@' before the path separates userinfo from host */
    const char *at = NULL;
    for (const char *s = p; s < auth_end; s++)
        if (*s == '@')
            at = s;
    /* A '@' past the first '/' is a password with an unescaped '/' (or a path with an
     * unescaped '@'): which part is the password is then a guess, so no guess is made. */
    if (slash && memchr(slash, '@', (size_t)(end - slash)))
        FAIL("a '@' after the first '/': escape a '/' in the password as %2F, and a '@' in "
             "a path as %40");
    if (at) {
        int rc = parse_userinfo(p, at, ep, errbuf, errlen);
        if (rc != BATON_OK)
            return rc;
        p = at + 1;
    }
    int rc = parse_hosts(p, auth_end, default_port, ep, errbuf, errlen);
    if (rc != BATON_OK)
        return rc;
    return parse_path(slash, end, ep, errbuf, errlen);
}

/* ------------------------------- the URL for messages ---------------------------------- */

/* Appends to buf[*n..len) what fits, always NUL-terminated. */
static void put(char *buf, size_t len, size_t *n, const char *fmt, const char *a, int i)
{
    if (*n + 1 >= len)
        return;
    int w = a ? snprintf(buf + *n, len - *n, fmt, a) : snprintf(buf + *n, len - *n, fmt, i);
    if (w > 0)
        *n = *n + (size_t)w < len ? *n + (size_t)w : len - 1;
}

int baton_url_redact(const char *url, char *buf, size_t len)
{
    if (!buf || len == 0)
        return BATON_EINVAL;
    buf[0] = '\0';
    baton__endpoint ep;
    char err[8];
    if (baton__url_parse(url, &ep, err, sizeof err) != BATON_OK) {
        /* Nothing of a URL that does not parse is shown but a scheme baton knows. */
        static const char *const schemes[] = {"rediss+sentinel://",
                                              "redis+sentinel://",
                                              "rediss+cluster://",
                                              "redis+cluster://",
                                              "rediss://",
                                              "redis://",
                                              "unix://"};
        const char *scheme = "";
        for (size_t i = 0; url && i < sizeof schemes / sizeof *schemes && !*scheme; i++)
            if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
                scheme = schemes[i];
        snprintf(buf, len, "%s(a URL that does not parse, not shown)", scheme);
        return BATON_EINVAL;
    }
    size_t n = 0;
    if (ep.path) {
        put(buf, len, &n, "unix://%s", ep.path, 0);
        if (ep.db)
            put(buf, len, &n, "?db=%d", NULL, ep.db);
        baton__endpoint_free(&ep);
        return BATON_OK;
    }
    put(buf, len, &n, "%s",
        ep.kind == BATON__EP_SENTINEL  ? (ep.tls ? "rediss+sentinel://" : "redis+sentinel://")
        : ep.kind == BATON__EP_CLUSTER ? (ep.tls ? "rediss+cluster://" : "redis+cluster://")
        : ep.tls                       ? "rediss://"
                                       : "redis://",
        0);
    /* The whole userinfo goes: in redis://a:b@h, "a" may be the start of a password
     * with an unescaped ':' as well as a user name. */
    if (ep.username || ep.password)
        put(buf, len, &n, "%s@", "***", 0);
    for (int i = 0; i < ep.nseeds; i++) {
        bool v6 = strchr(ep.seeds[i].host, ':') != NULL;
        if (i)
            put(buf, len, &n, "%s", ",", 0);
        put(buf, len, &n, v6 ? "[%s]" : "%s", ep.seeds[i].host, 0);
        put(buf, len, &n, ":%d", NULL, ep.seeds[i].port);
    }
    if (ep.master)
        put(buf, len, &n, "/%s", ep.master, 0);
    if (ep.db)
        put(buf, len, &n, "/%d", NULL, ep.db);
    baton__endpoint_free(&ep);
    return BATON_OK;
}
