/*
 * kcap_sandbox.c — libhdf5 meets an untrusted file in a child process first.
 *
 * The seal is an unkeyed checksum: anyone can mutate a snapshot and recompute it, and
 * libhdf5 1.10's parser is not hardened (about 0.3% of lightly mutated, resealed files
 * crash it with SIGSEGV/SIGABRT in H5Lget_name_by_idx, H5Dread, ...; some loop). So before
 * this process parses a file, a forked child runs the PROBE read on it (every libhdf5 call
 * the real read makes, the same bytes through the same fd, no decoding) under an address-
 * space limit and a deadline, and reports back through a pipe. A crash, a hang or a blown
 * memory limit in the child refuses that one file with a message saying so; the caller
 * (kcap check DIR, kcap replay DIR) goes on with the next. The child's own refusal (a
 * clean error) is returned as is, so the file is not parsed in-process at all.
 *
 * Under ASan (and with KCAP_READ_SANDBOX=exec) the child re-executes this program
 * (/proc/self/exe) and does the probe from a constructor before main: a plain fork of a
 * multi-threaded ASan process can inherit an allocator lock another thread held and hang.
 * A forked child that runs out of time is retried once in that mode before the file is
 * called bad (a plain fork could also hang on a lock some other thread of the host held).
 * That mode is for programs that link libkcapfmt.a themselves (kcap, the tests), not for a
 * library loaded into someone else's executable.
 *
 * Cost: one fork + one metadata parse + one raw read of the stored chunks (page cache)
 * per file (docs/RELIABILITY-readers.md has the figures). KCAP_READ_SANDBOX=0 turns it off
 * (for debugging the reader in-process; never for files you did not write).
 * Residual risk: a file rewritten by someone else between the probe and the read.
 */
#include "kcap_read_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KCAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KCAP_ASAN 1
#endif
#endif

/* Address space the child may add to what it inherited (libhdf5's metadata cache, chunk
 * buffers of at most KCAP_STREAM_BYTES, slabs). */
#define PROBE_EXTRA_AS ((uint64_t)2 << 30)
/* Deadline: a base plus time to read the file at a slow disk's 100 MB/s. */
#define PROBE_BASE_MS 20000
#define PROBE_MS_PER_100MB 1000

typedef struct probe_msg {
    int code;
    char msg[sizeof(((kcap_error *)0)->msg)];
} probe_msg;

int kcap_sandbox_enabled(void)
{
    const char *e = getenv("KCAP_READ_SANDBOX");
    return !(e && !strcmp(e, "0"));
}

static int exec_mode(void)
{
#ifdef KCAP_ASAN
    return 1;
#else
    const char *e = getenv("KCAP_READ_SANDBOX");
    return e && !strcmp(e, "exec");
#endif
}

static uint64_t vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    long psz = sysconf(_SC_PAGESIZE);
    return (uint64_t)pages * (uint64_t)(psz > 0 ? psz : 4096);
}

static void child(int fd, const char *path, int wfd, uint64_t as_limit, unsigned secs)
{
    kcap_h5_lock_reset_in_child();
    /* what a dying libhdf5 / libc prints ("free(): invalid pointer") is not the user's
     * output: the parent reports the crash in one sentence */
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
        dup2(devnull, 2);
        close(devnull);
    }
    kcap_h5zstd_register();
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl); /* a crash here is an answer, not a core file */
#ifndef KCAP_ASAN /* ASan reserves terabytes of shadow: no address-space limit there */
    if (as_limit) { /* 0: the inherited size is unknown (no /proc), so no limit */
        rl.rlim_cur = rl.rlim_max = (rlim_t)as_limit;
        setrlimit(RLIMIT_AS, &rl);
    }
#else
    (void)as_limit;
