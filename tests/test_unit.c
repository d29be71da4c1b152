/*
 * Unit tests without a server: URL parsing, name and key derivation (Redisson's brace
 * rule), argument checks, and the error-code tables.
 */
#include "helper.h"
#include "internal.h"

#include "new_assert.h"
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

/* The test framework's gt is strict (helper.h mends Criterion 2.4.1's, which was >=): a
 * value not above the reference is refused, for every tag the suite uses. The values come
 * from a volatile so that no compiler folds the comparisons away. */
Test(unit, criterion_gt_is_strict)
{
    volatile int zero = 0;
    int i = zero;
    long long l = zero;
    unsigned long long u = (unsigned)zero;
    size_t z = (size_t)zero;
    double d = zero;
    cr_assert(not(gt(int, i, 0)));
    cr_assert(not(gt(i64, l, 0)));
    cr_assert(not(gt(u64, u, 0)));
    cr_assert(not(gt(sz, z, 0)));
    cr_assert(not(gt(dbl, d, 0.0)));
    cr_assert(gt(int, i + 1, 0));
    cr_assert(gt(i64, l + 1, 0));
    cr_assert(ge(int, i, 0));
    cr_assert(not(lt(int, i, 0)));
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
    parse_bad("redis://u:hunter%002@h", "hunter");
    parse_bad("redis://u%00x:pw@h", NULL);
    parse_bad("redis://[::1", NULL);
    parse_bad("unix://relative.sock", NULL);
    parse_bad("unix:///s.sock?db=x", NULL);
    parse_bad("unix:///s.sock?foo=1", NULL);
    /* a '/' in the password or a '@' in the path: which part is the password is a guess */
    parse_bad("redis://:S3cr3t/pw@127.0.0.1:1", "S3cr3t");
    parse_bad("redis://:S3cr3t@127.0.0.1:1/d@b", "S3cr3t");
    parse_bad("redis+sentinel://u:123/4@h/m", "123");
}

