/*
 * agentlog-hook: the native client of agentlog's hook path (issue 29).
 *
 * Agents run `agentlog-hook <agent> [args...]` instead of the Python hook. It
 * reads the payload on stdin, hands it to the capture server of `agentlog
 * daemon run` over <data root>/run/hook.sock and prints the agent's reply when
 * the server answers 'A' (recorded). Whenever that does not happen (no daemon,
 * failed checks, timeout, 'F', a malformed answer) it execs the Python hook
 * with the same bytes on stdin and the event id it made, so that the event is
 * recorded once either way. How it is built and when it falls back:
 * docs/hook-path.md; the protocol's Python side, every rule checked:
 * agentlog/capture/wire.py.
 *
 * libc only, POSIX; Linux first, macOS kept compiling. Exit status is always 0
 * and stdout carries nothing but an 'A' reply: the agent must never fail
 * because of us.
 *
 * Built by agentlog.install.native_build with the fallback's two paths
 * compiled in: -DAGENTLOG_PYTHON="..." -DAGENTLOG_HOOK_PY="...".
 */
#define _GNU_SOURCE /* memfd_create, getrandom, MSG_NOSIGNAL, mkstemp under -std=c11 */
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#if defined(__has_include)
#if __has_include(<sys/random.h>)
#include <sys/random.h>
#define HAVE_GETRANDOM 1
#endif
#endif
#endif

#if !defined(AGENTLOG_PYTHON) || !defined(AGENTLOG_HOOK_PY)
#error "build with -DAGENTLOG_PYTHON=\"<python>\" -DAGENTLOG_HOOK_PY=\"<package>/_hook.py\" (agentlog.install.native_build does)"
#endif

#if defined(MSG_NOSIGNAL)
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0 /* SIGPIPE is ignored anyway */
#endif

/* Limits of the wire protocol (as in agentlog/capture/wire.py). */
#define KEEP_MAX ((size_t)16 << 20)                      /* payload kept and sent */
#define REQUEST_MAX (((size_t)16 << 20) + ((size_t)4 << 20)) /* a whole request */
#define REPLY_MAX ((size_t)1 << 20)
#define AGENT_MAX ((size_t)64)
#define ARGS_MAX 32
#define ARG_LEN_MAX ((size_t)1 << 20)
#define ENV_LEN_MAX ((size_t)64 << 10)
#define CWD_MAX ((size_t)64 << 10)
#define ACK_MS_DEFAULT 1500
#define ACK_MS_MAX 60000

extern char **environ;

enum { TAG_AGENT = 1, TAG_ARG, TAG_ENV, TAG_CWD, TAG_EVENT_ID, TAG_CAPTURED_AT, TAG_STDIN_BYTES, TAG_PAYLOAD,
       TAG_DEADLINE_MS };

static const char *const ENV_KEYS[] = {
    "AGENTLOG_CAPTURE_MODE", "AGENTLOG_DURABILITY", "CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR", "GEMINI_PROJECT_DIR",
};
#define ENV_KEY_COUNT (sizeof ENV_KEYS / sizeof ENV_KEYS[0])

/* Why the socket was not used. A quiet reason is the ordinary state of a
 * machine without a running daemon (or the daemon's own choice, 'F'); any
 * other reason gets one line on stderr before the fallback. */
struct outcome {
    const char *reason;
    int err; /* errno to add to the line, or 0 */
    int quiet;
};