#endif
    signal(SIGALRM, SIG_DFL);
    alarm(secs + 1); /* backstop if the parent is gone */
    probe_msg m;
    memset(&m, 0, sizeof m);
    kcap_error e = {0};
    m.code = kcap_read_fd(fd, path, KCAP_RMODE_PROBE, NULL, NULL, &e);
    memcpy(m.msg, e.msg, sizeof m.msg);
    size_t off = 0;
    while (off < sizeof m) {
        ssize_t w = write(wfd, (char *)&m + off, sizeof m - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    _exit(0); /* no atexit handlers: libhdf5's would close the parent's files */
}

/* The exec-mode child: this program re-executed with the probe's arguments in its
 * environment; it answers and exits before main. The constructor is in every program that
 * links the reader, libkcap.so among them (so in every host it is preloaded into): it acts
 * only when the two descriptors named are the very file and pipe its parent opened (device
 * and inode numbers in the variable), never on variables someone else set (with
 * KCAP_SANDBOX_CHILD=0,1,5,0 a host's main never ran: the review of libkcap's
 * environment). */
__attribute__((constructor)) static void kcap_sandbox_exec_child(void)
{
    const char *a = getenv("KCAP_SANDBOX_CHILD"), *path = getenv("KCAP_SANDBOX_PATH");
    int fd, wfd;
    unsigned secs;
    unsigned long long as, fdev, fino, wdev, wino;
    struct stat sf, sw;
    if (!a || !path ||
        sscanf(a, "%d,%d,%u,%llu,%llu,%llu,%llu,%llu", &fd, &wfd, &secs, &as, &fdev, &fino, &wdev,
               &wino) != 8)
        return;
    if (fd < 0 || wfd < 0 || fstat(fd, &sf) || fstat(wfd, &sw) || !S_ISFIFO(sw.st_mode) ||
        (unsigned long long)sf.st_dev != fdev || (unsigned long long)sf.st_ino != fino ||
        (unsigned long long)sw.st_dev != wdev || (unsigned long long)sw.st_ino != wino)
        return;
    child(fd, path, wfd, (uint64_t)as, secs);
}

/* Forks a child that re-executes this program as the probe (exec mode). Everything is
 * prepared before fork: between fork and exec only async-signal-safe calls. */
static pid_t spawn_exec(int fd, const char *path, int wfd, unsigned secs, uint64_t as)
{
    extern char **environ;
    int n = 0;
    while (environ[n])
        n++;
    char **env = calloc((size_t)n + 3, sizeof *env);
    char *a = malloc(256), *p = malloc(strlen(path) + 24);
    pid_t pid = -1;
    struct stat sf, sw; /* the child acts only on these very descriptors */
    if (env && a && p && !fstat(fd, &sf) && !fstat(wfd, &sw)) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (strncmp(environ[i], "KCAP_SANDBOX_", 13))
                env[k++] = environ[i];
        snprintf(a, 256, "KCAP_SANDBOX_CHILD=%d,%d,%u,%llu,%llu,%llu,%llu,%llu", fd, wfd, secs,
                 (unsigned long long)as, (unsigned long long)sf.st_dev,
                 (unsigned long long)sf.st_ino, (unsigned long long)sw.st_dev,
                 (unsigned long long)sw.st_ino);
        snprintf(p, strlen(path) + 24, "KCAP_SANDBOX_PATH=%s", path);
        env[k++] = a;
        env[k++] = p;
        char *argv[] = {(char *)"kcap-sandbox-probe", NULL};
        pid = fork();
        if (pid == 0) {
            fcntl(fd, F_SETFD, 0); /* both survive exec */
            fcntl(wfd, F_SETFD, 0);
            execve("/proc/self/exe", argv, env);
            _exit(127);
        }
    }
    int e = errno;
    free(env);
    free(a);
    free(p);
    errno = e;
    return pid;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int probe_once(int fd, const char *path, int use_exec, kcap_error *err);

int kcap_sandbox_probe(int fd, const char *path, kcap_error *err)
{
    int ex = exec_mode(), rc = probe_once(fd, path, ex, err);
    /* A forked child of a threaded process can hang on a lock another thread held at fork
     * (not libhdf5's: ours is held across fork). Before calling the file bad, ask a fresh
     * process: a file that makes libhdf5 loop runs out of time there too. */
    if (rc == KCAP_ERR_CORRUPT && !ex && strstr(err->msg, "did not finish parsing"))
        rc = probe_once(fd, path, 1, err);
    return rc;
}

static int probe_once(int fd, const char *path, int use_exec, kcap_error *err)
{
    struct stat st;
    int64_t ms = PROBE_BASE_MS;
    if (!fstat(fd, &st))
        ms += (int64_t)(st.st_size / 100000000) * PROBE_MS_PER_100MB;
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot validate it in a child process: "
                              "pipe: %s", path, strerror(errno));
    uint64_t vm = vm_bytes(), as = vm ? vm + PROBE_EXTRA_AS : 0;
    pid_t pid;
    int fork_errno;
    if (use_exec) {
        pid = spawn_exec(fd, path, p[1], (unsigned)(ms / 1000), as);
        fork_errno = errno;
    } else {
        kcap_h5_lock(); /* no other thread is inside libhdf5 while the child is made */
        pid = fork();
        if (pid == 0) {
            close(p[0]);
            child(fd, path, p[1], as, (unsigned)(ms / 1000));
        }
        fork_errno = errno;
        kcap_h5_unlock();
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot validate it in a child process: "
                              "fork: %s", path, strerror(fork_errno));
    }
    probe_msg m;
    size_t got = 0;
    int64_t deadline = now_ms() + ms;
    int timed_out = 0;
    while (got < sizeof m) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {p[0], POLLIN, 0};
        int pr = poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t r = read(p[0], (char *)&m + got, sizeof m - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* the child died without answering */
        got += (size_t)r;
    }
    close(p[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out)
        return kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: refused: libhdf5 did not finish "
                              "parsing it within %lld s (a malformed HDF5 structure behind a "
                              "valid seal)", path, (long long)(ms / 1000));
    if (got == sizeof m) {
        m.msg[sizeof m.msg - 1] = '\0';
        if (m.code == KCAP_OK)
            return KCAP_OK;
        return kcap_error_set(err, m.code, "%s", m.msg);
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) /* Ctrl-C reached the child too */
            return kcap_error_set(err, KCAP_ERR_IO, "%s: validation interrupted (signal %d, %s)",
                                  path, sig, strsignal(sig));
        return kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: refused: libhdf5 crashed parsing it "
                              "(signal %d, %s%s; a malformed HDF5 structure behind a valid "
                              "seal)", path, sig, strsignal(sig),
                              sig == SIGKILL || sig == SIGSEGV ? ", or out of memory" : "");
    }
    return kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: refused: the validating child process "
                          "exited with status %d without an answer (libhdf5 failed on it)",
                          path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