Test(unit, url_redact_rebuilds_from_the_parse)
{
    char buf[128];
    cr_assert(eq(int, baton_url_redact("redis://user:pw@h:1/2", buf, sizeof buf), BATON_OK));
    cr_assert(eq(str, buf, "redis://***@h:1/2"));
    cr_assert(eq(int, baton_url_redact("rediss+sentinel://pw@a,[::1]:2/mm/3", buf, sizeof buf),
                 BATON_OK));
    cr_assert(eq(str, buf, "rediss+sentinel://***@a:26379,[::1]:2/mm/3"));
    cr_assert(eq(int, baton_url_redact("redis+cluster://h", buf, sizeof buf), BATON_OK));
    cr_assert(eq(str, buf, "redis+cluster://h:6379"));
    cr_assert(eq(int, baton_url_redact("unix:///tmp/r.sock?db=2", buf, sizeof buf), BATON_OK));
    cr_assert(eq(str, buf, "unix:///tmp/r.sock?db=2"));
    cr_assert(eq(int, baton_url_redact("redis://:S3cr3t/pw@h:1", buf, sizeof buf), BATON_EINVAL));
    cr_assert(eq(str, buf, "redis://(a URL that does not parse, not shown)"));
    cr_assert(eq(int, baton_url_redact("redis://u:pw@h", buf, 6), BATON_OK), "cut to fit");
    cr_assert(eq(str, buf, "redis"));
    cr_assert(eq(int, baton_url_redact(NULL, buf, sizeof buf), BATON_EINVAL));
    cr_assert(eq(int, baton_url_redact("redis://h", NULL, 0), BATON_EINVAL));
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

/* A handle's keys, derived together: each as baton__derive_key makes it, in one
 * allocation (the first key's), all freed and NULL after baton__free_keys. */
Test(unit, a_handles_keys_are_derived_together)
{
    char *a = NULL, *b = NULL, *c = NULL;
    const baton__key_spec k[] = {{&a, "redisson_lock_token:", NULL},
                                 {&b, "redisson_unlock_latch:", ":"},
                                 {&c, "baton_lock_line:", NULL}};
    cr_assert(baton__derive_keys("job{7}", k, 3));
    cr_assert(eq(str, a, "redisson_lock_token:job{7}"));
    cr_assert(eq(str, b, "redisson_unlock_latch:job{7}:"));
    cr_assert(eq(str, c, "baton_lock_line:job{7}"));
    cr_assert(b == a + strlen(a) + 1 && c == b + strlen(b) + 1, "one allocation");
    baton__free_keys(k, 3);
    cr_assert(a == NULL && b == NULL && c == NULL);
    cr_assert(baton__derive_keys("x", k, 0));
    baton__free_keys(k, 0);
}

/* A borrowing map keeps the caller's key (no copy: the key's own memory, as long as its
 * entry lives); a copying one its own copy. */
Test(unit, a_borrowing_map_keeps_the_callers_key)
{
    char key[] = "redisson_lock__channel:{a}";
    int v = 1;
    baton__map m;
    baton__map_init_borrowing(&m);
    cr_assert(eq(int, baton__map_put(&m, key, &v), BATON_OK));
    cr_assert(baton__map_get(&m, "redisson_lock__channel:{a}") == &v);
    bool borrowed = false;
    for (size_t i = 0; i < m.nbuckets; i++)
        for (baton__map_entry *e = m.buckets[i]; e; e = e->next)
            borrowed = borrowed || e->key == key;
    cr_assert(borrowed, "the entry's key is the caller's string");
    cr_assert(baton__map_remove(&m, key) == &v);
    cr_assert(baton__map_get(&m, key) == NULL);
    baton__map_free(&m);
    baton__map_init(&m);
    cr_assert(eq(int, baton__map_put(&m, key, &v), BATON_OK));
    key[0] = 'X'; /* the copy is its own */
    cr_assert(baton__map_get(&m, "redisson_lock__channel:{a}") == &v);
    baton__map_free(&m);
}

/* An empty URL is an error, not the default server (issue 16). */
Test(unit, an_empty_url_is_einval)
{
    baton_options o;
    baton_options_init(&o);
    o.url = "";
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL));
    cr_assert(c == NULL);
    cr_assert(strstr(baton_open_errmsg(), "empty") != NULL, "%s", baton_open_errmsg());
    cr_assert(eq(int, baton_client_open_url("", &c), BATON_EINVAL));
    o.url = "redis://u:pw%00x@127.0.0.1:1";
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL));
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
    int codes[] = {BATON_OK,        BATON_ETIMEDOUT, BATON_ENOTHELD,   BATON_EINVAL,
                   BATON_ECONN,     BATON_EPROTO,    BATON_EAUTH,      BATON_ENOMEM,
                   BATON_ECANCELED, BATON_ENOTSUP,   BATON_ENOTSYNCED, BATON_EPERM,
                   BATON_EBROKEN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        cr_assert(ne(str, (char *)baton_strerror(codes[i]), "unknown error"));
        cr_assert(eq(int, strncmp(baton_err_name(codes[i]), "BATON_", 6), 0));
        cr_assert(ne(str, (char *)baton_err_name(codes[i]), "BATON_UNKNOWN"));
    }
    cr_assert(eq(str, (char *)baton_err_name(BATON_ETIMEDOUT), "BATON_ETIMEDOUT"));
    cr_assert(eq(str, (char *)baton_err_name(BATON_EBROKEN), "BATON_EBROKEN"));
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

/* ------------------------------------------------------------ cluster slots ----------- */

#include "slots.h"

/* Parses RESP text into a reply, as hiredis's reader does with what the server sends. */
static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, text, strlen(text));
    void *r = NULL;
    cr_assert(eq(int, redisReaderGetReply(rd, &r), REDIS_OK));
    cr_assert(r != NULL, "incomplete RESP in the test");
    redisReaderFree(rd);
    return r;
}

