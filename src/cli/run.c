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
 * is protected. COMMAND runs in a process group of its own (given the terminal when baton
 * has it), and every stop reaches the whole group, COMMAND's background children included.
 * Nor may the group outlive baton: a small reaper process, started before COMMAND, sends it
 * SIGTERM when baton dies (even by SIGKILL) and SIGKILL --kill-after later.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <stdarg.h>

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

int64_t cli_lease_end(baton_lock *const *members, size_t n, int64_t lease_ms)
{
    int64_t lease_end = cli_now_ms() + lease_ms;
    for (size_t i = 0; i < n; i++) {
        int64_t t0 = cli_now_ms(), ttl;
        if (baton_lock_remaining_ttl(members[i], &ttl) != BATON_OK)
            continue;
        if (ttl == -1)
            continue;                           /* no expiry: nothing to watch */
        int64_t end = t0 + (ttl < 0 ? 0 : ttl); /* -2: gone already */
        if (end < lease_end)
            lease_end = end;
    }
    return lease_end;
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
            cli_eprintf("interrupted by SIG%s while waiting", sigabbrev_np(signo));
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
            cli_error("%s was lost while held: %s", w->what,
                      w->lease_end_ms > 0 && cli_now_ms() >= w->lease_end_ms
                          ? "its --lease ran out"
                          : cli_loss_cause(w->client));
            return EXIT_LOST;
        }
    }
}

const char *cli_loss_cause(baton_client *c)
{
    baton_stats st;
    if (c && baton_client_stats(c, &st) == BATON_OK) {
        /* a fresh client per run: any count is this run's loss */
        if (st.holds_lost_deleted)
            return "the library found the hold deleted or taken over";
        if (st.holds_lost_expired)
            return "the library found the hold expired (its renewals failed or came late)";
        if (st.holds_lost_restart)
            return "the server restarted (and may have lost every key)";
        if (st.holds_lost_failover)
            return "the master changed and the new one lacks the hold";
    }
    return "the library reports the hold gone (deleted, expired, taken over, or the server "
           "lost or restarted)";
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
 * COMMAND's process group. COMMAND leads a group of its own (set by the child and by baton,
 * so that neither order of the two matters), and every stop signal goes to that group: its
 * background children are stopped with it. COMMAND itself also gets the signal directly if it
 * left the group (setsid, setpgid): a COMMAND that puts its children elsewhere on purpose is
 * its business, as with timeout(1), but COMMAND is always reached. group_kill is safe from
 * recycled pids: a group id stays taken while a member lives, and COMMAND's pid is baton's
 * unreaped child until baton stops sending to it.
 */
typedef struct group {
    pid_t pid;     /* COMMAND */
    bool done;     /* COMMAND reaped (its pid may be recycled: no more kill(pid)) */
    int status;    /* its wait status once done */
    bool terminal; /* the terminal was handed to the group (tcsetpgrp) */
} group;

static void group_kill(const group *gr, int signo)
{
    if (!gr->done && getpgid(gr->pid) != gr->pid)
        kill(gr->pid, signo);
    kill(-gr->pid, signo);
}

