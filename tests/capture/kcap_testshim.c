/*
 * kcap_testshim.c — a test-only LD_PRELOAD library placed before libkcap.so, to put
 * libkcap.so in situations a plain run cannot reach on purpose (test_capture_host.sh):
 *   KCAP_SHIM_STALL_REALPATH=SUBSTR  the first realpath() of a path containing SUBSTR sleeps
 *                                    600 ms (libkcap holds its library-identity lock there),
 *                                    so the client can fork while another thread holds it;
 *   KCAP_SHIM_VM_ENOMEM=1            the first process_vm_readv() fails with ENOMEM (a
 *                                    transient error); the count of calls is printed at exit.
 * Everything else passes through to libc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_stalled, g_vm_calls;

char *realpath(const char *path, char *resolved)
{
    static char *(*next)(const char *, char *);
    if (!next)
        next = (char *(*)(const char *, char *))dlsym(RTLD_NEXT, "realpath");
    const char *want = getenv("KCAP_SHIM_STALL_REALPATH");
    if (want && *want && path && strstr(path, want) && !atomic_exchange(&g_stalled, 1)) {
        struct timespec ts = {0, 600 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return next(path, resolved);
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long nl,
                         const struct iovec *r, unsigned long nr, unsigned long flags)
{
    static ssize_t (*next)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                           unsigned long, unsigned long);
    if (!next)
        next = (ssize_t(*)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                           unsigned long, unsigned long))dlsym(RTLD_NEXT, "process_vm_readv");
    const char *e = getenv("KCAP_SHIM_VM_ENOMEM");
    if (e && *e == '1' && atomic_fetch_add(&g_vm_calls, 1) == 0) {
        errno = ENOMEM;
        return -1;
    }
    return next(pid, l, nl, r, nr, flags);
}

__attribute__((destructor)) static void shim_report(void)
{
    const char *e = getenv("KCAP_SHIM_VM_ENOMEM");
    if (e && *e == '1') {
        char line[64];
        int n = snprintf(line, sizeof line, "shim: process_vm_readv calls=%d\n",
                         atomic_load(&g_vm_calls));
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
    }
}