Test(unit, crc16_and_key_slots_match_redis)
{
    cr_assert(eq(u16, baton__crc16("123456789", 9), 0x31C3)); /* CRC16/XMODEM check value */
    cr_assert(eq(int, baton__key_slot("foo", 3), 12182));
    cr_assert(eq(int, baton__key_slot("bar", 3), 5061));
    cr_assert(eq(int, baton__key_slot("hello", 5), 866));
    cr_assert(eq(int, baton__key_slot("somekey", 7), 11058));
    /* hash tags: the first '{' and the next '}', when not empty */
    cr_assert(eq(int, baton__key_slot("{user1000}.following", 20), baton__key_slot("user1000", 8)));
    cr_assert(eq(int, baton__key_slot("foo{}{bar}", 10), baton__key_slot("foo{}{bar}", 10)));
    cr_assert(ne(int, baton__key_slot("foo{}{bar}", 10), baton__key_slot("bar", 3)));
    cr_assert(eq(int, baton__key_slot("foo{{bar}}zap", 13), baton__key_slot("{bar", 4)));
    cr_assert(eq(int, baton__key_slot("foo{bar}{zap}", 13), baton__key_slot("bar", 3)));
    /* every key baton derives from a name shares the name's slot */
    char *a = baton__derive_key("redisson_lock__channel:", "job7", NULL);
    char *b = baton__derive_key("redisson_unlock_latch:", "job7", ":uuid:1");
    char *k = baton__hash_tag("job7");
    cr_assert(eq(int, baton__key_slot(a, strlen(a)), baton__key_slot(k, strlen(k))));
    cr_assert(eq(int, baton__key_slot(b, strlen(b)), baton__key_slot("job7", 4)));
    free(a);
    free(b);
    free(k);
}

Test(unit, cluster_names_need_a_valid_hash_tag)
{
    cr_assert(eq(int, baton__check_cluster_name("plain"), BATON_OK));
    cr_assert(eq(int, baton__check_cluster_name("a{b}c"), BATON_OK));
    cr_assert(eq(int, baton__check_cluster_name("{a}"), BATON_OK));
    cr_assert(eq(int, baton__check_cluster_name("a{b"), BATON_EINVAL));
    cr_assert(eq(int, baton__check_cluster_name("{}x"), BATON_EINVAL));
    cr_assert(eq(int, baton__check_cluster_name("x}{"), BATON_EINVAL));
    cr_assert(eq(int, baton__check_cluster_name("}"), BATON_EINVAL));
    cr_assert(eq(int, baton__check_cluster_name("ab}"), BATON_EINVAL));
    cr_assert(eq(int, baton__check_cluster_name("x}"), BATON_EINVAL));
}

Test(unit, cluster_slots_reply_decodes_to_a_slot_map)
{
    redisReply *r = resp("*2\r\n"
                         "*4\r\n:0\r\n:8191\r\n"
                         "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nid1\r\n"
                         "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$3\r\nid4\r\n"
                         "*3\r\n:8192\r\n:16383\r\n"
                         "*2\r\n$0\r\n\r\n:7001\r\n");
    baton__slot_map m;
    char err[128] = "";
    cr_assert(eq(int, baton__slot_map_from_slots(r, "10.9.9.9", &m, err, sizeof err), BATON_OK),
              "%s", err);
    cr_assert(eq(sz, m.nnodes, 3));
    const baton__cluster_node *n0 = &m.nodes[m.owner[0]], *n1 = &m.nodes[m.owner[16383]];
    cr_assert(eq(str, n0->host, "127.0.0.1"));
    cr_assert(eq(int, n0->port, 7000));
    cr_assert(eq(str, n0->id, "id1"));
    cr_assert(n0->master);
    cr_assert(eq(u16, m.owner[8191], m.owner[0]));
    cr_assert(eq(str, n1->host, "10.9.9.9"), "an empty address is the asked node's host");
    cr_assert(eq(int, n1->port, 7001));
    cr_assert(not(m.nodes[1].master), "the replica");
    baton__slot_map_free(&m);
    freeReplyObject(r);

    const char *bad[] = {
        "+OK\r\n",
        "*1\r\n*2\r\n:0\r\n:1\r\n",
        "*1\r\n*3\r\n:5\r\n:2\r\n*2\r\n$1\r\nh\r\n:1\r\n",     /* end before start */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n", /* past the last slot */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:70000\r\n", /* not a port */
        "*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\nh\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = resp(bad[i]);
        cr_assert(eq(int, baton__slot_map_from_slots(r, "h", &m, err, sizeof err), BATON_EPROTO),
                  "case %zu", i);
        cr_assert(eq(sz, m.nnodes, 0));
        freeReplyObject(r);
    }
}