/* True when no process of COMMAND's group is left (adopted zombies of it reaped first). */
static bool group_gone(group *gr)
{
    for (int st;;) {
        pid_t r = waitpid(-gr->pid, &st, WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (r == gr->pid && !gr->done) {
            gr->done = true;
            gr->status = st;
        }
    }
    return kill(-gr->pid, 0) != 0 && errno == ESRCH;
}

/* Whether the terminal on stdin has baton's group in the foreground: then COMMAND's group
 * gets it while COMMAND runs, so that it can read it and get Ctrl-C, Ctrl-Z, resizes. */
static bool in_foreground(void)
{
    return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

/* Hands the terminal to pgid (SIGTTOU is ignored in baton while COMMAND runs, so a baton in
 * the background may take it back too). */
static void give_terminal(pid_t pgid)
{
    while (tcsetpgrp(STDIN_FILENO, pgid) != 0 && errno == EINTR) {
    }
}

/*
 * In the child between fork and exec (only async-signal-safe calls): lead a process group of
 * its own, wait for baton's go (baton sets the group too, gives it the terminal and tells the
 * reaper first; end of file means baton died before that, and COMMAND is then not run), then
 * restore the signal state baton was started with and run COMMAND; if exec fails, its errno
 * goes back through err_fd. Only when there is no reaper: ask for SIGTERM when baton dies,
 * and close the race with a baton that died before the request was made (the child was then
 * reparented: getppid() is no longer the pid recorded before fork).
 */
static void exec_command(char **argv, char **env, pid_t parent, int go_fd, int err_fd,
                         bool deathsig, const struct sigaction *ttou)
{
    setpgid(0, 0);
    if (deathsig && (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent))
        _exit(EXIT_SIGNAL_BASE + SIGTERM);
    char go;
    ssize_t n;
    do
        n = read(go_fd, &go, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(EXIT_SIGNAL_BASE + SIGTERM);
    if (sig.pipe_was_default) {
        struct sigaction dfl = {0};
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGPIPE, &dfl, NULL);
    }
    if (ttou)
        sigaction(SIGTTOU, ttou, NULL);
    sigprocmask(SIG_SETMASK, &sig.orig_mask, NULL);
    execvpe(argv[0], argv, env);
    int e = errno;
    ssize_t w = write(err_fd, &e, sizeof e);
    (void)w;
    _exit(EXIT_CANNOT_RUN);
}

/*
 * Starts COMMAND in a group of its own (see exec_command), handing it the terminal if
 * gr->terminal and telling the reaper its pid through reaper_fd (-1: no reaper). 0 and
 * gr->pid, or the errno of the failed fork or exec.
 */
static int spawn(char **argv, const char *token_env, group *gr, int reaper_fd,
                 const struct sigaction *ttou)
{
    char **env = make_env(token_env);
    if (!env)
        return ENOMEM;
    int ep[2], gp[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        int e = errno;
        free(env);
        return e;
    }
    if (pipe2(gp, O_CLOEXEC) != 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        free(env);
        return e;
    }
    cloexec_new_fds();
    fflush(NULL);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        close(ep[0]);
        close(gp[1]);
        exec_command(argv, env, parent, gp[0], ep[1], reaper_fd < 0, ttou);
    }
    int err = child < 0 ? errno : 0;
    close(ep[1]);
    close(gp[0]);
    free(env);
    if (child > 0) {
        setpgid(child, child); /* the child does it too; EACCES after its exec cannot be */
        if (gr->terminal)
            give_terminal(child);
        if (reaper_fd >= 0) {
            ssize_t w;
            do
                w = write(reaper_fd, &child, sizeof child);
            while (w < 0 && errno == EINTR);
        }
        ssize_t w;
        do
            w = write(gp[1], "g", 1);
        while (w < 0 && errno == EINTR);
        ssize_t r;
        do
            r = read(ep[0], &err, sizeof err);
        while (r < 0 && errno == EINTR);
        if (r == (ssize_t)sizeof err) {
            while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
            }
        } else {
            err = 0;
            gr->pid = child;
        }
    }
    close(gp[1]);
    close(ep[0]);
    return err;
}

