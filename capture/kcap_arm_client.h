/*
 * kcap_arm_client.h — kcap_arm_client.c: send one command to a running libkcap.so through
 * its control file and print its answer (the CLI side of kcap_arm.c's watcher).
 */
#ifndef KCAP_ARM_CLIENT_H
#define KCAP_ARM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a request file: header lines and the command. */
#define KCAP_ARM_REQUEST_MAX 512

/* Send `cmd` ("count N", "off", "status", "shadow PATH", ...) to process `pid`, which must
 * carry libkcap.so and have been started with the environment variable `need` set
 * (KCAP_DORMANT=1 or KCAP_SHADOW); DIR NULL = its KCAP_DIR. Waits up to wait_s seconds for
 * the answer, prints it (as `who`), returns 0 for "ok", 1 otherwise (said why). */
int kcap_arm_send(const char *who, long pid, const char *dir, const char *need,
                  const char *cmd, uint64_t wait_s, int verbosity);
/* The value of `name` in process pid's environment (0), or -1. */
int kcap_env_of_pid(long pid, const char *name, char *out, size_t n);
/* Whether process pid can take a request: it exists, carries libkcap.so, is ours (or we are
 * root) and was started with `need` set (as kcap_arm_send says). 0, or 1 with the reason on
 * stderr. */
int kcap_arm_target(const char *who, long pid, const char *need);
/* The capture directory of process pid: `dir` when given, else its KCAP_DIR, which must be
 * absolute (a relative one is relative to the process's start). 0, or 1 with the reason on
 * stderr, prefixed by `who`. */
int kcap_arm_dir_of(const char *who, long pid, const char *dir, char *d, size_t n);

#endif
