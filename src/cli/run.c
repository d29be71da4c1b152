/*
 * Signals and COMMAND. baton blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD in every thread
 * from the start (the library's threads inherit the mask) and reads them from one
 * signalfd, so no signal lands in a library thread and nothing runs in a signal handler.
 *
 * Until COMMAND starts, a guard thread reads the signalfd: while baton is only waiting
 * (for a connection, a lock, permits, a latch) an interrupt ends it at once with 128 + N,
 * as if the signal had its default action; once baton holds something, the signal is
 * recorded instead, so that the hold is released before baton exits.
 *
 * While COMMAND runs, the main thread poll()s the signalfd (SIGCHLD: COMMAND exited;
 * SIGINT/SIGTERM/SIGHUP: forward them), the lock-lost descriptors the library gives, and
 * the end of a fixed lease. On a loss it stops COMMAND: a job must not go on believing it
 * is protected. Nor may COMMAND outlive baton: it is started with PR_SET_PDEATHSIG
 * (SIGTERM when baton dies, even by SIGKILL), and a small reaper process sends it SIGKILL
 * if it is still running --kill-after later.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The signals baton forwards; SIGCHLD is watched too. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};

static struct {
    sigset_t orig_mask;       /* the mask baton was started with: COMMAND gets it back */
    bool orig_ignored[NSIG];  /* signals baton was started with ignored: not forwarded */
    bool pipe_was_default;    /* SIGPIPE had its default action (baton ignores it) */
    int sfd;                  /* signalfd for SIGINT, SIGTERM, SIGHUP, SIGCHLD */
    unsigned char *inherited; /* bitmap of the descriptors open when baton started */
    int n_inherited;

    /* the guard */
    pthread_t thread;
    bool running;
    int stop[2];        /* pipe: the main thread writes to end the guard */
    pthread_mutex_t mu; /* protects holding and pending */
    bool holding;
    int pending;
} sig = {.sfd = -1, .stop = {-1, -1}, .mu = PTHREAD_MUTEX_INITIALIZER};

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool is_forwarded(int signo)
{
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        if (forwarded[i] == signo)
            return true;
    return false;
}

/* ------------------------------- descriptors ------------------------------------------ */

/* Remembers which descriptors baton inherited: COMMAND inherits those too (a script may
 * pass it a descriptor on purpose), but not the library's connections. */
static void snapshot_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return; /* no /proc: the library's descriptors leak into COMMAND, harmlessly */
    int dfd = dirfd(d), max = -1;
    int fds[1024], n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dfd || n == 1024)
            continue;
        fds[n++] = fd;
        if (fd > max)
            max = fd;
    }
    closedir(d);
    sig.n_inherited = max + 1;
    sig.inherited = calloc((size_t)max / 8 + 1, 1);
    if (!sig.inherited) {
        sig.n_inherited = 0;
        return;
    }
    for (int i = 0; i < n; i++)
        sig.inherited[fds[i] / 8] |= (unsigned char)(1u << (fds[i] % 8));
}

static bool inherited(int fd)
{
    return fd < sig.n_inherited && (sig.inherited[fd / 8] & (1u << (fd % 8)));
}

/* Marks every descriptor opened since baton started close-on-exec. */
static void cloexec_new_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d || !sig.inherited) {
        if (d)
            closedir(d);
        return;
    }
    int dfd = dirfd(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd <= 2 || fd == dfd || inherited(fd))
            continue;
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC))
            fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    closedir(d);
}

/* ------------------------------- the guard -------------------------------------------- */