static void say(const char *what, int err, const char *tail) {
    char line[512];
    int n = err ? snprintf(line, sizeof line, "agentlog-hook: %s: %s%s\n", what, strerror(err), tail)
                : snprintf(line, sizeof line, "agentlog-hook: %s%s\n", what, tail);
    if (n <= 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (len == sizeof line - 1)
        line[len - 1] = '\n';
    ssize_t w = write(2, line, len); /* one line, best effort */
    (void)w;
}

static void fail(struct outcome *out, const char *reason, int err, int quiet) {
    out->reason = reason;
    out->err = err;
    out->quiet = quiet;
}

/* ---- time and the event id ------------------------------------------------ */

static int64_t mono_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t realtime_us(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int read_full(int fd, unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void random_bytes(unsigned char *p, size_t n) {
#if defined(HAVE_GETRANDOM)
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got == n)
        return;
#endif
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        int ok = read_full(fd, p, n) == 0;
        close(fd);
        if (ok)
            return;
    }
    /* No entropy source at all: still unique in practice (clock, pid, address). */
    uint64_t x = (uint64_t)mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)p ^ realtime_us();
    for (size_t i = 0; i < n; i++) {
        x += 0x9e3779b97f4a7c15u; /* splitmix64 */
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        p[i] = (unsigned char)(z ^ (z >> 31));
    }
}

/* RFC 9562 UUIDv7: 48 bits of ms, version 7, 12 + 62 random bits, variant 10. */
static void make_uuid7(uint64_t unix_ms, char out[37]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16], r[10];
    random_bytes(r, sizeof r);
    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)(unix_ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | (r[0] & 0x0f));
    b[7] = r[1];
    b[8] = (unsigned char)(0x80 | (r[2] & 0x3f));
    memcpy(b + 9, r + 3, 7);
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

/* ---- stdin ------------------------------------------------------------------ */

struct input {
    unsigned char *data; /* the first KEEP_MAX bytes */
    size_t kept;
    size_t cap;
    uint64_t total; /* every byte stdin held */
    int short_kept; /* out of memory: kept < min(total, KEEP_MAX) */
};

static void read_stdin(struct input *in) {
    static unsigned char scratch[64 << 10]; /* bytes past the cap, counted only */
    for (;;) {
        unsigned char *dst = scratch;
        size_t room = sizeof scratch;
        if (in->kept < KEEP_MAX && !in->short_kept) {
            if (in->cap - in->kept < sizeof scratch && in->cap < KEEP_MAX) {
                size_t cap = in->cap ? in->cap * 2 : sizeof scratch;
                if (cap > KEEP_MAX)
                    cap = KEEP_MAX;
                unsigned char *grown = realloc(in->data, cap);
                if (grown) {
                    in->data = grown;
                    in->cap = cap;
                }
            }
            if (in->cap > in->kept) {
                dst = in->data + in->kept;
                room = in->cap - in->kept;
            } else {
                in->short_kept = 1;
            }
        }
        ssize_t n = read(0, dst, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) { /* a non-blocking stdin: wait for more */
                struct pollfd p = {.fd = 0, .events = POLLIN, .revents = 0};
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                    break;
                continue;
            }
            break; /* closed or unreadable: what was read is the payload */
        }
        if (n == 0)
            break;
        in->total += (uint64_t)n;
        if (dst != scratch)
            in->kept += (size_t)n;
    }
}

/* ---- the data root, as agentlog.core.paths.data_root ---------------------- */

static char *concat(const char *a, size_t alen, const char *b) {
    size_t blen = strlen(b);
    char *out = malloc(alen + blen + 1);
    if (!out)
        return NULL;
    memcpy(out, a, alen);
    memcpy(out + alen, b, blen + 1);
    return out;
}

/* os.path.join(a, b) for a relative b. */
static char *path_join(const char *a, const char *b) {
    size_t alen = strlen(a);
    if (alen == 0 || a[alen - 1] == '/')
        return concat(a, alen, b);
    char *mid = concat(a, alen, "/");
    if (!mid)
        return NULL;
    char *out = concat(mid, alen + 1, b);
    free(mid);
    return out;
}