Test(unit, cluster_shards_reply_decodes_to_a_slot_map)
{
    /* one shard: slots 0-99 and 200-16383, a master (TLS port 8000) and a failed replica;
     * a second shard whose only node is failed leaves 100-199 uncovered */
    redisReply *r = resp("*2\r\n"
                         "*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:16383\r\n"
                         "$5\r\nnodes\r\n*2\r\n"
                         "*12\r\n$2\r\nid\r\n$2\r\nm1\r\n$4\r\nport\r\n:7000\r\n"
                         "$8\r\ntls-port\r\n:8000\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
                         "$8\r\nendpoint\r\n$1\r\n?\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
                         "*8\r\n$2\r\nid\r\n$2\r\nr1\r\n$4\r\nport\r\n:7003\r\n"
                         "$4\r\nrole\r\n$7\r\nreplica\r\n$6\r\nhealth\r\n$4\r\nfail\r\n"
                         "*4\r\n$5\r\nslots\r\n*2\r\n:100\r\n:199\r\n"
                         "$5\r\nnodes\r\n*1\r\n"
                         "*8\r\n$2\r\nid\r\n$2\r\nm2\r\n$4\r\nport\r\n:7001\r\n"
                         "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$4\r\nfail\r\n");
    baton__slot_map m;
    char err[128] = "";
    cr_assert(eq(int, baton__slot_map_from_shards(r, "seed", true, &m, err, sizeof err), BATON_OK),
              "%s", err);
    cr_assert(eq(sz, m.nnodes, 1));
    cr_assert(eq(str, m.nodes[0].host, "127.0.0.1"), "an unknown endpoint falls back to ip");
    cr_assert(eq(int, m.nodes[0].port, 8000), "TLS: the tls-port");
    cr_assert(eq(u16, m.owner[0], 0));
    cr_assert(eq(u16, m.owner[16383], 0));
    cr_assert(eq(u16, m.owner[150], BATON__NO_NODE));
    baton__slot_map_free(&m);
    cr_assert(
        eq(int, baton__slot_map_from_shards(r, "seed", false, &m, err, sizeof err), BATON_OK));
    cr_assert(eq(int, m.nodes[0].port, 7000));
    baton__slot_map_free(&m);
    freeReplyObject(r);
}

Test(unit, redirections_decode)
{
    bool ask = true;
    int slot = -1, port = -1;
    char host[64];
    cr_assert(eq(
        int,
        baton__parse_redirect("MOVED 3999 127.0.0.1:6381", &ask, &slot, host, sizeof host, &port),
        BATON_OK));
    cr_assert(not(ask));
    cr_assert(eq(int, slot, 3999));
    cr_assert(eq(str, host, "127.0.0.1"));
    cr_assert(eq(int, port, 6381));
    cr_assert(eq(int,
                 baton__parse_redirect("ASK 1 [::1]:7000", &ask, &slot, host, sizeof host, &port),
                 BATON_OK));
    cr_assert(ask);
    cr_assert(eq(str, host, "::1"));
    cr_assert(eq(int,
                 baton__parse_redirect("MOVED 2 ::1:7000", &ask, &slot, host, sizeof host, &port),
                 BATON_OK));
    cr_assert(eq(str, host, "::1"));
    cr_assert(eq(int,
                 baton__parse_redirect("MOVED 3999 :6380", &ask, &slot, host, sizeof host, &port),
                 BATON_OK));
    cr_assert(eq(str, host, ""), "an unknown endpoint: the answering node");
    cr_assert(eq(int, baton__parse_redirect("ERR nope", &ask, &slot, host, sizeof host, &port),
                 BATON_EINVAL));
    const char *bad[] = {"MOVED x 1:2",     "MOVED 16384 h:1", "MOVED 1 h",   "MOVED 1 h:0",
                         "MOVED 1 h:99999", "ASK 1 h:12x",     "MOVED -1 h:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert(eq(int, baton__parse_redirect(bad[i], &ask, &slot, host, sizeof host, &port),
                     BATON_EPROTO),
                  "%s", bad[i]);
}