static void *guard_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p[2] = {{sig.sfd, POLLIN, 0}, {sig.stop[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (p[1].revents)
            return NULL;
        struct signalfd_siginfo si;
        if (read(sig.sfd, &si, sizeof si) != (ssize_t)sizeof si)
            continue;
        int signo = (int)si.ssi_signo;
        if (!is_forwarded(signo) || sig.orig_ignored[signo])
            continue; /* SIGCHLD: no child yet; or a signal baton was told to ignore */
        pthread_mutex_lock(&sig.mu);
        if (!sig.holding) {
            /* Only waiting: end like the signal's default action would, with its code. */
            fprintf(stderr, "baton: interrupted by SIG%s while waiting\n", sigabbrev_np(signo));
            _exit(EXIT_SIGNAL_BASE + signo);
        }
        if (!sig.pending)
            sig.pending = signo;
        pthread_mutex_unlock(&sig.mu);
    }
}

int cli_signals_init(void)
{
    snapshot_fds();
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&set, forwarded[i]);
    sigaddset(&set, SIGCHLD);
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
            sig.orig_ignored[s] = true;
    }
    struct sigaction ign = {0}, old;
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    sig.pipe_was_default = old.sa_handler == SIG_DFL;

    int rc = pthread_sigmask(SIG_BLOCK, &set, &sig.orig_mask);
    if (rc != 0) {
        cli_error("blocking signals: %s", strerror(rc));
        return -1;
    }
    sig.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sig.sfd < 0 || pipe2(sig.stop, O_CLOEXEC) != 0) {
        cli_error("signalfd: %s", strerror(errno));
        return -1;
    }
    rc = pthread_create(&sig.thread, NULL, guard_main, NULL);
    if (rc != 0) {
        cli_error("starting a thread: %s", strerror(rc));
        return -1;
    }
    sig.running = true;
    return 0;
}

void cli_guard_hold(void)
{
    pthread_mutex_lock(&sig.mu);
    sig.holding = true;
    pthread_mutex_unlock(&sig.mu);
}

int cli_guard_stop(void)
{
    if (sig.running) {
        ssize_t w;
        do
            w = write(sig.stop[1], "x", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(sig.thread, NULL);
        sig.running = false;
    }
    pthread_mutex_lock(&sig.mu);
    int pending = sig.pending;
    sig.pending = 0;
    pthread_mutex_unlock(&sig.mu);
    return pending;
}

/* ------------------------------- COMMAND ---------------------------------------------- */

int cli_hold(const cli_watch *w)
{
    int pending = cli_guard_stop();
    if (pending)
        return EXIT_OK;
    struct pollfd p[1 + 64];
    size_t np = 1;
    p[0] = (struct pollfd){sig.sfd, POLLIN, 0};
    for (size_t i = 0; i < w->n_lost_fds && np < 65; i++)
        p[np++] = (struct pollfd){w->lost_fds[i], POLLIN, 0};
    for (;;) {
        int64_t now = cli_now_ms(), timeout = -1;
        if (w->lease_end_ms > 0)
            timeout = w->lease_end_ms <= now ? 0 : w->lease_end_ms - now;
        if (timeout > 60000)
            timeout = 60000;
        if (poll(p, (nfds_t)np, (int)timeout) < 0 && errno != EINTR) {
            cli_error("poll: %s", strerror(errno));
            return EXIT_FAILED;
        }
        struct signalfd_siginfo si;
        while (read(sig.sfd, &si, sizeof si) == (ssize_t)sizeof si)
            if (is_forwarded((int)si.ssi_signo) && !sig.orig_ignored[si.ssi_signo])
                return EXIT_OK;
        bool lost = w->lease_end_ms > 0 && cli_now_ms() >= w->lease_end_ms;
        for (size_t i = 1; i < np; i++)
            lost = lost || p[i].revents;
        if (lost) {
            cli_error("%s was lost while held", w->what);
            return EXIT_LOST;
        }
    }
}

/* Whether COMMAND must not see the variable env[i] ("NAME=value"): the password's
 * variables, and BATON_URL when it may carry credentials. Any '@' after the scheme counts:
 * the password may hold an unescaped '/' (the library takes the last '@' before the path),
 * so no second parser here decides where the credentials end; a URL without one is kept,
 * and a nested baton reaches the same server. */
static bool secret_var(const char *var)
{
    static const char *const names[] = {"BATON_PASSWORD=", "REDISCLI_AUTH="};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(var, names[i], strlen(names[i])) == 0)
            return true;
    return strncmp(var, "BATON_URL=", 10) == 0 && strchr(var + 10, '@') != NULL;
}

/* environ without the secrets (secret_var) and with `add` ("NAME=value") in place of any
 * NAME= already there. */
