/*
 * kcap_log.c — libkcap.so's only output: single lines on stderr prefixed "kcap:".
 *
 * A preloaded library shares stderr with its host, so every message is one write(2) of one
 * whole line (no stdio buffering interleaved with the host's, no partial lines between
 * processes of a TP group), and repeated problems are reported once per process.
 */
#include "kcap_cap.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int kcap_log_level = KCAP_LOG_WARN;

static void kcap_vlog(int level, const char *fmt, va_list ap)
{
    if (level > kcap_log_level)
        return;
    char line[1200];
    int n = snprintf(line, sizeof line, "kcap: [pid %ld] ", (long)getpid());
    if (n < 0)
        return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}

void kcap_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kcap_vlog(level, fmt, ap);
    va_end(ap);
}

void kcap_log_once(atomic_int *flag, int level, const char *fmt, ...)
{
    if (atomic_exchange(flag, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    kcap_vlog(level, fmt, ap);
    va_end(ap);
}