/* ------------------------------------------------------------ sentinel replies -------- */

#include "sentinel.h"

Test(unit, sentinel_master_address_and_roles_decode)
{
    baton__addr a;
    redisReply *r = resp("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    cr_assert(eq(int, baton__sentinel_master_addr(r, &a), BATON_OK));
    cr_assert(eq(str, a.host, "127.0.0.1"));
    cr_assert(eq(int, a.port, 6380));
    freeReplyObject(r);
    r = resp("*-1\r\n");
    cr_assert(eq(int, baton__sentinel_master_addr(r, &a), BATON_ENOTHELD), "unknown master");
    freeReplyObject(r);
    const char *bad[] = {"*1\r\n$1\r\nh\r\n", "*2\r\n$1\r\nh\r\n$1\r\nx\r\n",
                         "*2\r\n$0\r\n\r\n$2\r\n10\r\n", "*2\r\n$1\r\nh\r\n$5\r\n65536\r\n",
                         "-ERR no\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = resp(bad[i]);
        cr_assert(eq(int, baton__sentinel_master_addr(r, &a), BATON_EPROTO), "case %zu", i);
        freeReplyObject(r);
    }

    r = resp("*3\r\n$6\r\nmaster\r\n:3129659\r\n*0\r\n");
    cr_assert(eq(int, baton__role_of(r, NULL), BATON__ROLE_MASTER));
    freeReplyObject(r);
    r = resp("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:9753\r\n$9\r\nconnected\r\n:3167038\r\n");
    memset(&a, 0, sizeof a);
    cr_assert(eq(int, baton__role_of(r, &a), BATON__ROLE_REPLICA));
    cr_assert(eq(int, a.port, 9753));
    freeReplyObject(r);
    r = resp("*2\r\n$8\r\nsentinel\r\n*1\r\n$8\r\nmymaster\r\n");
    cr_assert(eq(int, baton__role_of(r, NULL), BATON__ROLE_SENTINEL));
    freeReplyObject(r);
    r = resp("*2\r\n$5\r\nslave\r\n$1\r\nh\r\n");
    cr_assert(eq(int, baton__role_of(r, NULL), BATON__ROLE_UNKNOWN));
    freeReplyObject(r);
}

Test(unit, sentinel_switch_master_and_peers_decode)
{
    baton__addr to;
    const char *msg = "mymaster 127.0.0.1 6379 ::1 6380";
    cr_assert(eq(int, baton__sentinel_switch(msg, strlen(msg), "mymaster", &to), BATON_OK));
    cr_assert(eq(str, to.host, "::1"));
    cr_assert(eq(int, to.port, 6380));
    cr_assert(eq(int, baton__sentinel_switch(msg, strlen(msg), "other", &to), BATON_EINVAL));
    cr_assert(eq(int, baton__sentinel_switch(msg, strlen(msg), "mymaste", &to), BATON_EINVAL));
    const char *bad[] = {"mymaster 1 2 3", "mymaster h 1 h2 x", "mymaster h 1 h2 2 extra", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert(
            eq(int, baton__sentinel_switch(bad[i], strlen(bad[i]), "mymaster", &to), BATON_EPROTO),
            "%s", bad[i]);

    baton__addr peers[4];
    redisReply *r = resp("*2\r\n"
                         "*4\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$5\r\n26380\r\n"
                         "*4\r\n$4\r\nport\r\n$5\r\n26381\r\n$2\r\nip\r\n$3\r\n::1\r\n");
    cr_assert(eq(int, baton__sentinel_peers(r, peers, 4), 2));
    cr_assert(eq(int, peers[1].port, 26381));
    cr_assert(eq(str, peers[1].host, "::1"));
    cr_assert(eq(int, baton__sentinel_peers(r, peers, 1), 1), "at most max");
    freeReplyObject(r);
    r = resp("*1\r\n*2\r\n$2\r\nip\r\n$1\r\nh\r\n");
    cr_assert(eq(int, baton__sentinel_peers(r, peers, 4), -1));
    freeReplyObject(r);
}

Test(unit, tls_options_without_rediss_and_bad_tls_files_are_refused)
{
    baton_options o;
    baton_options_init(&o);
    o.url = "redis://127.0.0.1:1";
    o.tls_ca = "/etc/ssl/certs";
    baton_client *c = (baton_client *)1;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL), "plain text with TLS options");
    cr_assert(eq(ptr, c, NULL));
    cr_assert(not(eq(ptr, strstr(baton_open_errmsg(), "rediss://"), NULL)), "%s",
              baton_open_errmsg());
    baton_options_init(&o);
    o.url = "redis://127.0.0.1:1";
    o.tls_insecure_skip_verify = true;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL));

    baton_options_init(&o);
    o.url = "rediss://127.0.0.1:1";
    o.tls_ca = "/nonexistent/ca.pem";
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL));
    cr_assert(not(eq(ptr, strstr(baton_open_errmsg(), "/nonexistent/ca.pem"), NULL)), "%s",
              baton_open_errmsg());
    baton_options_init(&o);
    o.url = "rediss://127.0.0.1:1";
    o.tls_cert = "/etc/ssl/certs/ca-certificates.crt";
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL), "a certificate without its key");
    baton_options_init(&o);
    o.url = "rediss://127.0.0.1:1";
    o.keepalive_ms = 10;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL), "keepalive under a second");
    baton_options_init(&o);
    o.url = "redis://127.0.0.1:1";
    o.starve_ms = -5; /* BATON_STARVE_NEVER is the one negative value */
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL));
    cr_assert(not(eq(ptr, strstr(baton_open_errmsg(), "starve_ms"), NULL)), "%s",
              baton_open_errmsg());
}

