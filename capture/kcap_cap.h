/*
 * kcap_cap.h — internals of libkcap.so shared by the files of capture/ (not installed).
 *
 * libkcap.so is split by concern: kcap_interpose.c (how calls are caught: symbol + dlsym),
 * kcap_capture.c (the slow path: selection, recording, metadata, stats, fork/exit),
 * kcap_queue.c (bounded queue + writer thread), kcap_arm.c (runtime arming watcher),
 * kcap_mem.c (host and device memory ops), kcap_gpu.c (issue 8: zero-stall device staging),
 * kcap_config.c (environment parsing, also used by `kcap record`), kcap_log.c,
 * kcap_meta.c (snapshot metadata, library identity, work on a thread of our own),
 * kcap_names.c (run id, file names, stale-file cleanup), kcap_size.c (memory bound of a call),
 * kcap_callrec.c (recording one call).
 * Everything here is hidden from the host process by the link's version script.
 */
#ifndef KCAP_CAP_H
#define KCAP_CAP_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kcap_calls.h"
#include "kcap_snapshot.h"

#define KCAP_MAX_RANGES 64

typedef enum kcap_loglevel { KCAP_LOG_QUIET = 0, KCAP_LOG_WARN = 1, KCAP_LOG_INFO = 2 } kcap_loglevel;

typedef struct kcap_range {
    uint64_t lo, hi; /* inclusive */
} kcap_range;

/* Everything the environment can set (capture/README.md lists each variable). */
typedef struct kcap_config {
    char dir[PATH_MAX];      /* KCAP_DIR (required) */
    int nranges;             /* KCAP_CALLS; 0 = every call */
    kcap_range ranges[KCAP_MAX_RANGES];
    uint64_t every;          /* KCAP_EVERY; 1 = every call */
    uint64_t max;            /* KCAP_MAX snapshots; 0 = unlimited */
    uint64_t max_bytes;      /* KCAP_MAX_BYTES (dense bytes accepted); 0 = unlimited */
    uint64_t queue_bytes;    /* KCAP_QUEUE_BYTES: bound of all host memory capture allocates */
    int dormant;             /* KCAP_DORMANT=1 */
    int log;                 /* KCAP_LOG quiet|warn|info */
    int flush_ms;            /* KCAP_FLUSH_TIMEOUT seconds at exit, as ms */
    int fork_follow;         /* KCAP_FORK=follow (child captures into its own files) | dormant */
    int level;               /* KCAP_ZSTD_LEVEL */
    int threads;             /* KCAP_THREADS compression threads; 0 = min(4, CPUs) */
    uint64_t ring_bytes;     /* KCAP_RING_BYTES: bound of the device staging ring */
    int gpu_async;           /* KCAP_GPU_MODE=async (issue 8, default) | sync */
    char run_id[20];         /* KCAP_RUN_ID; "" = 8 random hex digits drawn at start */
} kcap_config;

/* Parse the KCAP_* variables through `get` (getenv-like). Returns 0, or KCAP_ERR_CONFIG with
 * one sentence naming the variable and the problem in why[]. Defaults are filled first. */
typedef const char *(*kcap_getenv_fn)(const char *name, void *ud);
int kcap_config_parse(kcap_config *c, kcap_getenv_fn get, void *ud, char *why, size_t whylen);
void kcap_config_defaults(kcap_config *c);
/* Number parsers shared with `kcap record`: plain / with K,M,G(,T) binary suffixes / ranges. */
int kcap_parse_u64(const char *s, uint64_t *out);
int kcap_parse_bytes(const char *s, uint64_t *out);
int kcap_parse_ranges(const char *s, kcap_range *r, int max, int *n);
/* 1/yes/true/on -> 1, 0/no/false/off -> 0 (case-insensitive); -1 otherwise. */
int kcap_parse_bool(const char *v, int *out);
/* 1 if seq is selected by ranges/every. */
int kcap_config_selects(const kcap_config *c, uint64_t seq);

