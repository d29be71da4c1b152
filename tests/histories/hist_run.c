/*
 * The runner of the checked histories: starts the servers, the clients (hist_client, one
 * process each) and the nemesis, then merges the histories and runs the checkers.
 *
 *   hist_run --seed S --time SECONDS --nemesis LIST --deployment single|sentinel
 *            [--clients mutex:4,fair:3,...] [--keep DIR] [--client PATH] [--skew RATE]
 *
 * LIST: comma-separated faults, or "none", or "all": pause (SIGSTOP short of the lease),
 * pause-long (past it), kill (kill -9 of a client, started again as its next incarnation),
 * srvkill (kill -9 of the server, restarted with its AOF), srvkill-noaof (restarted with
 * the AOF gone: the data is lost), cpause (CLIENT PAUSE past the command timeout), ckill
 * (CLIENT KILL of every client connection), flush (SCRIPT FLUSH), failover (Sentinel:
 * SENTINEL FAILOVER), partition (every third client cut off from the lock server for
 * 0.5-6 s: network namespaces and tc, single deployment only), slow (the same clients'
 * traffic squeezed through 16 kbit/s for 1-4 s).
 *
 * --skew RATE runs every other client under libfaketime with its clocks (wall and
 * monotonic) at RATE times real time (0.95: slow, 1.05: fast).
 *
 * The faults and their times come from the seed alone (a fixed schedule); what they hit
 * depends on timing, as with any real system. Sentinel: the deployment is started by the
 * wrapper (tests/histories/run), which passes it in HIST_SENTINEL_* variables.
 *
 * Every time in the histories is the TIME of a resource server of its own that no fault
 * touches; the fenced store lives there too.
 */
#define _GNU_SOURCE
#include "hist.h"

#include <hiredis/hiredis.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 64

static unsigned long long rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t rnd_in(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------- servers ------------- */

typedef struct server {
    int port;
    pid_t pid;
    char dir[256];
    bool aof;
    bool cluster; /* a node of the Cluster deployment (restarted with its nodes.conf) */
    char ns[32];  /* sentinel-net: the node's network namespace and address */
    char ip[32];
} server;

/* sentinel-net: where each port lives (a node in a namespace of its own); others are on
 * 127.0.0.1 */
static struct {
    int port;
    char ip[32];
} addr_map[16];
static int naddr;

static const char *ip_of_port(int port)
{
    for (int i = 0; i < naddr; i++)
        if (addr_map[i].port == port)
            return addr_map[i].ip;
    return "127.0.0.1";
}

static void map_port(int port, const char *ip)
{
    if (naddr < 16) {
        addr_map[naddr].port = port;
        snprintf(addr_map[naddr].ip, sizeof addr_map[naddr].ip, "%s", ip);
        naddr++;
    }
}

static char workdir[200];

/* ------------------------------------------------------------- the network --------- */

/* With a network fault in the list, every third client (index % 3 == 1) runs in a network
 * namespace of its own, joined to the host by a veth pair; the servers listen on the
 * host's end too. tc on both ends, filtered on the lock server's port (the resource
 * server's traffic is never touched), drops or slows that client's traffic to the lock
 * server. */
static char net_ns[32], veth_a[16], veth_b[16];
static char net_ip[32];   /* the host's end, where those clients reach the servers */
static bool net_filtered; /* the tc classes are in place */

static int sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[600];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    int rc = system(full);
    return rc;
}

static bool net_setup(void)
{
    int id = (int)getpid() % 100000;
    int k = id % 250 + 1;
    snprintf(net_ns, sizeof net_ns, "bhist%d", id);
    snprintf(veth_a, sizeof veth_a, "bh%da", id);
    snprintf(veth_b, sizeof veth_b, "bh%db", id);
    snprintf(net_ip, sizeof net_ip, "10.213.%d.1", k);
    if (sh("ip netns add %s", net_ns) != 0) {
        net_ip[0] = 0;
        net_ns[0] = 0;
        return false;
    }
    if (sh("ip link add %s type veth peer name %s", veth_a, veth_b) != 0 ||
        sh("ip link set %s netns %s", veth_b, net_ns) != 0 ||
        sh("ip addr add %s/24 dev %s", net_ip, veth_a) != 0 ||
        sh("ip link set %s up", veth_a) != 0 ||
        sh("ip netns exec %s ip addr add 10.213.%d.2/24 dev %s", net_ns, k, veth_b) != 0 ||
        sh("ip netns exec %s ip link set %s up", net_ns, veth_b) != 0 ||
        sh("ip netns exec %s ip link set lo up", net_ns) != 0)
        return false;
    return true;
}

/* This machine's kernel has no netem (nor prio): the lock server's traffic goes through
 * an htb class of its own (a u32 filter on its port) whose rate the faults change: 8 bit/s
 * with a one-packet queue drops everything (a partition), 16 kbit/s queues it (a slow
 * link); 10 gbit/s is the normal state. */
static bool net_filter(int port)
{
    const char *ends[2][3] = {{"", veth_a, "sport"}, {"ns", veth_b, "dport"}};
    for (int e = 0; e < 2; e++) {
        char pre[64] = "";
        if (ends[e][0][0])
            snprintf(pre, sizeof pre, "ip netns exec %s ", net_ns);
        if (sh("%stc qdisc add dev %s root handle 1: htb default 10", pre, ends[e][1]) != 0 ||
            sh("%stc class add dev %s parent 1: classid 1:10 htb rate 10gbit", pre, ends[e][1]) !=
                0 ||
            sh("%stc class add dev %s parent 1: classid 1:30 htb rate 10gbit", pre, ends[e][1]) !=
                0 ||
            sh("%stc qdisc add dev %s parent 1:30 handle 30: pfifo limit 1000", pre, ends[e][1]) !=
                0 ||
            sh("%stc filter add dev %s protocol ip parent 1:0 prio 3 u32 match ip %s %d 0xffff "
               "flowid 1:30",
               pre, ends[e][1], ends[e][2], port) != 0)
            return false;
    }
    net_filtered = true;
    return true;
}

/* Sets both ends' class for the lock server's traffic: rate ("8bit", "16kbit", "10gbit")
 * and queue length. */
static bool net_set(const char *rate, int queue)
{
    if (!net_filtered)
        return false;
    bool ok = true;
    for (int e = 0; e < 2; e++) {
        char pre[64] = "";
        if (e == 1)
            snprintf(pre, sizeof pre, "ip netns exec %s ", net_ns);
        const char *dev = e == 0 ? veth_a : veth_b;
        ok &= sh("%stc class change dev %s parent 1: classid 1:30 htb rate %s ceil %s", pre, dev,
                 rate, rate) == 0;
        ok &= sh("%stc qdisc change dev %s parent 1:30 handle 30: pfifo limit %d", pre, dev,
                 queue) == 0;
    }
    return ok;
}

static pid_t owner_pid;
static bool snet_mode;
static void snet_teardown(void);

static void net_teardown(void);

static void net_teardown_at_exit(void)
{
    if (getpid() == owner_pid) {
        if (snet_mode) {
            net_ns[0] = 0;
            snet_teardown();
        }
        net_teardown();
    }
}

static void net_teardown(void)
{
    if (!net_ns[0])
        return;
    sh("ip netns del %s", net_ns);
    sh("ip link del %s", veth_a);
    net_ns[0] = 0;
}

static redisContext *connect_port(int port, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *r = redisConnectWithTimeout(ip_of_port(port), port, tv);
    if (r && r->err) {
        redisFree(r);
        return NULL;
    }
    if (r)
        redisSetTimeout(r, tv);
    return r;
}

static bool ping(int port)
{
    redisContext *r = connect_port(port, 300);
    if (!r)
        return false;
    redisReply *rep = redisCommand(r, "PING");
    bool ok = rep && rep->type == REDIS_REPLY_STATUS;
    /* a server loading its AOF answers -LOADING */
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return ok;
}

static pid_t spawn_server(server *s)
{
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    char log[300];
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the runner killed (a ctest timeout): gone too */
        const char *srv = getenv("BATON_SERVER"); /* valkey-server runs Valkey */
        if (!srv || !*srv)
            srv = "redis-server";
        if (s->ns[0]) /* sentinel-net: in its namespace, on its address */
            execlp("ip", "ip", "netns", "exec", s->ns, srv, "--port", port, "--bind", s->ip,
                   "--protected-mode", "no", "--dir", s->dir, "--save", "", "--appendonly", "no",
                   "--logfile", log, "--repl-diskless-sync-delay", "0",
                   "--repl-ping-replica-period", "1", (char *)NULL);
        if (s->cluster) /* as scripts/cluster-lib.sh starts it */
            execlp(srv, srv, "--port", port, "--bind", "127.0.0.1", "--dir", s->dir, "--save", "",
                   "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file",
                   "nodes.conf", "--cluster-node-timeout", "1000", "--repl-diskless-sync-delay",
                   "0", "--repl-ping-replica-period", "1", "--logfile", log, (char *)NULL);
        if (net_ip[0])
            execlp(srv, srv, "--port", port, "--bind", "127.0.0.1", net_ip, "--protected-mode",
                   "no", "--dir", s->dir, "--save", "", "--appendonly", s->aof ? "yes" : "no",
                   "--appendfsync", "always", "--logfile", log, (char *)NULL);
        execlp(srv, srv, "--port", port, "--bind", "127.0.0.1", "--dir", s->dir, "--save", "",
               "--appendonly", s->aof ? "yes" : "no", "--appendfsync", "always", "--logfile", log,
               "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static bool start_server(server *s)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        if (s->port == 0 || attempt > 0) {
            unsigned short r;
            FILE *u = fopen("/dev/urandom", "r");
            if (!u || fread(&r, sizeof r, 1, u) != 1)
                return false;
            fclose(u);
            s->port = 20000 + r % 20000;
            if (ping(s->port))
                continue;
        }
        s->pid = spawn_server(s);
        for (int i = 0; i < 200; i++) {
            if (ping(s->port))
                return true;
            if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
                break;
            sleep_ms(25);
        }
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    return false;
}