/* os.path.expanduser */
static char *expand_user(const char *p) {
    if (p[0] != '~')
        return strdup(p);
    const char *slash = strchr(p + 1, '/');
    size_t i = slash ? (size_t)(slash - p) : strlen(p);
    const char *home = NULL;
    if (i == 1) {
        home = getenv("HOME");
        if (!home) {
            struct passwd *pw = getpwuid(getuid());
            if (!pw || !pw->pw_dir)
                return strdup(p);
            home = pw->pw_dir;
        }
    } else {
        char *name = strndup(p + 1, i - 1);
        if (!name)
            return NULL;
        struct passwd *pw = getpwnam(name);
        free(name);
        if (!pw || !pw->pw_dir)
            return strdup(p);
        home = pw->pw_dir;
    }
    size_t hlen = strlen(home);
    while (hlen > 0 && home[hlen - 1] == '/')
        hlen--;
    if (hlen == 0 && p[i] == '\0')
        return strdup("/");
    return concat(home, hlen, p + i);
}

/* os.path.normpath (POSIX): lexical, keeps a leading "//" of exactly two. */
static char *norm_path(const char *p) {
    size_t len = strlen(p);
    if (len == 0)
        return strdup(".");
    size_t initial = p[0] != '/' ? 0 : (p[1] == '/' && p[2] != '/') ? 2 : 1;
    size_t most = len / 2 + 1; /* components a path of len bytes can have */
    const char **cs = malloc(most * sizeof *cs);
    size_t *cl = malloc(most * sizeof *cl);
    char *out = malloc(len + 2);
    if (!cs || !cl || !out) {
        free(cs);
        free(cl);
        free(out);
        return NULL;
    }
    size_t depth = 0;
    for (const char *c = p; *c;) {
        while (*c == '/')
            c++;
        const char *e = c;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - c);
        int dotdot = n == 2 && c[0] == '.' && c[1] == '.';
        int after_dotdot = depth > 0 && cl[depth - 1] == 2 && cs[depth - 1][0] == '.' && cs[depth - 1][1] == '.';
        if (n == 0 || (n == 1 && c[0] == '.')) {
            /* "" and "." name nothing */
        } else if (!dotdot || (!initial && depth == 0) || after_dotdot) {
            cs[depth] = c;
            cl[depth++] = n;
        } else if (depth > 0) {
            depth--;
        }
        c = e;
    }
    size_t o = initial;
    memset(out, '/', initial);
    for (size_t i = 0; i < depth; i++) {
        if (i > 0)
            out[o++] = '/';
        memcpy(out + o, cs[i], cl[i]);
        o += cl[i];
    }
    if (o == 0)
        out[o++] = '.';
    out[o] = '\0';
    free(cs);
    free(cl);
    return out;
}

/* os.path.abspath */
static char *abs_path(const char *p) {
    if (p[0] == '/')
        return norm_path(p);
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    char *joined = path_join(cwd, p);
    free(cwd);
    if (!joined)
        return NULL;
    char *out = norm_path(joined);
    free(joined);
    return out;
}

static char *data_root(void) {
    const char *home = getenv("AGENTLOG_HOME");
    if (home && *home) {
        char *expanded = expand_user(home);
        if (!expanded)
            return NULL;
        char *out = abs_path(expanded);
        free(expanded);
        return out;
    }
    char *base;
#if defined(__APPLE__)
    base = expand_user("~/Library/Application Support");
#else
    const char *xdg = getenv("XDG_DATA_HOME");
    base = (xdg && *xdg) ? strdup(xdg) : expand_user("~/.local/share");
#endif
    if (!base)
        return NULL;
    char *out = path_join(base, "agentlog");
    free(base);
    return out;
}

/* ---- the request ------------------------------------------------------------ */

struct field {
    int tag;
    const unsigned char *data;
    size_t len;
};

static unsigned char *put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Every field but the payload's bytes, framed, into one buffer; the payload is
 * sent from the stdin buffer itself. */
