/*
 * The connection URL parser: redis://[[user]:password@]host[:port][/db] (rediss:// for TLS) and
 * unix:///path[?db=N]. Pure string work, no I/O, so it is unit-tested and fuzzed without a
 * server. An error message names the part that is wrong and never repeats the password.
 */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void baton__endpoint_free(baton__endpoint *ep)
{
    if (!ep)
        return;
    free(ep->host);
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
    if (strncmp(url, "redis://", 8) == 0)
        p = url + 8;
    else if (strncmp(url, "rediss://", 9) == 0) {
        p = url + 9;
        ep->tls = true;
    } else
        FAIL("it must start with redis://, rediss:// or unix://");

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
    if (at) {
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
        p = at + 1;
    }

    const char *host_end = auth_end;
    const char *port_colon = NULL;
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(host_end - p));
        if (!close)
            FAIL("unclosed [ in an IPv6 host");
        ep->host = baton__strndup(p + 1, (size_t)(close - p - 1));
        if (!ep->host)
            NOMEM();
        if (close + 1 < host_end) {
            if (close[1] != ':')
                FAIL("junk after the IPv6 host");
            port_colon = close + 1;
        }
    } else {
        port_colon = memchr(p, ':', (size_t)(host_end - p));
        const char *he = port_colon ? port_colon : host_end;
        ep->host = baton__strndup(p, (size_t)(he - p));
        if (!ep->host)
            NOMEM();
    }
    if (ep->host[0] == '\0')
        FAIL("the host is empty");
    for (const char *s = ep->host; *s; s++)
        if (isspace((unsigned char)*s) || *s == '@' || *s == '/' || *s == '?')
            FAIL("the host has a character hosts cannot have");
    ep->port = 6379;
    if (port_colon &&
        !parse_int(port_colon + 1, (size_t)(host_end - port_colon - 1), 1, 65535, &ep->port))
        FAIL("the port must be a number from 1 to 65535");

    if (slash && slash + 1 < end) {
        if (!parse_int(slash + 1, (size_t)(end - slash - 1), 0, 1000000, &ep->db))
            FAIL("the database after / must be a number from 0");
    }
    return BATON_OK;
}
