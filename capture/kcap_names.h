/*
 * kcap_names.h — what makes this process's files and control messages its own: a run id
 * drawn at start (so a reused PID — PID 1 after a container restart — never names a file the
 * same as an earlier run), the process start time (ties `kcap arm` requests to this
 * process's life), the snapshot file names, and the cleanup of temp files that dead
 * processes left in the capture directory.
 */
#ifndef KCAP_NAMES_H
#define KCAP_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Draw a new run id and read the start time (at init and in a forked child). */
void kcap_names_init(void);
/* 8 lowercase hex digits, e.g. "3f9a2c1b", or what KCAP_RUN_ID set. */
const char *kcap_run_id(void);
void kcap_set_run_id(const char *id); /* "" keeps the drawn one */
/* What /proc/PID/stat says of a process (pid 0 = self), read once: its state (field 3:
 * 'R', 'S', 'Z'...), parent and start time (field 22, clock ticks since boot; 0 unknown).
 * 0, or -1 when it cannot be read (errno: ENOENT for a pid that names no process). */
typedef struct {
    char state;
    long ppid;
    unsigned long long start;
} kcap_proc_info;
int kcap_proc_stat(long pid, kcap_proc_info *pi);
/* Its start time alone; 0 when unreadable. */
unsigned long long kcap_proc_start_time(long pid);
unsigned long long kcap_self_start_time(void);
/* DIR/<call>[-r<rank>]-p<pid>-<runid>-<s|g><seq>[-<try>].h5 into out. */
int kcap_snapshot_name(char *out, size_t n, const char *dir, const char *call, int rank,
                       long pid, int graph, unsigned long long seq, int attempt);
/* Remove `.kcap-tmp.<pid>.*` files (and kcap arm's temp / request / ack files) of processes
 * that are dead in our PID namespace and older than `min_age_s`. Returns files removed. */
int kcap_clean_stale(const char *dir, int min_age_s);

#endif