static unsigned char *frame_head(const struct field *fields, size_t count, size_t *head_len, size_t payload_len) {
    size_t len = 8;
    for (size_t i = 0; i < count; i++)
        len += 5 + fields[i].len;
    len += 5;
    if (len + payload_len > REQUEST_MAX)
        return NULL;
    unsigned char *head = malloc(len);
    if (!head)
        return NULL;
    unsigned char *p = head;
    memcpy(p, "ALH1", 4);
    p = put_u32(p + 4, (uint32_t)(count + 1));
    for (size_t i = 0; i < count; i++) {
        *p++ = (unsigned char)fields[i].tag;
        p = put_u32(p, (uint32_t)fields[i].len);
        if (fields[i].len)
            memcpy(p, fields[i].data, fields[i].len);
        p += fields[i].len;
    }
    *p++ = TAG_PAYLOAD;
    put_u32(p, (uint32_t)payload_len);
    *head_len = len;
    return head;
}

/* ---- socket I/O under one deadline ---------------------------------------- */

/* 1: ready, 0: deadline passed, -1: poll failed. */
static int wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - mono_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events, .revents = 0};
        int r = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int send_all(int fd, const unsigned char *p, size_t n, int64_t deadline, struct outcome *out) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, SEND_FLAGS);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd(fd, POLLOUT, deadline);
            if (r == 1)
                continue;
            fail(out, r == 0 ? "the daemon did not take the request in time (AGENTLOG_HOOK_ACK_MS)" : "poll failed", r ? errno : 0, 0);
            return -1;
        }
        fail(out, "could not send the request", w < 0 ? errno : 0, 0);
        return -1;
    }
    return 0;
}

static int recv_all(int fd, unsigned char *p, size_t n, int64_t deadline, struct outcome *out) {
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) {
            fail(out, "the daemon closed the connection before a whole answer", 0, 0);
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w == 1)
                continue;
            fail(out, w == 0 ? "no answer from the daemon in time (AGENTLOG_HOOK_ACK_MS)" : "poll failed", w ? errno : 0, 0);
            return -1;
        }
        fail(out, "could not read the answer", errno, 0);
        return -1;
    }
    return 0;
}

static int connect_by(int fd, const struct sockaddr_un *addr, int64_t deadline, struct outcome *out) {
    for (;;) {
        if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0)
            return 0;
        int e = errno;
        if (e == EAGAIN) { /* Linux: the listen backlog is full; try again until the deadline */
            if (deadline - mono_ns() <= 0) {
                fail(out, "the daemon's socket stayed busy (AGENTLOG_HOOK_ACK_MS)", 0, 0);
                return -1;
            }
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        if (e == EINPROGRESS || e == EINTR) { /* completes in the background */
            int r = wait_fd(fd, POLLOUT, deadline);
            int so = 0;
            socklen_t solen = sizeof so;
            if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &solen) == 0 && so == 0)
                return 0;
            fail(out, r == 0 ? "connecting to the daemon timed out (AGENTLOG_HOOK_ACK_MS)" : "could not connect to the daemon", r == 1 ? so : 0, 0);
            return -1;
        }
        /* no daemon listening (a socket left by one that stopped) is an ordinary state */
        fail(out, "could not connect to the daemon", e, e == ECONNREFUSED || e == ENOENT);
        return -1;
    }
}

static int ack_ms(void) {
    const char *s = getenv("AGENTLOG_HOOK_ACK_MS");
    if (!s || !*s)
        return ACK_MS_DEFAULT;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0')
        return ACK_MS_DEFAULT;
    if (v < 1)
        return 1;
    if (v > ACK_MS_MAX || errno == ERANGE)
        return ACK_MS_MAX;
    return (int)v;
}

