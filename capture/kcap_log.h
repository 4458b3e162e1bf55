/*
 * kcap_log.h — kcap_log.c: one-line diagnostics on stderr, prefixed "kcap:", that never block
 * the host (a full pipe drops the line) and can be limited to once per process per cause.
 * Bottom layer of libkcap.
 */
#ifndef KCAP_LOG_H
#define KCAP_LOG_H

#include <stdatomic.h>

typedef enum kcap_loglevel { KCAP_LOG_QUIET = 0, KCAP_LOG_WARN = 1, KCAP_LOG_INFO = 2 } kcap_loglevel;

extern int kcap_log_level;
void kcap_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Log only the first time `flag` is seen set by this process (flag is a once-cell). */
void kcap_log_once(atomic_int *flag, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void kcap_log_atfork_child(void);

#endif