/* Sleeps ms (at most), without signals to wake it: the reaper's polling step. */
static void nap(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/*
 * COMMAND's group's end if baton dies: a small process that outlives baton, started before
 * COMMAND. It waits on a pipe whose write end only baton holds: first COMMAND's pid, then a
 * byte when baton finished normally. End of file after the pid means baton died (even by
 * SIGKILL): it sends the group SIGTERM (and SIGCONT, for a stopped one), gives it
 * kill_after_ms to be gone and then SIGKILLs what is left, whether COMMAND itself is still
 * running or only its children are. Returns its pid (or -1: no fork; COMMAND then asks for
 * PR_SET_PDEATHSIG instead, which reaches only COMMAND) and *done_fd.
 */
static pid_t start_reaper(int64_t kill_after_ms, int *done_fd)
{
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) != 0)
        return -1;
    pid_t r = fork();
    if (r == 0) {
        /* keep only the pipe (as 0) */
        if (dup2(pp[0], 0) < 0)
            _exit(1);
        syscall(SYS_close_range, 1, ~0U, 0);
        /* SIGINT, SIGTERM and SIGHUP stay blocked (baton's mask): the terminal's signals to
         * baton's group, Ctrl-\ included, do not end the reaper */
        struct sigaction ign = {0};
        ign.sa_handler = SIG_IGN;
        sigaction(SIGQUIT, &ign, NULL);
        group gr = {0};
        size_t got = 0;
        while (got < sizeof gr.pid) {
            ssize_t n = read(0, (char *)&gr.pid + got, sizeof gr.pid - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                _exit(0); /* baton ended before COMMAND was told to run: it runs nothing */
            got += (size_t)n;
        }
        char c;
        ssize_t n;
        do
            n = read(0, &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 0)
            _exit(0);
        group_kill(&gr, SIGTERM);
        group_kill(&gr, SIGCONT);
        int64_t end = cli_now_ms() + kill_after_ms;
        /* not COMMAND's parent: zombies count as members until their parent reaps them */
        while (kill(-gr.pid, 0) == 0 || kill(gr.pid, 0) == 0) {
            int64_t left = end - cli_now_ms();
            if (left <= 0) {
                group_kill(&gr, SIGKILL);
                break;
            }
            nap(left < 20 ? left : 20);
        }
        _exit(0);
    }
    close(pp[0]);
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

/*
 * Reaps COMMAND if it exited (gr->done then) and the group's members baton adopted (it is a
 * subreaper while COMMAND runs). COMMAND stopped by the terminal (Ctrl-Z, or reading it
 * from the background): baton takes the terminal back and stops too, as a shell's job
 * would; when continued (fg or bg) it gives the terminal back if it is in the foreground
 * and continues COMMAND's group.
 */
static void reap(group *gr)
{
    for (int st;;) {
        pid_t r = waitpid(gr->pid, &st, WNOHANG | WUNTRACED);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            /* ECHILD cannot happen for our own child; treat as gone */
            gr->done = true;
            gr->status = EXIT_FAILED << 8;
        } else if (r == gr->pid && WIFSTOPPED(st)) {
            int by = WSTOPSIG(st);
            if (by != SIGTSTP && by != SIGTTIN && by != SIGTTOU)
                continue; /* SIGSTOP from someone: their business */
            if (gr->terminal)
                give_terminal(getpgrp());
            kill(getpid(), sig.orig_ignored[SIGTSTP] ? SIGSTOP : SIGTSTP);
            /* continued (or the stop was discarded: an orphaned group) */
            gr->terminal = in_foreground();
            if (gr->terminal)
                give_terminal(gr->pid);
            group_kill(gr, SIGCONT);
            continue;
        } else if (r == gr->pid) {
            gr->done = true;
            gr->status = st;
        }
        break;
    }
    group_gone(gr); /* reaps the adopted ones */
}

/* COMMAND's run as cli_run() watches it. */
typedef struct watched {
    const cli_watch *w;
    char **argv; /* COMMAND */
    cli_outcome *out;
    group gr;
    struct pollfd *p;  /* the signalfd, then w's lost fds */
    int64_t lease_end; /* w->lease_end_ms, or -1: no such lease */
    int64_t kill_at;   /* after a loss, when to send SIGKILL; -1: no SIGKILL due */
} watched;

/* poll()'s timeout: until the lease's end or the SIGKILL's time, in 20 ms steps once COMMAND
 * exited (the group's last members are not baton's children: no SIGCHLD for them). */
static int watch_timeout(const watched *s, int64_t now)
{
    int64_t until = -1;
    if (!s->out->lost && s->lease_end >= 0)
        until = s->lease_end;
    if (s->kill_at >= 0)
        until = s->kill_at;
    if (s->gr.done && now + 20 < until)
        until = now + 20;
    if (until < 0)
        return -1;
    return until <= now ? 0 : (int)(until - now > 60000 ? 60000 : until - now);
}

