/*
 * agentlog-exec: the client of an agentlog run's broker (docs/sandbox.md).
 *
 * `agentlog-exec -c CMD` hands CMD, its cwd, its environment and its fds 0, 1
 * and 2 to the broker of the run it is part of (socket named by
 * $AGENTLOG_RUN_SOCKET; the broker checks that the caller's ancestry reaches
 * the run's agent, so the variable only says where to knock). The broker runs
 * CMD under the run's floor plus its live grants in a process group of its
 * own; signals this client gets are forwarded to that group; if this client
 * dies, the broker kills the group. Exit status: the command's, or 128+N
 * after re-raising the signal N that killed it; 126 when there is no broker
 * or it refused; 2 on a usage error.
 *
 * `agentlog-exec --landlock-exec FD CWD PROGRAM ARGS...` is the broker's
 * side: it sets SIGINT, SIGQUIT, SIGTERM and SIGHUP to their defaults,
 * no_new_privs, confines itself with the Landlock ruleset open on FD, closes
 * every fd above 2, changes to CWD and execs PROGRAM (so the broker starts
 * commands with posix_spawn, never forking itself); exit 126 when any step
 * fails. It can only ever narrow.
 *
 * Protocol: agentlog/sandbox/broker.py. libc only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(sig_pipe[1], &b, 1);
    (void)r;
    errno = saved;
}

static int fail(const char *what) {
    fprintf(stderr, "agentlog exec: %s\n", what);
    return 126;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, char *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int landlock_exec(int argc, char **argv) {
    if (argc < 5) return fail("usage: agentlog-exec --landlock-exec FD CWD PROGRAM [ARGS...]");
    char *end = NULL;
    long fd = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || fd < 0 || fd > 1 << 20) return fail("--landlock-exec: bad fd");
    int sigs[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("prctl(PR_SET_NO_NEW_PRIVS) failed");
    if (syscall(446 /* landlock_restrict_self */, (int)fd, 0U) != 0) {
        fprintf(stderr, "agentlog exec: landlock_restrict_self: %s\n", strerror(errno));
        return 126;
    }
    /* everything but 0-2 goes: the ruleset, and whatever else the broker had open when it spawned */
    if (syscall(436 /* close_range */, 3U, ~0U, 0U) != 0)
        for (int i = 3; i < 4096; i++) close(i);
    if (chdir(argv[3]) != 0) {
        fprintf(stderr, "agentlog exec: cannot enter %s: %s\n", argv[3], strerror(errno));
        return 126;
    }
    execv(argv[4], argv + 4);
    fprintf(stderr, "agentlog exec: cannot run %s: %s\n", argv[4], strerror(errno));
    return 126;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--landlock-exec") == 0) return landlock_exec(argc, argv);
    if (argc != 3 || strcmp(argv[1], "-c") != 0) {
        fprintf(stderr, "usage: agentlog-exec -c COMMAND\n");
        return 2;
    }
    const char *path = getenv("AGENTLOG_RUN_SOCKET");
    if (path == NULL || path[0] == '\0') return fail("not inside an agentlog run (no AGENTLOG_RUN_SOCKET)");
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) return fail("the broker socket path is too long");
    memcpy(addr.sun_path, path, strlen(path));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
        fprintf(stderr, "agentlog exec: cannot reach the run's broker at %s: %s\n", path, strerror(errno));
        return 126;
    }

    /* the request body: cwd, command, environment, NUL-separated */
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == NULL) strcpy(cwd, "/");
    size_t size = strlen(cwd) + 1 + strlen(argv[2]) + 1;
    for (char **e = environ; *e; e++) size += strlen(*e) + 1;
    char *body = malloc(size);
    if (body == NULL) return fail("out of memory");
    size_t off = 0;
    size_t n = strlen(cwd) + 1;
    memcpy(body + off, cwd, n);
    off += n;
    n = strlen(argv[2]) + 1;
    memcpy(body + off, argv[2], n);
    off += n;
    for (char **e = environ; *e; e++) {
        n = strlen(*e) + 1;
        memcpy(body + off, *e, n);
        off += n;
    }

    char head[7] = {'A', 'X', '1', (char)(size >> 24), (char)(size >> 16), (char)(size >> 8), (char)size};
    int fds[3] = {0, 1, 2};
    char cbuf[CMSG_SPACE(sizeof fds)];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {head, sizeof head};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(s, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof head || write_all(s, body, size) != 0)
        return fail("the broker closed the connection");
    free(body);

    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe failed");
    signal(SIGPIPE, SIG_IGN);
    int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaction(forwarded[i], &sa, NULL);

    struct pollfd pfd[2] = {{s, POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
    for (;;) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return fail("poll failed");
        }
        if (pfd[1].revents & POLLIN) {
            unsigned char sigs[64];
            ssize_t r = read(sig_pipe[0], sigs, sizeof sigs);
            for (ssize_t i = 0; i < r; i++) {
                char m[2] = {'S', (char)sigs[i]};
                if (send(s, m, 2, MSG_NOSIGNAL) != 2) break;
            }
        }
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char kind;
            if (read_all(s, &kind, 1) != 0) return fail("the broker went away");
            if (kind == 'X') {
                unsigned char st[4];
                if (read_all(s, (char *)st, 4) != 0) return fail("the broker went away");
                int32_t status = (int32_t)(((uint32_t)st[0] << 24) | ((uint32_t)st[1] << 16) |
                                           ((uint32_t)st[2] << 8) | (uint32_t)st[3]);
                if (status >= 0) return status & 0xff;
                int sig = -status;
                signal(sig, SIG_DFL);
                sigset_t set;
                sigemptyset(&set);
                sigaddset(&set, sig);
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                kill(getpid(), sig);
                return 128 + sig;
            }
            char text[1024];
            ssize_t r = read(s, text, sizeof text - 1);
            if (r < 0) r = 0;
            text[r] = '\0';
            fprintf(stderr, "agentlog exec: refused by the broker: %s\n", text);
            return 126;
        }
    }
}