/* lstat checks: the run dir a private directory of ours, the socket ours. */
static int check_paths(const char *run, const char *sock, struct outcome *out) {
    struct stat st;
    if (lstat(run, &st) != 0) {
        int e = errno;
        fail(out, "no run directory", e, e == ENOENT || e == ENOTDIR);
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        fail(out, "the run directory is not a private directory of this user (or is a symlink)", 0, 0);
        return -1;
    }
    if (lstat(sock, &st) != 0) {
        int e = errno;
        fail(out, "no daemon socket", e, e == ENOENT);
        return -1;
    }
    if (!S_ISSOCK(st.st_mode) || st.st_uid != getuid()) {
        fail(out, "run/hook.sock is not a socket of this user (or is a symlink)", 0, 0);
        return -1;
    }
    return 0;
}

/* The daemon's socket address after the checks, or -1. */
static int socket_address(struct sockaddr_un *addr, struct outcome *out) {
    int ok = -1;
    char *root = data_root();
    char *run = root ? path_join(root, "run") : NULL;
    char *sock = run ? path_join(run, "hook.sock") : NULL;
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (!sock)
        fail(out, "could not work out the data root", errno, 0);
    else if (strlen(sock) >= sizeof addr->sun_path)
        fail(out, "the socket path is too long for a Unix socket", 0, 0);
    else if (check_paths(run, sock, out) == 0) {
        memcpy(addr->sun_path, sock, strlen(sock) + 1);
        ok = 0;
    }
    free(sock);
    free(run);
    free(root);
    return ok;
}

/* The first KEY=VALUE entry of environ for key (the one getenv and Python's
 * os.environ see), or NULL. */
static const char *env_entry(const char *key) {
    size_t klen = strlen(key);
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, key, klen) == 0 && (*e)[klen] == '=')
            return *e;
    return NULL;
}

/* The request's head (every field but the payload's bytes), or NULL. */
static unsigned char *build_head(const char *agent, char **args, int nargs, const struct input *in, const char *event_id,
                                 uint64_t captured_at, size_t *head_len, struct outcome *out) {
    size_t agent_len = strlen(agent);
    if (agent_len > AGENT_MAX || nargs > ARGS_MAX) {
        fail(out, "the agent name or the number of arguments is over the protocol's limits", 0, 0);
        return NULL;
    }
    struct field fields[1 + ARGS_MAX + ENV_KEY_COUNT + 5];
    size_t count = 0;
    fields[count++] = (struct field){TAG_AGENT, (const unsigned char *)agent, agent_len};
    for (int i = 0; i < nargs; i++) {
        size_t n = strlen(args[i]);
        if (n > ARG_LEN_MAX) {
            fail(out, "an argument is over the protocol's 1 MiB", 0, 0);
            return NULL;
        }
        fields[count++] = (struct field){TAG_ARG, (const unsigned char *)args[i], n};
    }
    for (size_t k = 0; k < ENV_KEY_COUNT; k++) {
        const char *entry = env_entry(ENV_KEYS[k]);
        if (!entry)
            continue;
        size_t n = strlen(entry);
        if (n > ENV_LEN_MAX) {
            fail(out, "an environment variable is over the protocol's 64 KiB", 0, 0);
            return NULL;
        }
        fields[count++] = (struct field){TAG_ENV, (const unsigned char *)entry, n};
    }
    char *cwd = getcwd(NULL, 0); /* absent when it fails */
    if (cwd && strlen(cwd) <= CWD_MAX)
        fields[count++] = (struct field){TAG_CWD, (const unsigned char *)cwd, strlen(cwd)};
    char at[24], total[24], wait[24];
    int at_len = snprintf(at, sizeof at, "%llu", (unsigned long long)captured_at);
    int total_len = snprintf(total, sizeof total, "%llu", (unsigned long long)in->total);
    int wait_len = snprintf(wait, sizeof wait, "%d", ack_ms());
    fields[count++] = (struct field){TAG_EVENT_ID, (const unsigned char *)event_id, 36};
    fields[count++] = (struct field){TAG_CAPTURED_AT, (const unsigned char *)at, (size_t)at_len};
    fields[count++] = (struct field){TAG_STDIN_BYTES, (const unsigned char *)total, (size_t)total_len};
    /* how long this client waits for the answer: the server needs no duplicate check for a
     * request it appends well within it (the fallback cannot have run yet) */
    fields[count++] = (struct field){TAG_DEADLINE_MS, (const unsigned char *)wait, (size_t)wait_len};
    unsigned char *head = frame_head(fields, count, head_len, in->kept);
    free(cwd);
    if (!head)
        fail(out, "the request would be over the protocol's 20 MiB (or out of memory)", 0, 0);
    return head;
}