/* Starts the server again on its port (after a kill -9), waiting until it answers. */
static bool restart_server(server *s)
{
    s->pid = spawn_server(s);
    for (int i = 0; i < 400; i++) {
        if (ping(s->port))
            return true;
        sleep_ms(25);
    }
    return false;
}

static void stop_server(server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

static void rm_rf(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", path, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
}

/* ------------------------------------------------------------- the history --------- */

static server resource;
static server single; /* single: the lock server */
static bool redlock_mode;
static server rl_nodes[3]; /* Redlock: three independent servers (AOF) */
static int rl_target;      /* the one a server fault aims at */
static redisContext *res;
static FILE *nem; /* the nemesis' history */

static int64_t srv_us(void)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        if (!res)
            res = connect_port(resource.port, 2000);
        redisReply *r = res ? redisCommand(res, "TIME") : NULL;
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
            int64_t t = strtoll(r->element[0]->str, NULL, 10) * 1000000 +
                        strtoll(r->element[1]->str, NULL, 10);
            freeReplyObject(r);
            return t;
        }
        if (r)
            freeReplyObject(r);
        if (res)
            redisFree(res);
        res = NULL;
        sleep_ms(20);
    }
    fprintf(stderr, "hist_run: the resource server does not answer\n");
    exit(3);
}

static void nemesis_event_at(int64_t t, const char *op, const char *type, int proc, int64_t value)
{
    fprintf(nem, "%" PRId64 " %" PRId64 " %d 0 nemesis %s %s 0 0 %" PRId64 "\n", t, mono_ns(), proc,
            op, type, value);
    fflush(nem);
}

static void nemesis_event(const char *op, const char *type, int proc, int64_t value)
{
    nemesis_event_at(srv_us(), op, type, proc, value);
}

/* ------------------------------------------------------------- clients ------------- */

typedef struct client {
    char workload[16];
    int inc;
    pid_t pid;
    bool stopped;
} client;

static client clients[MAX_CLIENTS];
static int nclients;
static const char *client_path;
static char lock_url[512];
static long long seed;
static int64_t end_us; /* when the clients stop */
static int latch_base = -1;
static const char *skew; /* --skew RATE: libfaketime's rate for every other client */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"

static void spawn_client(int i)
{
    client *c = &clients[i];
    int64_t left_ms = (end_us - srv_us()) / 1000;
    if (left_ms < 500)
        return;
    char port[16], proc[16], inc[16], sd[32], dur[32], out[400], base[16];
    snprintf(port, sizeof port, "%d", resource.port);
    snprintf(proc, sizeof proc, "%d", i);
    snprintf(inc, sizeof inc, "%d", c->inc);
    snprintf(sd, sizeof sd, "%lld", seed);
    snprintf(dur, sizeof dur, "%" PRId64, left_ms);
    snprintf(out, sizeof out, "%s/client-%d-%d.hist", workdir, i, c->inc);
    snprintf(base, sizeof base, "%d", latch_base);
    bool in_ns = (net_filtered || snet_mode) && i % 3 == 1;
    char url_ns[512];
    if (snet_mode)
        snprintf(url_ns, sizeof url_ns, "%s", lock_url);
    else
        snprintf(url_ns, sizeof url_ns, "redis://%s:%d", net_ip, single.port);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* a cli client leads a process group with its baton: a pause stops both */
        if (strcmp(c->workload, "cli") == 0)
            setpgid(0, 0);
        setenv("HIST_LATCH_BASE", base, 1);
        if (in_ns) {
            setenv("HIST_RESOURCE_HOST", net_ip, 1);
            execlp("ip", "ip", "netns", "exec", net_ns, client_path, url_ns, port, c->workload,
                   proc, inc, sd, dur, out, (char *)NULL);
            _exit(127);
        }
        if (skew && i % 2 == 1) {
            /* every other client's clocks (wall and monotonic) run at this rate */
            char spec[64];
            snprintf(spec, sizeof spec, "%+d x%s", (i * 37) % 61 - 30, skew);
            setenv("LD_PRELOAD", FAKETIME_LIB, 1);
            setenv("FAKETIME", spec, 1);
            setenv("FAKETIME_NO_CACHE", "1", 1);
        }
        const char *u = lock_url;
        char first[128];
        if (redlock_mode && strcmp(c->workload, "redlock") != 0) {
            snprintf(first, sizeof first, "redis://127.0.0.1:%d", rl_nodes[0].port);
            u = first; /* the other workloads: on the first server */
        }
        execl(client_path, client_path, u, port, c->workload, proc, inc, sd, dur, out,
              (char *)NULL);
        _exit(127);
    }
    c->pid = pid;
    c->stopped = false;
}

/* Runs hist_client's final read of a semaphore (final:sem, final:permits) as logical
 * client proc and waits for it (it waits for the leases itself, at most 20 s). */