/* ---- log (stderr, one line, prefix "kcap:") ---- */
extern int kcap_log_level;
void kcap_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Log only the first time `flag` is seen set by this process (flag is a once-cell). */
void kcap_log_once(atomic_int *flag, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void kcap_log_atfork_child(void);

/* ---- interposition (kcap_interpose.c) ---- */
/* Every hooked call has this shape: args struct, workspace, its bytes, stream. */
typedef int (*kcap_call_fn)(const void *args, void *ws, size_t ws_bytes, void *stream);
/* The status every hooked ABI returns for success. */
#define KCAP_CALL_OK 0

/* One index per line of the hooked-call list, in its order (= kcap_builtin_calls). */
enum {
#define KCAP_HOOK(sym, family) KCAP_CALL_##sym,
#include "vattn_hooks.def"
#undef KCAP_HOOK
    KCAP_NCALLS
};

typedef struct kcap_slot {
    _Atomic(kcap_call_fn) real;  /* the library's function this slot forwards to */
    int call;                    /* KCAP_CALL_* */
    const kcap_call_desc *desc;  /* its description */
    /* cached library identity, filled on first capture through this slot */
    atomic_int lib_ready;
    char lib_path[1024];
    char lib_hash[80];
    void *lib_base;
} kcap_slot;

/* Set when a call must take the slow path (not initialised yet, or capture active). The
 * dormant / disabled fast path is one relaxed load of this flag. */
extern atomic_int kcap_g_slow;

const char *kcap_call_name(int call);
int kcap_slow_call(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream);
void kcap_interpose_atfork_child(void); /* re-initialise the wrapper-slot lock */

/* ---- capture core (kcap_capture.c) ---- */
void kcap_init_once(void);
const kcap_config *kcap_cfg(void);
/* From the watcher: arm (count), disarm (off) or only report (status_only); the reply for
 * `kcap arm` ("ok ..." / "error ...", then the stats line) goes to reply. 0 or -1 (refused). */
int kcap_arm_request(uint64_t count, int off, int status_only, char *reply, size_t n);
void kcap_capture_stop(const char *why);      /* stop for good (disk full, ...) */
uint64_t kcap_now_ns(void);

/* Every call that was selected but not captured is counted under exactly one reason, so
 * `captured + sum(dropped_*) + failures` adds up to the selected calls (graph replays
 * included). The first drop of each reason is logged with what to do about it. */
typedef struct kcap_stats {
    atomic_ullong calls, selected, captured, written, dropped_queue, dropped_cap,
        dropped_ring_full,   /* device staging ring busy with earlier snapshots */
        dropped_ring_big,    /* one snapshot larger than the whole ring (KCAP_RING_BYTES) */
        dropped_ring_nomem,  /* no ring: the device lacked the free memory for it */
        dropped_sites,       /* no graph / eager site left (a site table limit) */
        dropped_backoff,     /* writes kept failing: capture waits before retrying (kcap_queue.c) */
        skipped_graph, skipped_invalid, failed_record, failed_write, bytes_accepted,
        bytes_written_dense, graph_captured;
} kcap_stats;
extern kcap_stats kcap_g_stats;
/* All ring drops (the old single `ring=` counter). */
unsigned long long kcap_stats_ring_drops(void);
/* One line of every counter, `key=value` separated by spaces (stats line, arm status). */
int kcap_stats_format(char *buf, size_t n);

/* ---- queue + writer (kcap_queue.c) ---- */
int kcap_queue_push(kcap_snapshot *s, uint64_t seq, int rank); /* 0 or KCAP_ERR_FULL/STOP */
int kcap_queue_would_fit(size_t bytes);
/* KCAP_QUEUE_BYTES bounds every host byte kcap allocates: queued snapshots, the writer's
 * buffers and the copies of calls being recorded. A call reserves its bound (kcap_size.h)
 * before copying (0, or KCAP_ERR_FULL: copy nothing), hands it to the queue with the
 * snapshot (push_reserved: the reservation becomes the snapshot's real size), or gives it
 * back (unreserve; 0 is a no-op). */
int kcap_queue_reserve(size_t bytes);
void kcap_queue_unreserve(size_t bytes);
int kcap_queue_push_reserved(kcap_snapshot *s, uint64_t seq, int rank, size_t reserved);
/* The most bytes one snapshot can ever get in the queue: KCAP_QUEUE_BYTES less the writer's
 * buffers. A snapshot larger than this never fits (kcap_queue_would_fit stays 0 for it). */
size_t kcap_queue_room(void);
/* 1 while writes keep failing and capture waits before the next attempt (1 s .. 60 s). */
int kcap_queue_backoff(void);
int kcap_queue_flush(int timeout_ms); /* returns snapshots still pending at the deadline */
void kcap_queue_atfork_prepare(void);
void kcap_queue_atfork_parent(void);
void kcap_queue_atfork_child(void);
void kcap_queue_drop_all(void);
uint64_t kcap_queue_pending(void);

/* ---- arming watcher (kcap_arm.c) ---- */
void kcap_arm_start(const char *dir);
/* Temp and control files of dead processes older than this are removed at start. */
#define KCAP_STALE_AGE_S 10
void kcap_arm_atfork_child(void);
/* Name of the control file a `kcap arm PID` drops into the capture directory. */
#define KCAP_ARM_FILE_FMT ".kcap-arm-%ld"

/* ---- memory ops (kcap_mem.c) ---- */
typedef struct kcap_devctx {
    const void *cu;    /* const kcap_cu *, NULL for host memory */
    void *stream;      /* CUstream of the call */
    void *ctx;         /* CUcontext of the pointers */
    int64_t num_slots; /* range check of gathered rows */
    size_t max_copy;   /* refuse a single copy above this (garbage sizes) */
    int err;           /* first failure: KCAP_ERR_* */
    int cu_err;        /* CUresult of that failure */
} kcap_devctx;

/* Classify the call's memory: 0 host, 1 device (CUDA driver loaded by the host and the
 * pointer known to it). On device, *cu_out and *ctx_out are set. */
int kcap_mem_classify(const void *ptr, const void **cu_out, void **ctx_out);
/* Host ops that never crash on a bad pointer (process_vm_readv, memcpy fallback). */
void kcap_mem_host_ops(kcap_devctx *dc, kcap_mem_ops *ops);
/* Device ops: copies enqueued on dc->stream, gather on the device. */
void kcap_mem_dev_ops(kcap_devctx *dc, kcap_mem_ops *ops);
/* Device helpers: make the pointer's context current (saving the host's), restore. */
int kcap_dev_push(kcap_devctx *dc, void **saved);
void kcap_dev_pop(kcap_devctx *dc, void *saved);
/* 1 if the stream is capturing (or its status cannot be read). */
int kcap_dev_stream_capturing(kcap_devctx *dc);
/* Device identity for the metadata. */
void kcap_dev_meta(kcap_devctx *dc, kcap_meta *m);
/* The embedded PTX of the gather kernels ("" when built without nvcc). */
extern const char kcap_gather_ptx[];
int kcap_dev_module(const void *cu, void **fn_gather, void **fn_stage, void **fn_gate);

/* ---- zero-stall GPU path (kcap_gpu.c) ---- */
/* 0: capture staged (async), 1: not handled (caller uses the synchronous path),
 * <0 handled and dropped/failed (counted). */
int kcap_gpu_capture(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                     uint64_t seq, int in_capture, int *status_out);
void kcap_gpu_shutdown(int timeout_ms);
void kcap_gpu_atfork_child(void);

/* Filled by the core for each snapshot (kcap_capture.c). */
void kcap_fill_meta(kcap_slot *sl, kcap_meta *m, uint64_t seq, kcap_devctx *dc);
int kcap_rank(void);

#include "kcap_meta.h"

#endif