/* Connect, send, read the answer. 'A': returns the reply (malloc'd; NULL
 * when empty) with *answered set; anything else: NULL, *answered 0. */
static unsigned char *talk(int fd, const struct sockaddr_un *addr, const unsigned char *head, size_t head_len,
                           const struct input *in, uint32_t *reply_len, int *answered, struct outcome *out) {
    int64_t deadline = mono_ns() + (int64_t)ack_ms() * 1000000;
    unsigned char hdr[9];
    *answered = 0;
    int flags = fcntl(fd, F_GETFL);
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        fail(out, "fcntl() failed", errno, 0);
        return NULL;
    }
    if (connect_by(fd, addr, deadline, out) != 0 || send_all(fd, head, head_len, deadline, out) != 0 ||
        send_all(fd, in->data, in->kept, deadline, out) != 0 || recv_all(fd, hdr, sizeof hdr, deadline, out) != 0)
        return NULL;
    if (memcmp(hdr, "ALR1", 4) != 0 || (hdr[4] != 'A' && hdr[4] != 'F')) {
        fail(out, "the daemon's answer is malformed", 0, 0);
        return NULL;
    }
    if (hdr[4] == 'F') {
        fail(out, "the daemon said to fall back", 0, 1);
        return NULL;
    }
    uint32_t len = get_u32(hdr + 5);
    if (len > REPLY_MAX) {
        fail(out, "the daemon's reply is over 1 MiB", 0, 0);
        return NULL;
    }
    unsigned char *reply = NULL;
    if (len > 0) {
        reply = malloc(len);
        if (!reply) {
            fail(out, "out of memory for the reply", 0, 0);
            return NULL;
        }
        if (recv_all(fd, reply, len, deadline, out) != 0) {
            free(reply);
            return NULL;
        }
    }
    *reply_len = len;
    *answered = 1;
    return reply;
}

/* The reply goes out whatever becomes of stdout (EPIPE, closed: ignored). */
static void write_stdout(const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(1, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = 1, .events = POLLOUT, .revents = 0};
            if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                return;
        } else {
            return;
        }
    }
}

/* Returns 1 when the daemon answered 'A' and its reply went to stdout. */
static int ask_daemon(const char *agent, char **args, int nargs, const struct input *in, const char *event_id,
                      uint64_t captured_at, struct outcome *out) {
    if (in->short_kept) {
        fail(out, "out of memory reading stdin", 0, 0);
        return 0;
    }
    struct sockaddr_un addr;
    if (socket_address(&addr, out) != 0)
        return 0;
    size_t head_len = 0;
    unsigned char *head = build_head(agent, args, nargs, in, event_id, captured_at, &head_len, out);
    if (!head)
        return 0;
    int answered = 0;
    uint32_t reply_len = 0;
    unsigned char *reply = NULL;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        fail(out, "socket() failed", errno, 0);
    } else {
        reply = talk(fd, &addr, head, head_len, in, &reply_len, &answered, out);
        close(fd);
    }
    free(head);
    if (answered)
        write_stdout(reply, reply_len);
    free(reply);
    return answered;
}

/* ---- the fallback ----------------------------------------------------------- */

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int filled(int fd, const struct input *in) {
    if (write_all(fd, in->data, in->kept) == 0 && lseek(fd, 0, SEEK_SET) == 0)
        return fd;
    close(fd);
    return -1;
}