static void run_final(const char *workload, int proc)
{
    char port[16], pr[16], sd[32], out[400], w[32];
    snprintf(port, sizeof port, "%d", resource.port);
    snprintf(pr, sizeof pr, "%d", proc);
    snprintf(sd, sizeof sd, "%lld", seed);
    snprintf(out, sizeof out, "%s/final-%.15s.hist", workdir, workload);
    snprintf(w, sizeof w, "final:%.15s", workload);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl(client_path, client_path, lock_url, port, w, pr, "0", sd, "20000", out, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

/* Reaps clients that ended; returns how many are still running. */
static int reap(void)
{
    int running = 0;
    for (int i = 0; i < nclients; i++) {
        if (clients[i].pid <= 0)
            continue;
        int st;
        pid_t r = waitpid(clients[i].pid, &st, WNOHANG);
        if (r == clients[i].pid) {
            if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
                fprintf(stderr, "hist_run: client %d.%d exited %d\n", i, clients[i].inc,
                        WEXITSTATUS(st));
            else if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
                fprintf(stderr, "hist_run: client %d.%d died of signal %d\n", i, clients[i].inc,
                        WTERMSIG(st));
            clients[i].pid = 0;
        } else {
            running++;
        }
    }
    return running;
}

/* ------------------------------------------------------------- MariaDB ------------ */

/* --stock N: a MariaDB server of Debian's (mariadbd) on a unix socket with a private datadir in
 * the run's directory, the table h.stock (one row: qty N, fence 0) that the mutex holds
 * update with their tokens (hist_client's stock_write), read once more after the run;
 * stopped by pid. */
static pid_t mdb_pid;
static char mdb_sock[340];

static int run_wait(const char *const *argv, char *out, size_t outlen)
{
    int pp[2];
    if (pipe(pp) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pp[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        close(pp[0]);
        close(pp[1]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pp[1]);
    size_t got = 0;
    ssize_t n;
    char sink[256];
    while ((n = read(pp[0], out && got < outlen - 1 ? out + got : sink,
                     out && got < outlen - 1 ? outlen - 1 - got : sizeof sink)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (out && got < outlen - 1)
            got += (size_t)n;
    }
    if (out)
        out[got] = 0;
    close(pp[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int mdb_sql(const char *sql, char *out, size_t outlen)
{
    const char *argv[] = {
        "mariadb", "--no-defaults", "-S", mdb_sock, "-u", "root", "-N", "-B", "-e", sql, NULL};
    return run_wait(argv, out, outlen);
}

static bool mdb_start(long long qty)
{
    char dir[300], data[320], log[340];
    _Static_assert(sizeof mdb_sock >= sizeof dir + 8, "the socket's path fits");
    snprintf(dir, sizeof dir, "%s/mariadb", workdir);
    mkdir(dir, 0755);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(mdb_sock, sizeof mdb_sock, "%s/sock", dir);
    snprintf(log, sizeof log, "%s/error.log", dir);
    char datadir[340];
    snprintf(datadir, sizeof datadir, "--datadir=%s", data);
    const char *inst[] = {"mariadb-install-db",
                          "--no-defaults",
                          datadir,
                          "--user=root",
                          "--auth-root-authentication-method=normal",
                          "--skip-test-db",
                          NULL};
    if (run_wait(inst, NULL, 0) != 0) {
        fprintf(stderr, "hist_run: mariadb-install-db failed (scripts/deps.sh installs "
                        "mariadb-server)\n");
        return false;
    }
    /* Its clients come through the socket only: no TCP port (a port picked at random was
     * taken now and then, and mariadbd failed with "Address already in use"). */
    char a_sock[360], a_log[360];
    snprintf(a_sock, sizeof a_sock, "--socket=%s", mdb_sock);
    snprintf(a_log, sizeof a_log, "--log-error=%s", log);
    mdb_pid = fork();
    if (mdb_pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execlp("mariadbd", "mariadbd", "--no-defaults", datadir, a_sock, "--skip-networking",
               "--user=root", a_log, "--skip-log-bin", "--innodb-buffer-pool-size=16M",
               (char *)NULL);
        _exit(127);
    }
    for (int k = 0; k < 300; k++) {
        if (mdb_sql("SELECT 1", NULL, 0) == 0) {
            char sql[300];
            snprintf(sql, sizeof sql,
                     "CREATE DATABASE h; CREATE TABLE h.stock (id INT PRIMARY KEY, qty INT NOT "
                     "NULL, fence BIGINT NOT NULL) ENGINE=InnoDB; INSERT INTO h.stock VALUES "
                     "(1, %lld, 0);",
                     qty);
            return mdb_sql(sql, NULL, 0) == 0;
        }
        if (waitpid(mdb_pid, NULL, WNOHANG) == mdb_pid) {
            mdb_pid = 0;
            break;
        }
        sleep_ms(100);
    }
    fprintf(stderr, "hist_run: mariadbd did not start (%s)\n", log);
    return false;
}

static void mdb_stop(void)
{
    if (mdb_pid <= 0)
        return;
    kill(mdb_pid, SIGTERM);
    for (int k = 0; k < 200; k++) {
        if (waitpid(mdb_pid, NULL, WNOHANG) == mdb_pid) {
            mdb_pid = 0;
            return;
        }
        sleep_ms(50);
    }
    kill(mdb_pid, SIGKILL);
    waitpid(mdb_pid, NULL, 0);
    mdb_pid = 0;
}

/* ------------------------------------------------------------- the deployment ------ */

static bool sentinel_mode;
static int sentinel_ports[3];
static int sync_replicas;
static server single;        /* single: the lock server */
static server sent_nodes[2]; /* sentinel: the master and the replica as started */
static int64_t client_timeout_ms = 1000;

/* The port of the current master (Sentinel: as the first sentinel that answers says). */
static int master_port(void)
{
    if (redlock_mode)
        return rl_nodes[rl_target].port;
    if (!sentinel_mode)
        return single.port;
    for (int i = 0; i < 3; i++) {
        redisContext *r = connect_port(sentinel_ports[i], 500);
        if (!r)
            continue;
        redisReply *rep = redisCommand(r, "SENTINEL get-master-addr-by-name mymaster");
        int port = -1;
        if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
            port = atoi(rep->element[1]->str);
        if (rep)
            freeReplyObject(rep);
        redisFree(r);
        if (port > 0)
            return port;
    }
    return -1;
}

static server *node_of_port(int port)
{
    if (redlock_mode)
        for (int i = 0; i < 3; i++)
            if (rl_nodes[i].port == port)
                return &rl_nodes[i];
    if (!sentinel_mode)
        return &single;
    for (int i = 0; i < 2; i++)
        if (sent_nodes[i].port == port)
            return &sent_nodes[i];
    return NULL;
}

static pid_t pid_of_port(int port)
{
    redisContext *r = connect_port(port, 500);
    if (!r)
        return -1;
    redisReply *rep = redisCommand(r, "INFO server");
    pid_t pid = -1;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *p = strstr(rep->str, "process_id:");
        if (p)
            pid = atoi(p + 11);
    }
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return pid;
}

static bool cluster_mode;
static int cluster_masters(int *ports);

/* Sends one command to the master (Cluster: to every master); true if it answered without
 * an error (every one). */
static bool master_cmd(const char *fmt, ...)
{
    if (cluster_mode) {
        int ports[12];
        int n = cluster_masters(ports);
        bool ok = n > 0;
        for (int i = 0; i < n; i++) {
            redisContext *r = connect_port(ports[i], 1000);
            if (!r) {
                ok = false;
                continue;
            }
            va_list ap;
            va_start(ap, fmt);
            redisReply *rep = redisvCommand(r, fmt, ap);
            va_end(ap);
            ok &= rep && rep->type != REDIS_REPLY_ERROR;
            if (rep)
                freeReplyObject(rep);
            redisFree(r);
        }
        return ok;
    }
    int port = master_port();
    if (port < 0)
        return false;
    redisContext *r = connect_port(port, 1000);
    if (!r)
        return false;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    bool ok = rep && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return ok;
}

/* Whether the current master has a replica online. */
static bool master_has_replica(void)
{
    int port = master_port();
    redisContext *r = port > 0 ? connect_port(port, 500) : NULL;
    if (!r)
        return false;
    redisReply *rep = redisCommand(r, "INFO replication");
    bool yes = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "role:master") &&
               strstr(rep->str, "state=online");
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return yes;
}

/* ------------------------------------------------------------- sentinel-net ------- */

/* --deployment sentinel-net: the Sentinel deployment of tests/histories/run (a master, a
 * replica, three sentinels, quorum 2), started here with every node in a network
 * namespace of its own, and a seventh namespace for every third client, all joined by a
 * bridge (the runner and the other clients reach them from the host, through the bridge).
 * Partitions drop the traffic between two namespaces both ways: in each, an htb class of 8
 * bit/s with a one-packet queue, and a u32 filter on the other's address (this kernel has
 * no netem and no iptables). */
#define SNET_N 6 /* master, replica, sentinels 1-3, clients */
static const char *const snet_tag[SNET_N] = {"m", "r", "s1", "s2", "s3", "c"};
static const int snet_host[SNET_N] = {11, 12, 21, 22, 23, 31};
static char snet_ns[SNET_N][32], snet_br[16];
static int snet_k;
static pid_t snet_sentinel_pid[3];
static server snet_sentinel[3];

static void snet_ip(int i, char *out, size_t n)
{
    snprintf(out, n, "10.214.%d.%d", snet_k, snet_host[i]);
}

static void snet_teardown(void)
{
    for (int i = 0; i < 3; i++)
        if (snet_sentinel_pid[i] > 0) {
            kill(snet_sentinel_pid[i], SIGKILL);
            waitpid(snet_sentinel_pid[i], NULL, 0);
            snet_sentinel_pid[i] = 0;
        }
    for (int i = 0; i < SNET_N; i++)
        if (snet_ns[i][0]) {
            sh("ip netns del %s", snet_ns[i]);
            snet_ns[i][0] = 0;
        }
    if (snet_br[0]) {
        sh("ip link del %s", snet_br);
        snet_br[0] = 0;
    }
}

static bool snet_setup(void)
{
    int id = (int)getpid() % 100000;
    snet_k = id % 250 + 1;
    snprintf(snet_br, sizeof snet_br, "bs%d", id);
    if (sh("ip link add %s type bridge", snet_br) != 0) {
        fprintf(stderr, "hist_run: ip link add %s type bridge failed\n", snet_br);
        snet_br[0] = 0;
        return false;
    }
    if (sh("ip addr add 10.214.%d.1/24 dev %s", snet_k, snet_br) != 0 ||
        sh("ip link set %s up", snet_br) != 0)
        return false;
    for (int i = 0; i < SNET_N; i++) {
        char ns[32], ip[32];
        snprintf(ns, sizeof ns, "bs%d%s", id, snet_tag[i]);
        snet_ip(i, ip, sizeof ip);
        if (sh("ip netns add %s", ns) != 0) {
            fprintf(stderr, "hist_run: ip netns add %s failed\n", ns);
            return false;
        }
        snprintf(snet_ns[i], sizeof snet_ns[i], "%s", ns);
        const char *pre = "ip netns exec";
        if (sh("ip link add %sh type veth peer name e0 netns %s", ns, ns) != 0 ||
            sh("ip link set %sh master %s", ns, snet_br) != 0 ||
            sh("ip link set %sh up", ns) != 0 ||
            sh("%s %s ip addr add %s/24 dev e0", pre, ns, ip) != 0 ||
            sh("%s %s ip link set e0 up", pre, ns) != 0 ||
            sh("%s %s ip link set lo up", pre, ns) != 0 ||
            sh("%s %s tc qdisc add dev e0 root handle 1: htb default 10", pre, ns) != 0 ||
            sh("%s %s tc class add dev e0 parent 1: classid 1:10 htb rate 10gbit", pre, ns) != 0 ||
            sh("%s %s tc class add dev e0 parent 1: classid 1:30 htb rate 8bit ceil 8bit", pre,
               ns) != 0 ||
            sh("%s %s tc qdisc add dev e0 parent 1:30 handle 30: pfifo limit 1", pre, ns) != 0) {
            fprintf(stderr, "hist_run: setting up namespace %s failed\n", ns);
            return false;
        }
    }
    /* the resource server listens on the bridge too; the clients' namespace reaches it */
    snprintf(net_ip, sizeof net_ip, "10.214.%d.1", snet_k);
    snprintf(net_ns, sizeof net_ns, "%s", snet_ns[5]);
    return true;
}

/* Drops the traffic between namespaces a and b, both ways. */
static bool snet_block(int a, int b)
{
    char ipa[32], ipb[32];
    snet_ip(a, ipa, sizeof ipa);
    snet_ip(b, ipb, sizeof ipb);
    bool ok = sh("ip netns exec %s tc filter add dev e0 parent 1: protocol ip prio 1 u32 match "
                 "ip dst %s/32 flowid 1:30",
                 snet_ns[a], ipb) == 0;
    ok &= sh("ip netns exec %s tc filter add dev e0 parent 1: protocol ip prio 1 u32 match ip "
             "dst %s/32 flowid 1:30",
             snet_ns[b], ipa) == 0;
    return ok;
}

static void snet_heal(void)
{
    for (int i = 0; i < SNET_N; i++)
        sh("ip netns exec %s tc filter del dev e0 parent 1: prio 1", snet_ns[i]);
}

static int snet_port(void)
{
    unsigned short r = 0;
    FILE *u = fopen("/dev/urandom", "r");
    if (u) {
        if (fread(&r, sizeof r, 1, u) != 1)
            r = (unsigned short)getpid();
        fclose(u);
    }
    return 20000 + r % 20000;
}

/* Starts the master, the replica and the sentinels in their namespaces. */
static bool snet_start(void)
{
    for (int i = 0; i < 2; i++) {
        server *n = &sent_nodes[i];
        snprintf(n->dir, sizeof n->dir, "%s/%s", workdir, i ? "replica" : "master");
        mkdir(n->dir, 0755);
        snprintf(n->ns, sizeof n->ns, "%.31s", snet_ns[i]);
        snet_ip(i, n->ip, sizeof n->ip);
        n->port = snet_port();
        map_port(n->port, n->ip);
        n->pid = spawn_server(n);
        bool up = false;
        for (int k = 0; k < 200 && !up; k++) {
            up = ping(n->port);
            if (!up)
                sleep_ms(25);
        }
        if (!up) {
            fprintf(stderr, "hist_run: sentinel-net: node %d did not start\n", i);
            return false;
        }
    }
    redisContext *r = connect_port(sent_nodes[1].port, 1000);
    redisReply *rep =
        r ? redisCommand(r, "REPLICAOF %s %d", sent_nodes[0].ip, sent_nodes[0].port) : NULL;
    if (rep)
        freeReplyObject(rep);
    if (r)
        redisFree(r);
    int len = snprintf(lock_url, sizeof lock_url, "redis+sentinel://");
    for (int i = 0; i < 3; i++) {
        server *n = &snet_sentinel[i];
        snprintf(n->dir, sizeof n->dir, "%s/s%d", workdir, i + 1);
        mkdir(n->dir, 0755);
        snet_ip(2 + i, n->ip, sizeof n->ip);
        n->port = snet_port();
        map_port(n->port, n->ip);
        sentinel_ports[i] = n->port;
        char conf[400];
        snprintf(conf, sizeof conf, "%s/sentinel.conf", n->dir);
        FILE *f = fopen(conf, "w");
        if (!f)
            return false;
        fprintf(f,
                "port %d\nbind %s\nprotected-mode no\ndir %s\nlogfile %s/sentinel.log\n"
                "sentinel monitor mymaster %s %d 2\n"
                "sentinel down-after-milliseconds mymaster 1000\n"
                "sentinel failover-timeout mymaster 5000\n"
                "sentinel parallel-syncs mymaster 1\n",
                n->port, n->ip, n->dir, n->dir, sent_nodes[0].ip, sent_nodes[0].port);
        fclose(f);
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            const char *srv = getenv("BATON_SERVER");
            execlp("ip", "ip", "netns", "exec", snet_ns[2 + i], srv && *srv ? srv : "redis-server",
                   conf, "--sentinel", (char *)NULL);
            _exit(127);
        }
        snet_sentinel_pid[i] = pid;
        len += snprintf(lock_url + len, sizeof lock_url - (size_t)len, "%s%s:%d", i ? "," : "",
                        n->ip, n->port);
    }
    snprintf(lock_url + len, sizeof lock_url - (size_t)len, "/mymaster");
    /* ready: the replica in sync, every sentinel sees the replica and the two others */
    for (int k = 0; k < 600; k++) {
        bool ready = master_has_replica();
        for (int i = 0; i < 3 && ready; i++) {
            redisContext *c = connect_port(sentinel_ports[i], 500);
            redisReply *m = c ? redisCommand(c, "SENTINEL MASTER mymaster") : NULL;
            int others = -1, slaves = -1;
            if (m && m->type == REDIS_REPLY_ARRAY)
                for (size_t q = 0; q + 1 < m->elements; q += 2) {
                    if (strcmp(m->element[q]->str, "num-other-sentinels") == 0)
                        others = atoi(m->element[q + 1]->str);
                    if (strcmp(m->element[q]->str, "num-slaves") == 0)
                        slaves = atoi(m->element[q + 1]->str);
                }
            ready = others == 2 && slaves == 1;
            if (m)
                freeReplyObject(m);
            if (c)
                redisFree(c);
        }
        if (ready)
            return true;
        sleep_ms(50);
    }
    fprintf(stderr, "hist_run: sentinel-net: the deployment never settled\n");
    return false;
}

/* The namespace index of the node on port (0 master as started, 1 replica), or -1. */
static int snet_index(int port)
{
    for (int i = 0; i < 2; i++)
        if (sent_nodes[i].port == port)
            return i;
    return -1;
}

/* ------------------------------------------------------------- the Cluster -------- */

#define CLUSTER_MAX 12
static server cl_nodes[CLUSTER_MAX]; /* as the wrapper started them (pid 0: not ours) */
static int ncl;

/* A reply to one command on one node (NULL: no answer). */
static redisReply *node_cmd(int port, const char *fmt, ...)
{
    redisContext *r = connect_port(port, 1000);
    if (!r)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    redisFree(r);
    return rep;
}

/* The port of the master of slot as the first node that answers says, or -1. */
static int slot_master(int slot)
{
    for (int i = 0; i < ncl; i++) {
        redisReply *rep = node_cmd(cl_nodes[i].port, "CLUSTER SLOTS");
        if (!rep)
            continue;
        int port = -1;
        if (rep->type == REDIS_REPLY_ARRAY)
            for (size_t k = 0; k < rep->elements; k++) {
                redisReply *e = rep->element[k];
                if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
                    e->element[0]->integer <= slot && slot <= e->element[1]->integer &&
                    e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 2)
                    port = (int)e->element[2]->element[1]->integer;
            }
        freeReplyObject(rep);
        if (port > 0)
            return port;
    }
    return -1;
}

/* The masters that answer ROLE "master" and serve slots: ports, how many. */
static int cluster_masters(int *ports)
{
    int n = 0;
    for (int i = 0; i < ncl; i++) {
        redisReply *rep = node_cmd(cl_nodes[i].port, "ROLE");
        bool master = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                      rep->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(rep->element[0]->str, "master") == 0;
        if (rep)
            freeReplyObject(rep);
        if (!master)
            continue;
        /* a master with no slots (an emptied one) is left out */
        rep = node_cmd(cl_nodes[i].port, "CLUSTER MYID");
        char id[64] = "";
        if (rep && rep->type == REDIS_REPLY_STRING)
            snprintf(id, sizeof id, "%s", rep->str);
        if (rep)
            freeReplyObject(rep);
        rep = node_cmd(cl_nodes[i].port, "CLUSTER NODES");
        bool slots = false;
        if (rep && rep->type == REDIS_REPLY_STRING && id[0]) {
            const char *line = strstr(rep->str, id);
            if (line) {
                const char *eol = strchr(line, '\n');
                int fields = 0;
                for (const char *c = line; c < (eol ? eol : line + strlen(line)); c++)
                    fields += *c == ' ';
                slots = fields >= 8;
            }
        }
        if (rep)
            freeReplyObject(rep);
        if (slots)
            ports[n++] = cl_nodes[i].port;
    }
    return n;
}

static void node_id(int port, char id[64])
{
    id[0] = 0;
    redisReply *rep = node_cmd(port, "CLUSTER MYID");
    if (rep && rep->type == REDIS_REPLY_STRING)
        snprintf(id, 64, "%s", rep->str);
    if (rep)
        freeReplyObject(rep);
}

/* A replica of the master on port that is in sync (ROLE: slave of it, connected), or -1. */
static int replica_of(int master)
{
    for (int i = 0; i < ncl; i++) {
        redisReply *rep = node_cmd(cl_nodes[i].port, "ROLE");
        int port = -1;
        if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 4 &&
            strcmp(rep->element[0]->str, "slave") == 0 && rep->element[2]->integer == master &&
            strcmp(rep->element[3]->str, "connected") == 0)
            port = cl_nodes[i].port;
        if (rep)
            freeReplyObject(rep);
        if (port > 0)
            return port;
    }
    return -1;
}

/* Every node that answers says cluster_state:ok and names port master of slot. */
static bool cluster_settled(int slot, int port)
{
    for (int i = 0; i < ncl; i++) {
        redisReply *rep = node_cmd(cl_nodes[i].port, "CLUSTER INFO");
        if (!rep)
            continue;
        bool ok = rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:ok");
        freeReplyObject(rep);
        if (!ok)
            return false;
    }
    return port < 0 || slot_master(slot) == port;
}

static int slot_of(const char *name)
{
    redisReply *rep = node_cmd(cl_nodes[0].port, "CLUSTER KEYSLOT %s", name);
    for (int i = 1; (!rep || rep->type != REDIS_REPLY_INTEGER) && i < ncl; i++) {
        if (rep)
            freeReplyObject(rep);
        rep = node_cmd(cl_nodes[i].port, "CLUSTER KEYSLOT %s", name);
    }
    int slot = rep && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    if (rep)
        freeReplyObject(rep);
    return slot;
}

/* Moves slot to the master on to, as redis-cli --cluster reshard does: IMPORTING on the
 * target, MIGRATING on the source, MIGRATE of its keys 10 at a time, then SETSLOT NODE on
 * the target, the source and every other master. Returns whether every step answered. */
static bool move_slot(int slot, int from, int to)
{
    char from_id[64], to_id[64];
    node_id(from, from_id);
    node_id(to, to_id);
    if (!from_id[0] || !to_id[0])
        return false;
    bool ok = true;
    redisReply *rep = node_cmd(to, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id);
    ok &= rep && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    rep = node_cmd(from, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id);
    ok &= rep && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    for (int round = 0; ok && round < 1000; round++) {
        rep = node_cmd(from, "CLUSTER GETKEYSINSLOT %d 10", slot);
        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
            ok = false;
            if (rep)
                freeReplyObject(rep);
            break;
        }
        size_t n = rep->elements;
        if (n == 0) {
            freeReplyObject(rep);
            break;
        }
        const char *argv[32];
        size_t lens[32];
        int c = 0;
        char port[16];
        snprintf(port, sizeof port, "%d", to);
        const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS"};
        for (int k = 0; k < 7; k++)
            argv[c++] = head[k];
        for (size_t k = 0; k < n; k++)
            argv[c++] = rep->element[k]->str;
        for (int k = 0; k < c; k++)
            lens[k] = strlen(argv[k]);
        redisContext *r = connect_port(from, 5000);
        redisReply *m = r ? redisCommandArgv(r, c, argv, lens) : NULL;
        ok &= m && m->type != REDIS_REPLY_ERROR;
        if (m && m->type == REDIS_REPLY_ERROR)
            fprintf(stderr, "hist_run: MIGRATE: %s\n", m->str);
        if (m)
            freeReplyObject(m);
        if (r)
            redisFree(r);
        freeReplyObject(rep);
    }
    /* the target first, then the source, then the others (as redis-cli does) */
    int order[CLUSTER_MAX], no = 0;
    order[no++] = to;
    order[no++] = from;
    int masters[CLUSTER_MAX];
    int nm = cluster_masters(masters);
    for (int k = 0; k < nm; k++)
        if (masters[k] != to && masters[k] != from)
            order[no++] = masters[k];
    for (int k = 0; k < no; k++) {
        rep = node_cmd(order[k], "CLUSTER SETSLOT %d NODE %s", slot, to_id);
        ok &= rep && rep->type != REDIS_REPLY_ERROR;
        if (rep)
            freeReplyObject(rep);
    }
    return ok;
}

/* The names of the objects the clients use (their slots are the nemesis' targets). */
static const char *object_name(const char *workload)
{
    if (strcmp(workload, "mutex") == 0 || strcmp(workload, "cli") == 0 ||
        strcmp(workload, "mutexshared") == 0)
        return "h:mutex";
    if (strcmp(workload, "fair") == 0)
        return "h:fair";
    if (strcmp(workload, "rw") == 0 || strcmp(workload, "rwshared") == 0)
        return "h:rw";
    if (strcmp(workload, "sem") == 0 || strcmp(workload, "semshared") == 0)
        return "h:sem";
    if (strcmp(workload, "permits") == 0)
        return "h:permits";
    if (strcmp(workload, "elect") == 0)
        return "h:elect";
    if (strcmp(workload, "barrier") == 0)
        return "h:barrier";
    return NULL;
}

/* The workload whose final read covers this one's semaphore (semshared's is sem's). */
static const char *final_object(const char *workload)
{
    return strcmp(workload, "semshared") == 0 ? "sem" : workload;
}

/* ------------------------------------------------------------- the nemesis --------- */

enum {
    F_PAUSE,
    F_PAUSE_LONG,
    F_KILL,
    F_SRVKILL,
    F_SRVKILL_NOAOF,
    F_CPAUSE,
    F_CKILL,
    F_FLUSH,
    F_FAILOVER,
    F_PARTITION,
    F_SLOW,
    F_SLOTMOVE,
    F_SRVPAUSE,
    F_RPARTITION,
    F_SPARTITION,
    F_OOM,
    F_EVICT,
    F_COUNT
};
static const char *fault_names[F_COUNT] = {
    "pause",    "pause-long", "kill",       "srvkill",   "srvkill-noaof", "cpause",
    "ckill",    "flush",      "failover",   "partition", "slow",          "slotmove",
    "srvpause", "rpartition", "spartition", "oom",       "evict"};
static int faults[F_COUNT];
static int nfaults;

static bool parse_nemesis(const char *list)
{
    if (strcmp(list, "none") == 0)
        return true;
    char buf[512];
    snprintf(buf, sizeof buf, "%s",
             strcmp(list, "all") == 0 ? "pause,pause-long,kill,srvkill,srvkill-noaof,cpause,"
                                        "ckill,flush,failover,slotmove"
                                      : list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int f;
        for (f = 0; f < F_COUNT; f++)
            if (strcmp(tok, fault_names[f]) == 0)
                break;
        if (f == F_COUNT) {
            fprintf(stderr, "hist_run: unknown fault %s\n", tok);
            return false;
        }
        if (f == F_FAILOVER && !sentinel_mode && !cluster_mode)
            continue; /* "all" on one server */
        if ((f == F_PARTITION || f == F_SLOW) && (sentinel_mode || cluster_mode) &&
            !(f == F_PARTITION && snet_mode))
            continue; /* network faults: single and sentinel-net (partition) only */
        if ((f == F_RPARTITION || f == F_SPARTITION) && !snet_mode)
            continue;
        if ((f == F_OOM || f == F_EVICT) && cluster_mode)
            continue; /* the filler's keys would have to follow the slots */
        if (f == F_SLOTMOVE && !cluster_mode)
            continue;
        if (f == F_SRVPAUSE && (sentinel_mode || cluster_mode))
            continue;
        faults[nfaults++] = f;
    }
    return true;
}

/* Every draw of a step is made up front, a fixed number per step, so that a seed's
 * schedule (fault, target, durations) does not depend on what the run did. */
typedef struct step {
    int64_t gap_ms;
    int fault;
    int target;      /* a client */
    int64_t ms;      /* a pause's or a CLIENT PAUSE's length, a server's downtime */
    int64_t wait_ms; /* before a killed client is started again */
} step;

static step draw(void)
{
    step st;
    st.gap_ms = rnd_in(1000, 3000);
    st.fault = nfaults ? faults[rnd() % (uint64_t)nfaults] : -1;
    st.target = (int)(rnd() % (uint64_t)nclients);
    uint64_t r = rnd();
    switch (st.fault) {
    case F_PAUSE:
        st.ms = 100 + (int64_t)(r % 701);
        break;
    case F_PAUSE_LONG:
        st.ms = 4000 + (int64_t)(r % 1501);
        break;
    case F_SRVKILL:
    case F_SRVKILL_NOAOF:
        st.ms = (int64_t)(r % (sentinel_mode ? 4001 : 1501));
        break;
    case F_PARTITION:
        st.ms = 500 + (int64_t)(r % 5501);
        break;
    case F_SLOW:
        st.ms = 1000 + (int64_t)(r % 3001);
        break;
    case F_SRVPAUSE:
        st.ms = 100 + (int64_t)(r % 4901);
        break;
    case F_RPARTITION:
        st.ms = 1000 + (int64_t)(r % 5001);
        break;
    case F_SPARTITION:
        st.ms = 2000 + (int64_t)(r % 6001);
        break;
    case F_OOM:
    case F_EVICT:
        st.ms = 500 + (int64_t)(r % 3501);
        break;
    default:
        st.ms = 100 + (int64_t)(r % 1401);
    }
    st.wait_ms = rnd_in(50, 500);
    return st;
}

static long restarts;

static void kill_server(bool keep_data, int64_t down_ms)
{
    int port = master_port();
    server *s = port > 0 ? node_of_port(port) : NULL;
    pid_t pid = port > 0 ? pid_of_port(port) : -1;
    if (!s || pid <= 0) {
        nemesis_event("srvkill", "fail", -1, keep_data);
        return;
    }
    /* Sentinel: the node comes back empty (no AOF), as master if the sentinels have not
     * failed over yet, and a failover loses what the replica had not received: either
     * may lose the data */
    /* Redlock: one member's server; VALUE 2 when it lost its data (one of three: a hold
     * of all three members survives it, so the checkers do not count it as a loss of the
     * lock; a hold of a bare majority does not, and its holder is told: see EX_MEMBER) */
    int64_t value = sentinel_mode ? 0 : redlock_mode ? (keep_data ? 1 : 2) : keep_data;
    nemesis_event("srvkill", "invoke", -1, value);
    kill(pid, SIGKILL);
    if (s->pid == pid)
        waitpid(pid, NULL, 0);
    else
        for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
            sleep_ms(10);
    if (!keep_data) {
        char aof[400];
        snprintf(aof, sizeof aof, "%s/appendonlydir", s->dir);
        rm_rf(aof);
    }
    sleep_ms(down_ms);
    bool up = restart_server(s);
    /* Sentinel: the end of the loss is when the deployment has settled again */
    for (int k = 0; sentinel_mode && up && k < 200 && !master_has_replica(); k++)
        sleep_ms(50);
    nemesis_event("srvup", up ? "ok" : "fail", -1, value);
    restarts++;
}

/* ------------------------------------------------------------- Cluster faults ----- */

static const char *objects[8];
static int nobjects;

/* The slot of the object the step aims at (its target modulo the objects), or -1. */
static int target_slot(const step *st, const char **name)
{
    if (nobjects == 0)
        return -1;
    *name = objects[st->target % nobjects];
    return slot_of(*name);
}

static server *cl_node(int port)
{
    for (int i = 0; i < ncl; i++)
        if (cl_nodes[i].port == port)
            return &cl_nodes[i];
    return NULL;
}

/* Waits (up to 10 s) until the Cluster has settled: every node ok, the slot served, and
 * its master with a replica in sync. */
static bool cluster_settle(int slot)
{
    for (int k = 0; k < 200; k++) {
        int m = slot_master(slot);
        if (m > 0 && cluster_settled(slot, m) && replica_of(m) > 0)
            return true;
        sleep_ms(50);
    }
    return false;
}

/* kill -9 of the master of the target's slot; the Cluster fails over by itself (its
 * replica takes the slots after cluster-node-timeout); the node is started again after
 * down_ms (no AOF: empty, it rejoins as a replica, or as the master if it came back
 * before the failover, with nothing). Either may lose the data: VALUE 0. */
static void cluster_kill(const step *st)
{
    const char *name = "";
    int slot = target_slot(st, &name);
    int port = slot >= 0 ? slot_master(slot) : -1;
    server *s = port > 0 ? cl_node(port) : NULL;
    pid_t pid = port > 0 ? pid_of_port(port) : -1;
    if (!s || pid <= 0) {
        nemesis_event("srvkill", "fail", -1, 0);
        return;
    }
    nemesis_event("srvkill", "invoke", -1, 0);
    kill(pid, SIGKILL);
    if (s->pid == pid)
        waitpid(pid, NULL, 0);
    else
        for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
            sleep_ms(10);
    sleep_ms(st->ms);
    bool up = restart_server(s);
    up &= cluster_settle(slot);
    nemesis_event("srvup", up ? "ok" : "fail", -1, 0);
    restarts++;
}

/* CLUSTER FAILOVER on a replica of the target slot's master: a coordinated switch (the
 * master stops its clients until the replica has caught up), which loses nothing: VALUE 1.
 * Its end: every node names the replica master of the slot, and it has a replica again. */
static void cluster_failover(const step *st)
{
    const char *name = "";
    int slot = target_slot(st, &name);
    int master = slot >= 0 ? slot_master(slot) : -1;
    int replica = master > 0 ? replica_of(master) : -1;
    if (replica < 0) {
        nemesis_event("failover", "fail", -1, 1);
        return;
    }
    nemesis_event("failover", "invoke", -1, 1);
    redisReply *rep = node_cmd(replica, "CLUSTER FAILOVER");
    bool ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep)
        freeReplyObject(rep);
    bool switched = false;
    for (int k = 0; ok && k < 200 && !switched; k++) {
        switched = cluster_settled(slot, replica);
        if (!switched)
            sleep_ms(50);
    }
    for (int k = 0; switched && k < 200 && replica_of(replica) < 0; k++)
        sleep_ms(50);
    nemesis_event("failover", ok && switched ? "ok" : "fail", -1, 1);
}

/* The target's slot moved to another master (MIGRATE of its keys while clients use them:
 * ASK and TRYAGAIN meanwhile). VALUE = the slot. */
static void cluster_slotmove(const step *st)
{
    const char *name = "";
    int slot = target_slot(st, &name);
    int from = slot >= 0 ? slot_master(slot) : -1;
    int masters[CLUSTER_MAX];
    int n = cluster_masters(masters), to = -1;
    for (int k = 0; k < n && to < 0; k++)
        if (masters[(k + st->target) % n] != from)
            to = masters[(k + st->target) % n];
    if (from < 0 || to < 0) {
        nemesis_event("slotmove", "fail", -1, slot);
        return;
    }
    nemesis_event("slotmove", "invoke", -1, slot);
    bool ok = move_slot(slot, from, to);
    for (int k = 0; ok && k < 200 && !cluster_settled(slot, to); k++)
        sleep_ms(50);
    nemesis_event("slotmove", ok ? "ok" : "fail", -1, slot);
}

/* Memory pressure on the master (Redlock: one server): maxmemory set just above what it
 * uses, then a filler writes 4 KB values until the server refuses (noeviction: "oom",
 * acquisitions get BATON_ENOMEM, renewals and releases go on) or, with allkeys-lru
 * ("evict", a policy the guarantees exclude: the locks' keys may be evicted, a loss, VALUE
 * 0), until it has written twice the headroom; held for ms, then the filler's keys are
 * deleted and the limits restored. */
static void memory_pressure(bool evict, int64_t ms)
{
    const char *op = evict ? "evict" : "oom";
    int port = master_port();
    redisContext *r = port > 0 ? connect_port(port, 2000) : NULL;
    if (!r) {
        nemesis_event(op, "fail", -1, evict ? 0 : 1);
        return;
    }
    long long used = 0;
    redisReply *rep = redisCommand(r, "INFO memory");
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *u = strstr(rep->str, "used_memory:");
        if (u)
            used = atoll(u + 12);
    }
    if (rep)
        freeReplyObject(rep);
    nemesis_event(op, "invoke", -1, evict ? 0 : 1);
    long long headroom = 256 * 1024;
    rep = redisCommand(r, "CONFIG SET maxmemory-policy %s", evict ? "allkeys-lru" : "noeviction");
    if (rep)
        freeReplyObject(rep);
    rep = redisCommand(r, "CONFIG SET maxmemory %lld", used + headroom);
    if (rep)
        freeReplyObject(rep);
    static char value[4096];
    memset(value, 'x', sizeof value - 1);
    int n = 0;
    for (; n < 2 * headroom / 4096 + 64; n++) {
        rep = redisCommand(r, "SET hist:fill:%d %s", n, value);
        bool refused = !rep || rep->type == REDIS_REPLY_ERROR;
        if (rep)
            freeReplyObject(rep);
        if (refused)
            break;
    }
    sleep_ms(ms);
    for (int k = 0; k <= n; k++) {
        rep = redisCommand(r, "DEL hist:fill:%d", k);
        if (rep)
            freeReplyObject(rep);
    }
    rep = redisCommand(r, "CONFIG SET maxmemory 0");
    bool ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep)
        freeReplyObject(rep);
    rep = redisCommand(r, "CONFIG SET maxmemory-policy noeviction");
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    nemesis_event(op, ok ? "ok" : "fail", -1, evict ? 0 : 1);
}