static char **make_env(const char *add)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t j = 0, key = add ? (size_t)(strchr(add, '=') - add + 1) : 0;
    for (size_t i = 0; i < n; i++)
        if ((!add || strncmp(environ[i], add, key) != 0) && !secret_var(environ[i]))
            env[j++] = environ[i];
    if (add)
        env[j++] = (char *)add;
    env[j] = NULL;
    return env;
}

/*
 * In the child between fork and exec (only async-signal-safe calls): ask for SIGTERM when
 * baton dies, and close the race with a baton that died before the request was made (the
 * child was then reparented: getppid() is no longer the pid recorded before fork). Then
 * restore the signal state baton was started with and run COMMAND; if exec fails, its errno
 * goes back through err_fd.
 */
static void exec_command(char **argv, char **env, pid_t parent, int err_fd)
{
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(EXIT_SIGNAL_BASE + SIGTERM);
    if (sig.pipe_was_default) {
        struct sigaction dfl = {0};
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGPIPE, &dfl, NULL);
    }
    sigprocmask(SIG_SETMASK, &sig.orig_mask, NULL);
    execvpe(argv[0], argv, env);
    int e = errno;
    ssize_t w = write(err_fd, &e, sizeof e);
    (void)w;
    _exit(EXIT_CANNOT_RUN);
}

/* Starts COMMAND; 0 and *pid, or the errno of the failed fork or exec. */
static int spawn(char **argv, const char *token_env, pid_t *pid)
{
    char **env = make_env(token_env);
    if (!env)
        return ENOMEM;
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        int e = errno;
        free(env);
        return e;
    }
    cloexec_new_fds();
    fflush(NULL);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        close(ep[0]);
        exec_command(argv, env, parent, ep[1]);
    }
    int err = child < 0 ? errno : 0;
    close(ep[1]);
    free(env);
    if (child > 0) {
        ssize_t r;
        do
            r = read(ep[0], &err, sizeof err);
        while (r < 0 && errno == EINTR);
        if (r == (ssize_t)sizeof err) {
            while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
            }
        } else {
            err = 0;
            *pid = child;
        }
    }
    close(ep[0]);
    return err;
}

/*
 * COMMAND's SIGKILL if baton dies: a small process that outlives baton. It waits on a pipe
 * whose write end only baton holds; a byte means baton finished normally, end of file means
 * baton died (COMMAND got its SIGTERM from the kernel then). It gives COMMAND kill_after_ms
 * to exit and then SIGKILLs it through a pidfd, which cannot hit a recycled pid. Returns its
 * pid (or -1: no pidfd or no fork; COMMAND still gets the SIGTERM) and *done_fd.
 */
static pid_t start_reaper(pid_t command, int64_t kill_after_ms, int *done_fd)
{
    int pfd = (int)syscall(SYS_pidfd_open, command, 0);
    if (pfd < 0)
        return -1;
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) != 0) {
        close(pfd);
        return -1;
    }
    pid_t r = fork();
    if (r == 0) {
        /* keep only the pipe (as 0) and the pidfd (as 1) */
        if (dup2(pp[0], 0) < 0 || dup2(pfd, 1) < 0)
            _exit(1);
        syscall(SYS_close_range, 2, ~0U, 0);
        char c;
        ssize_t n;
        do
            n = read(0, &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 0)
            _exit(0);
        struct pollfd p = {1, POLLIN, 0}; /* readable when COMMAND has exited */
        int left = kill_after_ms > INT32_MAX ? INT32_MAX : (int)kill_after_ms;
        while (poll(&p, 1, left) < 0 && errno == EINTR) {
        }
        if (!p.revents)
            syscall(SYS_pidfd_send_signal, 1, SIGKILL, NULL, 0);
        _exit(0);
    }
    close(pp[0]);
    close(pfd);
    if (r < 0) {
        close(pp[1]);
        return -1;
    }
    *done_fd = pp[1];
    return r;
}

/* Tells the reaper baton is done and reaps it. */
static void stop_reaper(pid_t reaper, int done_fd)
{
    if (reaper < 0)
        return;
    ssize_t w;
    do
        w = write(done_fd, "x", 1);
    while (w < 0 && errno == EINTR);
    close(done_fd);
    while (waitpid(reaper, NULL, 0) < 0 && errno == EINTR) {
    }
}

