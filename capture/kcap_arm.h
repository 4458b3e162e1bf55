/*
 * kcap_arm.h — kcap_arm.c: the arming watcher, a thread of ours that answers `kcap arm PID`
 * through a control file in the capture directory (uid, pid start time and an ack checked).
 * Mechanism layer: what a request does is the handler the capture policy passes in.
 */
#ifndef KCAP_ARM_H
#define KCAP_ARM_H

#include <stddef.h>
#include <stdint.h>

/* The reply to one request: arm (count), disarm (off) or only report (status_only); the
 * text for `kcap arm` ("ok ..." / "error ...", then the stats line) goes to reply. 0 or -1. */
typedef int (*kcap_arm_handler)(uint64_t count, int off, int status_only, char *reply, size_t n);
/* Watch `dir` for this process's control file and answer each request through `handler`. */
void kcap_arm_start(const char *dir, kcap_arm_handler handler);
/* Requests whose command starts with "shadow" go to this handler instead (the command line
 * as written, e.g. "shadow /abs/cand.so", "shadow-off", "shadow-status"). */
typedef int (*kcap_arm_cmd_handler)(const char *cmd, char *reply, size_t n);
void kcap_arm_set_shadow_handler(kcap_arm_cmd_handler handler);
/* Temp and control files of dead processes older than this are removed at start. */
#define KCAP_STALE_AGE_S 10
void kcap_arm_atfork_child(void);
/* Name of the control file a `kcap arm PID` drops into the capture directory. */
#define KCAP_ARM_FILE_FMT ".kcap-arm-%ld"

#endif