static void inject(const step *st)
{
    int i = st->target;
    rl_target = st->target % 3;
    switch (st->fault) {
    case F_SRVPAUSE: {
        /* SIGSTOP of the server (Redlock: one of the three) for 0.1-5 s */
        int port = master_port();
        pid_t pid = port > 0 ? pid_of_port(port) : -1;
        if (pid <= 0) {
            nemesis_event("srvpause", "fail", -1, st->ms);
            return;
        }
        nemesis_event("srvpause", "invoke", -1, st->ms);
        kill(pid, SIGSTOP);
        sleep_ms(st->ms);
        kill(pid, SIGCONT);
        nemesis_event("srvpause", "ok", -1, st->ms);
        break;
    }
    case F_PAUSE:
    case F_PAUSE_LONG: {
        bool long_ = st->fault == F_PAUSE_LONG;
        if (clients[i].pid <= 0) {
            nemesis_event("pause", "fail", i, long_);
            return;
        }
        nemesis_event("pause", "invoke", i, long_);
        /* a cli client: its group, the baton it runs with it */
        pid_t target = strcmp(clients[i].workload, "cli") == 0 ? -clients[i].pid : clients[i].pid;
        if (kill(target, SIGSTOP) != 0)
            kill(clients[i].pid, SIGSTOP);
        clients[i].stopped = true;
        sleep_ms(st->ms);
        kill(target, SIGCONT);
        kill(clients[i].pid, SIGCONT);
        clients[i].stopped = false;
        nemesis_event("pause", "ok", i, long_);
        break;
    }
    case F_KILL: {
        if (clients[i].pid <= 0) {
            nemesis_event("kill", "fail", i, clients[i].inc);
            return;
        }
        nemesis_event("kill", "invoke", i, clients[i].inc);
        kill(clients[i].pid, SIGKILL);
        waitpid(clients[i].pid, NULL, 0);
        clients[i].pid = 0;
        sleep_ms(st->wait_ms);
        clients[i].inc++;
        spawn_client(i);
        break;
    }
    case F_SRVKILL:
    case F_SRVKILL_NOAOF:
        if (cluster_mode)
            cluster_kill(st);
        else
            kill_server(st->fault == F_SRVKILL, st->ms);
        break;
    case F_SLOTMOVE:
        cluster_slotmove(st);
        break;
    case F_OOM:
    case F_EVICT:
        memory_pressure(st->fault == F_EVICT, st->ms);
        break;
    case F_RPARTITION: {
        /* the current master from its replica */
        int m = snet_index(master_port());
        bool ok = m >= 0 && snet_block(m, 1 - m);
        nemesis_event("rpartition", ok ? "invoke" : "fail", -1, st->ms);
        if (ok) {
            sleep_ms(st->ms);
            snet_heal();
            nemesis_event("rpartition", "ok", -1, st->ms);
        } else {
            snet_heal();
        }
        break;
    }
    case F_SPARTITION: {
        /* the current master and one sentinel (a minority) from the replica, the two other
         * sentinels and the clients' namespace: the majority fails over */
        int m = snet_index(master_port());
        int sen = 2 + st->target % 3;
        bool ok = m >= 0;
        for (int k = 0; k < SNET_N && ok; k++)
            if (k != m && k != sen)
                ok = snet_block(m, k) && snet_block(sen, k);
        nemesis_event("spartition", ok ? "invoke" : "fail", -1, st->ms);
        if (ok) {
            sleep_ms(st->ms);
            snet_heal();
            nemesis_event("spartition", "ok", -1, st->ms);
        } else {
            snet_heal();
        }
        break;
    }
    case F_CPAUSE: {
        int64_t ms = client_timeout_ms + st->ms;
        nemesis_event("cpause", "invoke", -1, ms);
        bool ok = master_cmd("CLIENT PAUSE %lld ALL", (long long)ms);
        sleep_ms(ms);
        nemesis_event("cpause", ok ? "ok" : "fail", -1, ms);
        break;
    }
    case F_CKILL: {
        bool ok = master_cmd("CLIENT KILL TYPE normal") && master_cmd("CLIENT KILL TYPE pubsub");
        nemesis_event("ckill", ok ? "ok" : "fail", -1, 0);
        break;
    }
    case F_FLUSH: {
        bool ok = master_cmd("SCRIPT FLUSH");
        nemesis_event("flush", ok ? "ok" : "fail", -1, 0);
        break;
    }
    case F_PARTITION:
        if (snet_mode) {
            /* the clients' namespace from the current master */
            int m = snet_index(master_port());
            bool ok = m >= 0 && snet_block(5, m);
            for (int k = 0; k < nclients; k++)
                if (k % 3 == 1)
                    nemesis_event("partition", ok ? "invoke" : "fail", k, st->ms);
            if (!ok) {
                snet_heal();
                break;
            }
            sleep_ms(st->ms);
            snet_heal();
            for (int k = 0; k < nclients; k++)
                if (k % 3 == 1)
                    nemesis_event("partition", "ok", k, st->ms);
            break;
        }
        /* fall through */
    case F_SLOW: {
        /* the namespace's clients from the lock server: every packet dropped, or squeezed
         * through 16 kbit/s; one event per client it reaches */
        const char *op = st->fault == F_PARTITION ? "partition" : "slow";
        bool ok = st->fault == F_PARTITION ? net_set("8bit", 1) : net_set("16kbit", 1000);
        for (int k = 0; k < nclients; k++)
            if (k % 3 == 1)
                nemesis_event(op, ok ? "invoke" : "fail", k, st->ms);
        if (!ok)
            break;
        sleep_ms(st->ms);
        net_set("10gbit", 1000);
        for (int k = 0; k < nclients; k++)
            if (k % 3 == 1)
                nemesis_event(op, "ok", k, st->ms);
        break;
    }
    case F_FAILOVER: {
        if (cluster_mode) {
            cluster_failover(st);
            break;
        }
        bool ok = false;
        int old_master = master_port();
        nemesis_event("failover", "invoke", -1, sync_replicas > 0);
        for (int k = 0; k < 3 && !ok; k++) {
            redisContext *r = connect_port(sentinel_ports[k], 1000);
            if (!r)
                continue;
            redisReply *rep = redisCommand(r, "SENTINEL FAILOVER mymaster");
            ok = rep && rep->type == REDIS_REPLY_STATUS;
            if (rep)
                freeReplyObject(rep);
            redisFree(r);
        }
        /* its end: the switch done and the deployment settled (a new master with its
         * replica online), within 10 s; failovers back to back never complete */
        for (int k = 0; ok && k < 200 && master_port() == old_master; k++)
            sleep_ms(50);
        for (int k = 0; ok && k < 200 && !master_has_replica(); k++)
            sleep_ms(50);
        nemesis_event("failover", ok ? "ok" : "fail", -1, sync_replicas > 0);
        break;
    }
    }
}