static int temp_in(const char *dir, const struct input *in) {
    char *path = path_join(dir, "agentlog-hook-XXXXXX");
    if (!path)
        return -1;
    int fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    free(path);
    return fd < 0 ? -1 : filled(fd, in);
}

/* A file holding the kept bytes, read from its start: a memfd, else an
 * unlinked temporary file in $TMPDIR, else in /tmp. */
static int kept_bytes_file(const struct input *in) {
    int fd = -1;
#if defined(__linux__) && defined(MFD_CLOEXEC)
    fd = memfd_create("agentlog-hook-stdin", MFD_CLOEXEC);
    if (fd >= 0 && (fd = filled(fd, in)) >= 0)
        return fd;
#endif
    const char *tmp = getenv("TMPDIR");
    if (tmp && *tmp && (fd = temp_in(tmp, in)) >= 0)
        return fd;
    return temp_in("/tmp", in);
}

/* execv the Python hook with our arguments; returns only when that failed. */
static void exec_python(int argc, char **argv) {
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) {
        say("out of memory before starting the Python hook", 0, "");
        return;
    }
    args[0] = (char *)AGENTLOG_PYTHON;
    args[1] = (char *)"-I";
    args[2] = (char *)"-S";
    args[3] = (char *)AGENTLOG_HOOK_PY;
    for (int i = 1; i < argc; i++)
        args[3 + i] = argv[i];
    signal(SIGPIPE, SIG_DFL); /* an ignored signal stays ignored across exec */
    execv(AGENTLOG_PYTHON, args);
    int e = errno;
    signal(SIGPIPE, SIG_IGN);
    say("could not run the Python hook " AGENTLOG_PYTHON, e, "");
    free(args);
}

static void fall_back(int argc, char **argv, const struct input *in, const char *event_id, uint64_t captured_at) {
    int fd = kept_bytes_file(in);
    if (fd < 0) {
        say("could not keep stdin for the Python hook (no memfd, no temporary file); it gets an empty stdin", errno, "");
        fd = open("/dev/null", O_RDONLY);
    }
    if (fd > 0) {
        dup2(fd, 0);
        close(fd);
    }
    char at[24], total[24];
    snprintf(at, sizeof at, "%llu", (unsigned long long)captured_at);
    snprintf(total, sizeof total, "%llu", (unsigned long long)in->total);
    if (setenv("AGENTLOG_HOOK_EVENT_ID", event_id, 1) != 0 || setenv("AGENTLOG_HOOK_CAPTURED_AT", at, 1) != 0 ||
        setenv("AGENTLOG_HOOK_STDIN_BYTES", total, 1) != 0)
        say("could not set the fallback's environment", errno, "");
    exec_python(argc, argv);
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv) {
    /* A closed 0, 1 or 2 would be handed to the socket or the memfd: fill them. */
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (null >= 0 && null != fd) {
                dup2(null, fd);
                close(null);
            }
        }
    }
    signal(SIGPIPE, SIG_IGN);
    uint64_t captured_at = realtime_us();

    /* As the Python hook: an optional "hook" word, then the agent. Usage and
     * help are the Python hook's to print, stdin untouched. */
    int first = (argc > 1 && strcmp(argv[1], "hook") == 0) ? 2 : 1;
    if (argc <= first || strcmp(argv[first], "-h") == 0 || strcmp(argv[first], "--help") == 0) {
        exec_python(argc, argv);
        return 0;
    }

    struct input in = {NULL, 0, 0, 0, 0};
    read_stdin(&in);
    char event_id[37];
    make_uuid7(captured_at / 1000, event_id);
    struct outcome out = {NULL, 0, 1};
    if (ask_daemon(argv[first], argv + first + 1, argc - first - 1, &in, event_id, captured_at, &out)) {
        free(in.data);
        return 0;
    }
    if (!out.quiet && out.reason)
        say(out.reason, out.err, "; running the Python hook");
    fall_back(argc, argv, &in, event_id, captured_at);
    free(in.data);
    return 0;
}