/* The signals: COMMAND's exit (reaped), and the ones to forward: to COMMAND's group, which is
 * not baton's, so also those the terminal sent to baton's group. */
static void watch_signals(watched *s)
{
    struct signalfd_siginfo si;
    bool child_event = false;
    while (read(sig.sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int signo = (int)si.ssi_signo;
        if (signo == SIGCHLD)
            child_event = true;
        else if (!sig.orig_ignored[signo])
            group_kill(&s->gr, signo);
    }
    if (child_event)
        reap(&s->gr);
}

/* A loss while COMMAND runs (a lost fd of the np polled is readable, or the lease ran out):
 * says why, sends the group SIGTERM and sets the SIGKILL's time. */
static void watch_loss(watched *s, size_t np, int64_t now)
{
    const char *why = NULL;
    for (size_t i = 1; i < np; i++)
        if (s->p[i].revents)
            why = cli_loss_cause(s->w->client);
    if (!why && s->lease_end >= 0 && now >= s->lease_end)
        why = "its --lease ran out";
    if (!why)
        return;
    cli_error("%s was lost while %s ran: %s; stopping %s with SIGTERM", s->w->what, s->argv[0], why,
              s->argv[0]);
    s->out->lost = true;
    group_kill(&s->gr, SIGTERM);
    group_kill(&s->gr, SIGCONT);
    s->kill_at = now + s->w->kill_after_ms;
}

/* Watches COMMAND until it exited; after a loss, until its whole group is gone (or was
 * SIGKILLed). Returns early only when poll fails (cannot watch). */
static void watch_command(watched *s)
{
    for (;;) {
        if (s->gr.done && (s->kill_at < 0 || group_gone(&s->gr)))
            return;
        s->p[0] = (struct pollfd){sig.sfd, POLLIN, 0};
        size_t np = 1;
        if (!s->out->lost)
            for (size_t i = 0; i < s->w->n_lost_fds; i++)
                s->p[np++] = (struct pollfd){s->w->lost_fds[i], POLLIN, 0};
        int n = poll(s->p, (nfds_t)np, watch_timeout(s, cli_now_ms()));
        if (n < 0 && errno != EINTR) {
            cli_error("poll: %s", strerror(errno));
            return; /* cannot watch: the caller waits for COMMAND */
        }
        int64_t now = cli_now_ms();
        watch_signals(s);
        if (s->gr.done && s->kill_at < 0)
            continue;
        if (!s->out->lost && !s->gr.done)
            watch_loss(s, np, now);
        if (s->kill_at >= 0 && now >= s->kill_at) {
            cli_error("%s%s still running %lld ms after SIGTERM: sending SIGKILL", s->argv[0],
                      s->gr.done ? "'s children" : "", (long long)s->w->kill_after_ms);
            group_kill(&s->gr, SIGKILL);
            s->kill_at = -1;
        }
    }
}

void cli_run(char **argv, const cli_watch *w, cli_outcome *out)
{
    *out = (cli_outcome){EXIT_FAILED, false, false};
    int pending = cli_guard_stop();
    if (pending) {
        out->status = EXIT_SIGNAL_BASE + pending;
        return;
    }
    watched s = {w,    argv,
                 out,  {.pid = -1, .terminal = in_foreground()},
                 NULL, w->lease_end_ms > 0 ? w->lease_end_ms : -1,
                 -1};
    s.p = calloc(1 + w->n_lost_fds, sizeof *s.p);
    if (!s.p) {
        cli_error("out of memory");
        return;
    }
    /* baton may write on the terminal and take it back while in the background; COMMAND
     * gets SIGTTOU's disposition back */
    struct sigaction ign = {0}, ttou;
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGTTOU, &ign, &ttou);
    /* orphans of COMMAND's group come to baton, which reaps them and knows the group */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int done_fd = -1;
    pid_t reaper = start_reaper(w->kill_after_ms, &done_fd);
    int rc = spawn(argv, w->token_env, &s.gr, reaper >= 0 ? done_fd : -1, &ttou);
    if (rc != 0) {
        if (s.gr.terminal)
            give_terminal(getpgrp());
        stop_reaper(reaper, done_fd);
        sigaction(SIGTTOU, &ttou, NULL);
        cli_error("%s: %s", argv[0], rc == ENOENT ? "command not found" : strerror(rc));
        out->status = rc == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
        free(s.p);
        return;
    }
    out->ran = true;
    watch_command(&s);
    free(s.p);
    while (!s.gr.done) {
        /* only after a poll failure: wait without watching */
        if (waitpid(s.gr.pid, &s.gr.status, 0) == s.gr.pid || errno != EINTR)
            s.gr.done = true;
    }
    if (s.gr.terminal && tcgetpgrp(STDIN_FILENO) == s.gr.pid)
        give_terminal(getpgrp());
    stop_reaper(reaper, done_fd);
    sigaction(SIGTTOU, &ttou, NULL);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    out->status = status_code(s.gr.status);
}