static int status_code(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return EXIT_SIGNAL_BASE + WTERMSIG(st);
    return EXIT_FAILED;
}

/* Reaps the child if it exited; true then, with *st. */
static bool reap(pid_t pid, int *st)
{
    for (;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            /* ECHILD cannot happen for our own child; treat as gone */
            *st = EXIT_FAILED << 8;
            return true;
        }
        return false;
    }
}

void cli_run(char **argv, const cli_watch *w, cli_outcome *out)
{
    out->status = EXIT_FAILED;
    out->ran = false;
    out->lost = false;
    int pending = cli_guard_stop();
    if (pending) {
        out->status = EXIT_SIGNAL_BASE + pending;
        return;
    }

    struct pollfd *p = calloc(1 + w->n_lost_fds, sizeof *p);
    if (!p) {
        cli_error("out of memory");
        return;
    }
    int64_t lease_end = w->lease_end_ms > 0 ? w->lease_end_ms : -1;
    pid_t pid = -1;
    int rc = spawn(argv, w->token_env, &pid);
    if (rc != 0) {
        cli_error("%s: %s", argv[0], rc == ENOENT ? "command not found" : strerror(rc));
        out->status = rc == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
        free(p);
        return;
    }
    out->ran = true;
    int done_fd = -1;
    pid_t reaper = start_reaper(pid, w->kill_after_ms, &done_fd);

    size_t nl = w->n_lost_fds;
    int64_t kill_at = -1; /* when to send SIGKILL after a loss */
    int st = 0;
    bool reaped = false;
    for (;;) {
        p[0] = (struct pollfd){sig.sfd, POLLIN, 0};
        size_t np = 1;
        if (!out->lost)
            for (size_t i = 0; i < nl; i++)
                p[np++] = (struct pollfd){w->lost_fds[i], POLLIN, 0};
        int64_t until = -1, now = cli_now_ms();
        if (!out->lost && lease_end >= 0)
            until = lease_end;
        if (kill_at >= 0)
            until = kill_at;
        int timeout = -1;
        if (until >= 0)
            timeout = until <= now ? 0 : (int)(until - now > 60000 ? 60000 : until - now);
        int n = poll(p, (nfds_t)np, timeout);
        if (n < 0 && errno != EINTR) {
            cli_error("poll: %s", strerror(errno));
            break; /* cannot watch: wait for COMMAND below */
        }
        now = cli_now_ms();

        /* signals: COMMAND's exit, and the ones to forward */
        struct signalfd_siginfo si;
        bool child_event = false;
        while (read(sig.sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            int signo = (int)si.ssi_signo;
            if (signo == SIGCHLD) {
                child_event = true;
            } else if (!sig.orig_ignored[signo] && si.ssi_code != SI_KERNEL) {
                /* SI_KERNEL: the terminal sent it to the foreground group, COMMAND too */
                kill(pid, signo);
            }
        }
        if (child_event && (reaped = reap(pid, &st)))
            break;

        if (!out->lost) {
            const char *why = NULL;
            for (size_t i = 1; i < np; i++)
                if (p[i].revents)
                    why = "the library reports the hold gone (deleted, expired, taken over, "
                          "or the server lost or restarted)";
            if (!why && lease_end >= 0 && now >= lease_end)
                why = "its --lease ran out";
            if (why) {
                cli_error("%s was lost while %s ran: %s; stopping %s with SIGTERM", w->what,
                          argv[0], why, argv[0]);
                out->lost = true;
                kill(pid, SIGTERM);
                kill_at = now + w->kill_after_ms;
            }
        }
        if (kill_at >= 0 && now >= kill_at) {
            cli_error("%s still running %lld ms after SIGTERM: sending SIGKILL", argv[0],
                      (long long)w->kill_after_ms);
            kill(pid, SIGKILL);
            kill_at = -1;
        }
    }
    free(p);
    if (!reaped) {
        /* only after a poll failure: wait without watching */
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    stop_reaper(reaper, done_fd);
    out->status = status_code(st);
}
