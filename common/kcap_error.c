/*
 * kcap_error.c — the one table of error messages, and the detailed-error helpers.
 * Kept beside the codes so adding a code without a message fails the static assert.
 */
#include "kcap_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const kcap_err_table[KCAP_ERR_COUNT] = {
    [KCAP_OK] = "success",
    [KCAP_ERR_ARG] = "invalid argument",
    [KCAP_ERR_NOMEM] = "out of memory or memory cap reached",
    [KCAP_ERR_IO] = "input/output error",
    [KCAP_ERR_NOT_SNAPSHOT] = "not a kcap snapshot",
    [KCAP_ERR_VERSION] = "unsupported snapshot format version",
    [KCAP_ERR_CORRUPT] = "snapshot structure is damaged",
    [KCAP_ERR_CHECKSUM] = "checksum mismatch",
    [KCAP_ERR_SHAPE] = "tensor shape or dtype disagrees with the call description",
    [KCAP_ERR_HDF5] = "HDF5 library error",
    [KCAP_ERR_ZSTD] = "zstd error",
    [KCAP_ERR_CUDA] = "CUDA error",
    [KCAP_ERR_CONFIG] = "invalid configuration",
    [KCAP_ERR_LIBRARY] = "kernel library could not be loaded or has the wrong ABI",
    [KCAP_ERR_UNKNOWN_CALL] = "unknown call name",
    [KCAP_ERR_FULL] = "queue or cap full, item dropped",
    [KCAP_ERR_KERNEL] = "kernel returned an error status",
    [KCAP_ERR_MISMATCH] = "result outside tolerance",
    [KCAP_ERR_UNSUPPORTED] = "not supported here",
    [KCAP_ERR_EXISTS] = "file exists (never replaced)",
};

_Static_assert(sizeof(kcap_err_table) / sizeof(kcap_err_table[0]) == KCAP_ERR_COUNT,
               "every kcap_err needs a message");

const char *kcap_err_string(int code)
{
    if (code < 0 || code >= KCAP_ERR_COUNT || !kcap_err_table[code])
        return "unknown error code";
    return kcap_err_table[code];
}

int kcap_error_set(kcap_error *e, int code, const char *fmt, ...)
{
    if (!e)
        return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

void kcap_error_prefix(kcap_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char head[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* head, ": ", old — truncated to the buffer, never overflowing */
    size_t n = strlen(head);
    if (n > sizeof e->msg - 3)
        n = sizeof e->msg - 3;
    memcpy(e->msg, head, n);
    memcpy(e->msg + n, ": ", 2);
    size_t room = sizeof e->msg - n - 3, ol = strlen(old);
    if (ol > room)
        ol = room;
    memcpy(e->msg + n + 2, old, ol);
    e->msg[n + 2 + ol] = '\0';
}