/* ------------------------------- bounded calls ---------------------------------------- */

typedef struct bounded {
    int (*fn)(void *);
    void *arg;
    int rc;
    bool done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} bounded;

static void *bounded_main(void *p)
{
    bounded *b = p;
    int rc = b->fn(b->arg);
    pthread_mutex_lock(&b->mu);
    b->rc = rc;
    b->done = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

bool cli_call_bounded(int (*fn)(void *), void *arg, int64_t ms, int *rc)
{
    /* never freed when the call overruns: its thread still uses it until baton exits */
    bounded *b = calloc(1, sizeof *b);
    pthread_condattr_t ca;
    pthread_t t;
    if (!b || pthread_condattr_init(&ca) != 0) {
        free(b);
        *rc = fn(arg);
        return true;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&b->mu, NULL);
    b->fn = fn;
    b->arg = arg;
    if (pthread_create(&t, NULL, bounded_main, b) != 0) {
        *rc = fn(arg);
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        free(b);
        return true;
    }
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += (time_t)(ms / 1000);
    end.tv_nsec += (long)(ms % 1000) * 1000000;
    if (end.tv_nsec >= 1000000000) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&b->mu);
    while (!b->done && pthread_cond_timedwait(&b->cv, &b->mu, &end) != ETIMEDOUT) {
    }
    bool done = b->done;
    pthread_mutex_unlock(&b->mu);
    if (!done) {
        pthread_detach(t);
        return false;
    }
    pthread_join(t, NULL);
    *rc = b->rc;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
    return true;
}

void cli_exit_now(int code)
{
    fflush(NULL);
    _exit(code);
}

/* ------------------------------- --notify ---------------------------------------------- */

#ifdef BATON_HAVE_SD_NOTIFY
#include <systemd/sd-daemon.h>
#endif

bool cli_notify_supported(void)
{
#ifdef BATON_HAVE_SD_NOTIFY
    return true;
#else
    return false;
#endif
}

/* "READY=1\nSTATUS=<what>" (ready) or "STATUS=<what>", the text escaped as every line a
 * human reads (systemctl status shows it). */
static void notify(const cli_global *g, bool ready, const char *fmt, va_list ap)
{
    if (!g->notify)
        return;
    char what[600];
    vsnprintf(what, sizeof what, fmt, ap);
    char msg[sizeof what * 4 + 32];
    snprintf(msg, sizeof msg, "%sSTATUS=%s", ready ? "READY=1\n" : "", cli_esc(what));
#ifdef BATON_HAVE_SD_NOTIFY
    /* ready: COMMAND, started next, does not inherit NOTIFY_SOCKET */
    (void)sd_notify(ready ? 1 : 0, msg);
#else
    (void)msg;
#endif
}

void cli_notify_status(const cli_global *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    notify(g, false, fmt, ap);
    va_end(ap);
}

void cli_notify_ready(const cli_global *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    notify(g, true, fmt, ap);
    va_end(ap);
}