static int last_master = -1;
static int64_t prev_fault_t;

/* Logs a failover over [since, now] if the master changed since the last look. */
static void check_switch(int64_t since)
{
    int port = master_port();
    if (port <= 0 || last_master <= 0 || port == last_master) {
        if (port > 0)
            last_master = port;
        return;
    }
    for (int k = 0; k < 200 && !master_has_replica(); k++)
        sleep_ms(50);
    nemesis_event_at(since, "failover", "invoke", -1, sync_replicas > 0);
    nemesis_event("failover", "ok", -1, sync_replicas > 0);
    last_master = master_port();
}

/* ------------------------------------------------------------- main ---------------- */

static void usage(void)
{
    fprintf(stderr, "usage: hist_run --seed S --time SECONDS --nemesis LIST|all|none "
                    "--deployment single|sentinel|sentinel-net|cluster|redlock [--clients "
                    "mutex:4,...] [--keep DIR] "
                    "[--client PATH] [--skew RATE] [--stock N]\n");
    exit(2);
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

int main(int argc, char **argv)
{
    const char *nemesis = "none", *deployment = "single", *keep = NULL;
    const char *spec = NULL;
    int64_t seconds = 30;
    long long stock = 0;
    seed = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--seed") == 0)
            seed = atoll(argv[++i]);
        else if (strcmp(argv[i], "--time") == 0)
            seconds = atoll(argv[++i]);
        else if (strcmp(argv[i], "--nemesis") == 0)
            nemesis = argv[++i];
        else if (strcmp(argv[i], "--deployment") == 0)
            deployment = argv[++i];
        else if (strcmp(argv[i], "--clients") == 0)
            spec = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0)
            keep = argv[++i];
        else if (strcmp(argv[i], "--client") == 0)
            client_path = argv[++i];
        else if (strcmp(argv[i], "--skew") == 0)
            skew = argv[++i];
        else if (strcmp(argv[i], "--stock") == 0)
            stock = atoll(argv[++i]);
        else
            usage();
    }
    if (strcmp(deployment, "sentinel") == 0)
        sentinel_mode = true;
    else if (strcmp(deployment, "sentinel-net") == 0)
        sentinel_mode = snet_mode = true;
    else if (strcmp(deployment, "cluster") == 0)
        cluster_mode = true;
    else if (strcmp(deployment, "redlock") == 0)
        redlock_mode = true;
    else if (strcmp(deployment, "single") != 0)
        usage();
    if (!spec)
        spec = redlock_mode ? "redlock:6"
                            : "mutex:4,cli:2,fair:3,rw:3,sem:4,permits:5,latch:4,elect:3,barrier:3";
    if (!parse_nemesis(nemesis))
        return 2;
    if (skew && access(FAKETIME_LIB, R_OK) != 0) {
        fprintf(stderr, "hist_run: --skew needs libfaketime (%s)\n", FAKETIME_LIB);
        return 2;
    }
    static char default_client[512];
    if (!client_path) {
        snprintf(default_client, sizeof default_client, "%s", argv[0]);
        char *slash = strrchr(default_client, '/');
        snprintf(slash ? slash + 1 : default_client,
                 sizeof default_client - (size_t)(slash ? slash + 1 - default_client : 0),
                 "hist_client");
        client_path = default_client;
    }
    rng = (unsigned long long)seed * 0x2545F4914F6CDD1Dull + 12345;
    const char *t = getenv("HIST_CMD_TIMEOUT_MS");
    if (t)
        client_timeout_ms = atoll(t);
    t = getenv("HIST_SYNC_REPLICAS");
    if (t)
        sync_replicas = atoi(t);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    if (keep) {
        snprintf(workdir, sizeof workdir, "%s", keep);
        mkdir(workdir, 0755);
    } else {
        snprintf(workdir, sizeof workdir, "/tmp/baton-hist.XXXXXX");
        if (!mkdtemp(workdir))
            return 3;
    }
    bool want_net = false;
    for (int k = 0; k < nfaults; k++)
        want_net |= faults[k] == F_PARTITION || faults[k] == F_SLOW;
    owner_pid = getpid();
    atexit(net_teardown_at_exit);
    if (snet_mode) {
        if (!snet_setup()) {
            fprintf(stderr, "hist_run: sentinel-net: network namespaces unusable (above)\n");
            snet_teardown();
            return 3;
        }
    } else if (want_net && !net_setup()) {
        fprintf(stderr, "hist_run: network namespaces unavailable (ip netns): no network faults\n");
        net_teardown();
        net_ip[0] = 0;
    }
    /* the resource server: the clock of the history and the fenced store */
    snprintf(resource.dir, sizeof resource.dir, "%s/resource", workdir);
    mkdir(resource.dir, 0755);
    if (!start_server(&resource)) {
        fprintf(stderr, "hist_run: could not start the resource server\n");
        return 3;
    }
    if (snet_mode) {
        if (!snet_start()) {
            snet_teardown();
            stop_server(&sent_nodes[0]);
            stop_server(&sent_nodes[1]);
            stop_server(&resource);
            return 3;
        }
    } else if (sentinel_mode) {
        const char *ports = getenv("HIST_SENTINEL_PORTS");
        const char *m = getenv("HIST_SENTINEL_MASTER"), *rp = getenv("HIST_SENTINEL_REPLICA");
        const char *dir = getenv("HIST_SENTINEL_DIR");
        if (!ports || !m || !rp || !dir ||
            sscanf(ports, "%d %d %d", &sentinel_ports[0], &sentinel_ports[1], &sentinel_ports[2]) !=
                3) {
            fprintf(stderr, "hist_run: --deployment sentinel needs tests/histories/run\n");
            stop_server(&resource);
            return 2;
        }
        sent_nodes[0].port = atoi(m);
        sent_nodes[1].port = atoi(rp);
        snprintf(sent_nodes[0].dir, sizeof sent_nodes[0].dir, "%s/master", dir);
        snprintf(sent_nodes[1].dir, sizeof sent_nodes[1].dir, "%s/replica", dir);
        snprintf(lock_url, sizeof lock_url,
                 "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/mymaster",
                 sentinel_ports[0], sentinel_ports[1], sentinel_ports[2]);
    } else if (redlock_mode) {
        int len = 0;
        for (int i = 0; i < 3; i++) {
            snprintf(rl_nodes[i].dir, sizeof rl_nodes[i].dir, "%s/server%d", workdir, i);
            mkdir(rl_nodes[i].dir, 0755);
            rl_nodes[i].aof = true;
            if (!start_server(&rl_nodes[i])) {
                fprintf(stderr, "hist_run: could not start Redlock server %d\n", i);
                return 3;
            }
            len += snprintf(lock_url + len, sizeof lock_url - (size_t)len, "%sredis://127.0.0.1:%d",
                            i ? "," : "", rl_nodes[i].port);
        }
    } else if (cluster_mode) {
        const char *ports = getenv("HIST_CLUSTER_PORTS"), *dir = getenv("HIST_CLUSTER_DIR");
        if (!ports || !dir) {
            fprintf(stderr, "hist_run: --deployment cluster needs tests/histories/run\n");
            stop_server(&resource);
            return 2;
        }
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ports);
        int len = snprintf(lock_url, sizeof lock_url, "redis+cluster://");
        for (char *tok = strtok(buf, " "); tok && ncl < CLUSTER_MAX; tok = strtok(NULL, " ")) {
            server *n = &cl_nodes[ncl++];
            n->port = atoi(tok);
            n->cluster = true;
            snprintf(n->dir, sizeof n->dir, "%s/%d", dir, n->port);
            len += snprintf(lock_url + len, sizeof lock_url - (size_t)len, "%s127.0.0.1:%d",
                            ncl > 1 ? "," : "", n->port);
        }
    } else {
        snprintf(single.dir, sizeof single.dir, "%s/server", workdir);
        mkdir(single.dir, 0755);
        single.aof = true;
        if (!start_server(&single)) {
            fprintf(stderr, "hist_run: could not start the lock server\n");
            stop_server(&resource);
            return 3;
        }
        snprintf(lock_url, sizeof lock_url, "redis://127.0.0.1:%d", single.port);
        if (net_ip[0] && !net_filter(single.port))
            fprintf(stderr, "hist_run: tc (htb, u32) unavailable: no network faults\n");
    }
    char path[400];
    snprintf(path, sizeof path, "%s/nemesis.hist", workdir);
    nem = fopen(path, "w");
    if (!nem)
        return 3;
    if (stock > 0) {
        if (!mdb_start(stock)) {
            mdb_stop();
            return 3;
        }
        setenv("HIST_MARIADB_SOCKET", mdb_sock, 1);
        fprintf(nem, "%" PRId64 " %" PRId64 " 2000 0 stock init ok 0 0 %lld\n", srv_us(), mono_ns(),
                stock);
        fflush(nem);
    }

    /* the clients */
    char specbuf[512];
    snprintf(specbuf, sizeof specbuf, "%s", spec);
    for (char *tok = strtok(specbuf, ","); tok; tok = strtok(NULL, ",")) {
        char *colon = strchr(tok, ':');
        int n = colon ? atoi(colon + 1) : 1;
        if (colon)
            *colon = 0;
        if (strcmp(tok, "latch") == 0)
            latch_base = nclients;
        if (strcmp(tok, "barrier") == 0) {
            /* every barrier client is a party of h:barrier */
            char parties[16];
            snprintf(parties, sizeof parties, "%d", n);
            setenv("HIST_BARRIER_PARTIES", parties, 1);
        }
        for (int k = 0; k < n && nclients < MAX_CLIENTS; k++) {
            snprintf(clients[nclients].workload, sizeof clients[nclients].workload, "%s", tok);
            nclients++;
        }
    }
    for (int i = 0; i < nclients; i++) {
        const char *o = object_name(clients[i].workload);
        bool seen = !o;
        for (int k = 0; k < nobjects && !seen; k++)
            seen = strcmp(objects[k], o) == 0;
        if (!seen && nobjects < 8)
            objects[nobjects++] = o;
    }
    int64_t start = srv_us();
    end_us = start + seconds * 1000000;
    for (int i = 0; i < nclients; i++)
        spawn_client(i);

    /* the nemesis: a fault every 1 to 3 s, none in the first and the last 2 s */
    last_master = master_port();
    prev_fault_t = srv_us();
    long injected = 0;
    while (!interrupted && srv_us() < end_us - 2000000) {
        step st = draw();
        sleep_ms(st.gap_ms);
        reap();
        if (st.fault < 0 || srv_us() >= end_us - 2000000)
            continue;
        /* Sentinel: a fault that made the sentinels fail over by themselves (a CLIENT PAUSE
         * past down-after-milliseconds, a master killed) is a failover too, from the start
         * of the fault before it was seen (the sentinels take seconds) until the deployment
         * settled */
        int64_t t0 = srv_us();
        if (sentinel_mode)
            check_switch(prev_fault_t);
        prev_fault_t = t0;
        inject(&st);
        if (sentinel_mode && st.fault != F_FAILOVER)
            check_switch(t0);
        else if (sentinel_mode)
            last_master = master_port();
        injected++;
    }
    if (sentinel_mode)
        check_switch(prev_fault_t);
    /* the clients end by themselves (each bounded by its longest operation) */
    int64_t deadline = mono_ns() + 30 * 1000000000ll;
    while (reap() > 0 && mono_ns() < deadline && !interrupted)
        sleep_ms(50);
    for (int i = 0; i < nclients; i++)
        if (clients[i].pid > 0) {
            fprintf(stderr, "hist_run: client %d.%d did not end: killed\n", i, clients[i].inc);
            kill(clients[i].pid, SIGCONT);
            kill(clients[i].pid, SIGKILL);
            waitpid(clients[i].pid, NULL, 0);
        }
    /* no permit lost: every client stopped, the leases end; one read of each semaphore */
    for (int i = 0; i < nclients && !interrupted; i++) {
        const char *w = final_object(clients[i].workload);
        bool first = true;
        for (int k = 0; k < i; k++)
            first &= strcmp(final_object(clients[k].workload), w) != 0;
        if (first && (strcmp(w, "sem") == 0 || strcmp(w, "permits") == 0))
            run_final(w, 1000 + i);
    }
    if (mdb_pid > 0) {
        char out[128] = "";
        long long qty = -1, fence = -1;
        bool read = mdb_sql("SELECT qty, fence FROM h.stock WHERE id = 1", out, sizeof out) == 0 &&
                    sscanf(out, "%lld %lld", &qty, &fence) == 2;
        fprintf(nem, "%" PRId64 " %" PRId64 " 2000 0 stock final %s %lld 0 %lld\n", srv_us(),
                mono_ns(), read ? "ok" : "info", fence, qty);
        mdb_stop();
    }
    fclose(nem);
    if (sentinel_mode) {
        /* the nodes this runner started again are its own to stop */
        for (int i = 0; i < 2; i++)
            stop_server(&sent_nodes[i]);
    } else if (cluster_mode) {
        for (int i = 0; i < ncl; i++)
            stop_server(&cl_nodes[i]);
    } else if (redlock_mode) {
        for (int i = 0; i < 3; i++)
            stop_server(&rl_nodes[i]);
    } else {
        stop_server(&single);
    }
    stop_server(&resource);
    if (snet_mode) {
        net_ns[0] = 0; /* the clients' namespace is snet's */
        snet_teardown();
    }
    net_teardown();

    /* merge and check */
    hist h = {0};
    bool readable = true;
    DIR *d = opendir(workdir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".hist") == 0) {
            snprintf(path, sizeof path, "%s/%s", workdir, de->d_name);
            readable &= hist_read_file(&h, path);
        }
    }
    if (d)
        closedir(d);
    hist_sort(&h);
    snprintf(path, sizeof path, "%s/history.txt", workdir);
    FILE *merged = fopen(path, "w");
    for (size_t i = 0; merged && i < h.n; i++)
        hist_print_event(merged, &h.ev[i]);
    if (merged)
        fclose(merged);
    hist_params p;
    hist_params_default(&p);
    t = getenv("HIST_WATCHDOG_MS");
    if (t)
        p.watchdog_ms = atoll(t);
    t = getenv("HIST_BARRIER_PARTIES");
    if (t)
        p.barrier_parties = atoi(t);
    long bad = hist_check_all(&h, &p, stdout);
    hist_counts c;
    hist_count(&h, &c);
    printf("counts seed %lld deployment %s nemesis %s time %" PRId64 " s: operations %ld ok %ld "
           "fail %ld unknown %ld faults %ld (server restarts %ld)\n",
           seed, deployment, nemesis, seconds, c.ops, c.ok, c.fail, c.info, c.faults, restarts);
    /* a history with a violation is kept, to be looked at */
    printf("history %s\n", keep || bad ? path : "(removed; --keep DIR keeps it)");
    hist_free(&h);
    if (!keep && !bad)
        rm_rf(workdir);
    if (!readable)
        fprintf(stderr, "hist_run: a history could not be read\n");
    (void)injected;
    return bad ? 1 : interrupted ? 130 : 0;
}