Test(unit, url_sentinel_and_cluster)
{
    baton__endpoint ep =
        parse_ok("redis+sentinel://u:p%40ss@10.0.0.1,10.0.0.2:26380,[::1]:26381/my%20master/3");
    cr_assert(eq(int, ep.kind, BATON__EP_SENTINEL));
    cr_assert(eq(int, ep.nseeds, 3));
    cr_assert(eq(str, ep.seeds[0].host, "10.0.0.1"));
    cr_assert(eq(int, ep.seeds[0].port, 26379), "Sentinel's default port");
    cr_assert(eq(int, ep.seeds[1].port, 26380));
    cr_assert(eq(str, ep.seeds[2].host, "::1"));
    cr_assert(eq(int, ep.seeds[2].port, 26381));
    cr_assert(eq(str, ep.master, "my master"));
    cr_assert(eq(int, ep.db, 3));
    cr_assert(eq(str, ep.password, "p@ss"));
    cr_assert(not(ep.tls));
    baton__endpoint_free(&ep);

    ep = parse_ok("rediss+sentinel://s1/mymaster");
    cr_assert(ep.tls);
    cr_assert(eq(int, ep.db, 0));
    baton__endpoint_free(&ep);

    ep = parse_ok("redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
    cr_assert(eq(int, ep.kind, BATON__EP_CLUSTER));
    cr_assert(eq(int, ep.nseeds, 2));
    cr_assert(eq(int, ep.seeds[1].port, 7001));
    baton__endpoint_free(&ep);

    parse_bad("redis+sentinel://s1,s2", NULL);           /* no master name */
    parse_bad("redis+sentinel://s1,s2/", NULL);          /* empty master name */
    parse_bad("redis+sentinel://:pw0rd@s1,/m", "pw0rd"); /* empty host in the list */
    parse_bad("redis+cluster://h:1/2", NULL);            /* clusters have db 0 only */
    parse_bad("redis://h1,h2", NULL);                    /* several hosts, one server */
    parse_bad("redis+sentinel://[::1/m", NULL);
    parse_bad("redis+sentinel://h:0/m", NULL);
}

Test(unit, url_rediss)
{
    baton__endpoint ep = parse_ok("rediss://u:p@cache.example:6380/2");
    cr_assert(ep.tls);
    cr_assert(eq(str, ep.host, "cache.example"));
    cr_assert(eq(int, ep.port, 6380));
    cr_assert(eq(int, ep.db, 2));
    baton__endpoint_free(&ep);
    ep = parse_ok("redis://h");
    cr_assert(not(ep.tls));
    baton__endpoint_free(&ep);
    parse_bad("redisss://h", NULL);
}
