/*
 * kcap_gpu_int.h — what the two halves of the zero-stall GPU path share: the call side
 * (kcap_gpu.c: sites, staging launches on the caller's stream) and the drainer thread
 * (kcap_gpu_drain.c: ring memory, doorbells, read-back, snapshot rebuild). The device
 * structs mirror kcap_gather.cu's (keep them in sync). Internal to libkcap.so.
 */
#ifndef KCAP_GPU_INT_H
#define KCAP_GPU_INT_H

#include "kcap_cu.h"
#include "kcap_gpu.h"
#include "kcap_log.h"
#include "kcap_mem.h"
#include "kcap_meta.h"
#include "kcap_queue.h"
#include "kcap_state.h"
#include "kcap_ring.h"
#include "kcap_shadow_cmp.h"
#include "kcap_stage_layout.h"
#include "kcap_tags.h"

#include <pthread.h>
#include <string.h>

/* Eager calls reuse a small set of sites; a graph call keeps its site for the graph's life.
 * Sites live in chunks allocated as graphs are captured (device: 56 bytes a site). */
#define KCAP_EAGER_SITES 64
#define KCAP_SITE_CHUNK 1024
#define KCAP_SITE_CHUNKS 1024 /* 1,048,576 sites: far beyond what a service captures */
#define KCAP_ARGS_MAX 512 /* bytes of an args struct a site keeps (the descriptions' largest) */
#define KCAP_GSLOT_CHUNK 256         /* shadow compare slots of graph sites, per chunk ... */
#define KCAP_GSLOT_CHUNKS 64         /* ... 16,384 shadowed graph call sites at most */
#define KCAP_GCAND_MAX (4ull << 30)  /* candidate buffers for graphs: beyond, not judged */
#define KCAP_STAGE_SMS_UNKNOWN 64    /* SM count assumed when the device does not say */
#define KCAP_ONE_WARP 32             /* block of the one-thread kernels (gate, ring control) */
#define KCAP_DRAIN_POLL_ARMED_NS 100000ull   /* drainer sleep without doorbells, armed ... */
#define KCAP_DRAIN_POLL_IDLE_NS 20000000ull  /* ... and disarmed (20 ms: costs nothing) */
#define KCAP_DEV_READ_ARMED_NS 2000000ull    /* ring header read-back period, armed ... */
#define KCAP_DEV_READ_IDLE_NS 20000000ull    /* ... and disarmed */
#define KCAP_BELL_LOOKAHEAD 64       /* doorbells past the newest seen (streams finish out of order) */
#define KCAP_QUEUE_WAIT_NS 500000L   /* the drainer's wait for the writer queue to make room */
#define KCAP_SHUTDOWN_POLL_US 1000   /* exit: poll of eager sites still running, ... */
#define KCAP_SHUTDOWN_DRAIN_US 2000  /* ... and of the drainer finishing */
#define KCAP_BOUNCE_BYTES (8u << 20) /* pinned bounce buffer of the read-back */
/* Budget units the drainer keeps granted to the device for graph replays (each reserved on
 * the host first): at most this many graph snapshots are staged and not yet drained. */
#define KCAP_GRAPH_GRANT 16
/* Granted units the device left unused this long, while host calls were turned away for
 * want of a unit, are taken back, and none is granted again for as long (so those calls get
 * them). */
#define KCAP_GRANT_IDLE_NS 100000000ull

/* The staging kernels' layouts (kcap_stage_dev.h, shared with kcap_gather.cu). */
typedef struct kcap_stage_args kstage_args;
typedef struct kcap_ring_dev kring_dev;
typedef struct kcap_site_dev ksite_dev;
typedef struct kcap_bell kbell;

/* Shadow mode's compare: its layouts (kcap_shadow_cmp.h, shared with the kernel). */
typedef struct kcap_cmp_tensor kcmp_tensor;
typedef struct kcap_cmp_acc kcmp_acc;
typedef struct kcap_cmp_dev kcmp_dev;
typedef struct kcap_cmp_res kcmp_res;
typedef struct kcap_cmp_out kcmp_out;
typedef struct kcap_cmp_args kcmp_args;

/* What the host remembers of a call site to rebuild its snapshots. */
typedef struct ksite {
    int graph;
    _Alignas(16) unsigned char args[KCAP_ARGS_MAX]; /* the call's args struct, as it was */
    kcap_slot *sl;
    kcap_layout lay;        /* where its tensors go in a region */
    char tags[KCAP_TAGS_TEXT]; /* the calling thread's tags (kcap_tag) when it was staged */
    int status;             /* the real call's return */
    uint64_t seq;
    /* eager sites only */
    int used;
    unsigned int gen;       /* launch number, echoed by the device in outcome, doorbell and verdict */
    atomic_int pending;     /* launched, not yet settled (captured or dropped) */
    atomic_int launched;    /* the caller is done with it (event recorded, or failed) */
    CUevent done;           /* the phase-1 kernel has run */
    /* shadow mode (eager sites): the candidate's args (outputs and workspace in cand) */
    int shadow;
    _Alignas(16) unsigned char cargs[KCAP_ARGS_MAX];
    CUdeviceptr cand;       /* the candidate's outputs, then its workspace */
    size_t cand_cap;
    CUevent tev[4];         /* timing: production start, end; candidate start, end */
    int timed;              /* tev[] recorded for this call (1 eager call in KCAP_SHADOW_TIME_EVERY) */
    /* the rest of an eager shadowed call after production (kcap_shadow_eager_chain): queued
       by the calling thread, or by the worker thread on a side stream (kcap_gpu_shadow_async.c) */
    kcap_call_fn cand_fn;
    size_t cand_wsb, cand_out; /* the candidate's workspace bytes; its outputs' bytes */
    kcmp_args ca;
    CUevent ready;          /* production has run (the side chain waits for it) */
    CUstream side;
    /* shadow mode in CUDA graphs: the compare's slot (result in gcmp_out) and what the
       drainer has reported of its running totals; both paths: the policy's number of the
       candidate the call was launched with (kcap_gpu_shadow's cand_gen) */
    int gslot;
    unsigned long long seen_agreed, seen_lost; /* agreed and lost replays reported */
    unsigned long long cand_gen;
} ksite;

typedef struct kring {
    const kcap_cu *cu;
    CUcontext ctx;
    CUmodule mod;
    CUfunction stage, gate, ctl, cmp, poison, stage_both;
    int nblocks;                     /* staging grid: 2 blocks per SM */
    CUdeviceptr hdr;                 /* kring_dev */
    CUdeviceptr ctl_out;             /* 3 words written by kcap_ring_ctl */
    CUdeviceptr site_dev[KCAP_SITE_CHUNKS];
    ksite *site_host[KCAP_SITE_CHUNKS];
    int nsites;                      /* sites handed out (eager ones first) */
    int next_eager;
    volatile kbell *bell;            /* pinned, mapped: [KCAP_RING_NREC] */
    volatile unsigned long long *outcome; /* pinned, mapped: [KCAP_EAGER_SITES] */
    volatile kcmp_out *cmp_out;      /* shadow compare results, pinned, mapped: [KCAP_EAGER_SITES] */
    CUdeviceptr cmp_dev;             /* kcmp_dev[KCAP_EAGER_SITES] */
    /* shadow mode in CUDA graphs (kcap_gpu_shadow_graph.c): compare slots in chunks
       (results in mapped host memory), the candidate buffers of each capture */
    volatile kcmp_out *gcmp_out[KCAP_GSLOT_CHUNKS];
    CUdeviceptr gcmp_dev[KCAP_GSLOT_CHUNKS];
    int ngslots;
    unsigned long long gcand_bytes;  /* candidate buffer bytes taken for graphs */
    CUstream trial;                  /* the candidate's trial capture (kcap_gpu_shadow_graph.c) */
    unsigned long long trial_gen;    /* the candidate it tried last, and with what result */
    int trial_ok, trial_done;
    void *bounce;                    /* pinned, KCAP_BOUNCE_BYTES */
    CUstream side;
    /* ring memory: set by the drainer (or the first eager call), read by callers */
    _Atomic unsigned long long base;
    unsigned long long cap;
    uint64_t alloc_retry_ns;         /* no new allocation attempt before this */
    kcap_ring_books *books;          /* drainer only */
    unsigned long long seen[KCAP_RING_NREC]; /* drainer: last ticket drained per doorbell */
    /* graph budget (drainer): units reserved on the host and granted to the device; the
       device may take graph snapshots up to limit = graph_settled + granted */
    unsigned long long graph_settled, granted, pushed_limit;
    int revoked;
    /* granted units the device leaves idle go back to the host (eager calls may need them):
       the device's graph_taken at the last read and since when it has not moved */
    unsigned long long last_taken, last_turned_away;
    uint64_t last_taken_ns, grant_hold_until_ns;
    unsigned int last_drops[3];
    uint64_t idle_since_ns;
    pthread_t drainer;
    int drainer_running;
    atomic_int stop, all_drained;
} kring;

extern pthread_mutex_t kcap_g_ring_lock; /* sites and ring creation */

ksite *kcap_site(kring *r, int sid);
/* One more site (caller holds kcap_g_ring_lock): its id, or -1 (none left, no memory). */
int kcap_site_new(kring *r);
/* A site taken for a new call (caller holds kcap_g_ring_lock): what the drainer needs to
 * rebuild its snapshots (args, slot, sequence number, the thread's tags), a new launch
 * number; pending for an eager call the drainer is to settle. Layout and shadow parts are
 * the caller's. */
static inline void kcap_site_fill(ksite *s, kcap_slot *sl, const void *a, uint64_t seq, int graph, int shadow,
                    int pending)
{
    s->used = 1;
    s->graph = graph;
    s->shadow = shadow;
    s->timed = 0;
    memcpy(s->args, a, sl->desc->args_size);
    s->sl = sl;
    s->seq = seq;
    s->gen++;
    atomic_store(&s->launched, 0);
    atomic_store(&s->pending, pending);
    kcap_tags_text(s->tags, sizeof s->tags);
}
CUdeviceptr kcap_site_dev(kring *r, int sid);

/* What the drainer makes of an eager site's outcome word (gen << 1 | staged) and, for a
 * shadowed call (judged), its compare's verdict word (gen << 32 | divergent), each read in
 * one load from mapped memory. The compare writes the two with no fence between them, so an
 * outcome may be seen before its verdict: WAIT, and read both again on a later pass. */
enum { KCAP_EAGER_WAIT, KCAP_EAGER_STAGED, KCAP_EAGER_DROPPED, KCAP_EAGER_AGREED, KCAP_EAGER_LOST };
static inline int kcap_eager_outcome(unsigned long long outcome, int judged, unsigned long long verdict,
                                     unsigned int gen)
{
    if ((unsigned int)(outcome >> 1) != gen)
        return KCAP_EAGER_WAIT;
    if (outcome & 1)
        return KCAP_EAGER_STAGED; /* its doorbell settles it */
    if (!judged)
        return KCAP_EAGER_DROPPED;
    if ((unsigned int)(verdict >> 32) != gen)
        return KCAP_EAGER_WAIT;
    return verdict & 1 ? KCAP_EAGER_LOST : KCAP_EAGER_AGREED;
}
/* Ring memory: allocate within the bound and the device's spare memory (0 ok, -1 none).
 * may_wait 0 (a host thread): give up at once if the drainer is busy with the memory. */
int kcap_ring_alloc_mem(kring *r, int may_wait);
/* Log once why there is no ring (kcap_gpu.c). */
void kcap_gpu_nomem_log(unsigned long long free_b, unsigned long long total_b, unsigned long long want);
/* The staging kernels' arguments of a site's phase (force: an eager call, no graph budget;
 * lost 0: shadow mode's judge launch sets it). */
void kcap_stage_args_fill(kring *r, ksite *s, int sid, int phase, int force, kstage_args *p);
/* Launch a site's gate (phase 0) and staging kernel of a phase. */
CUresult kcap_stage_launch(kring *r, ksite *s, int sid, int phase, int force, CUstream st);
/* The ring of the current context (NULL: none possible), and a free eager site (-1: none),
 * the next in turn or (lowest: shadow mode, whose sites own candidate buffers, so few should
 * be in use) the first free. Caller holds kcap_g_ring_lock. */
kring *kcap_ring_of(const kcap_cu *cu, CUcontext ctx);
int kcap_eager_site_take(kring *r, int lowest);
/* The drainer's hand-off of a settled shadowed site to the policy layer (kcap_gpu.h), with
 * the stream times of the production and candidate calls. */
int kcap_gpu_shadow_report(kring *r, ksite *s, int verdict, kcap_snapshot *snap, kcap_snapshot *cand);
/* Shadow mode (kcap_gpu_shadow.c), shared by the eager and graph paths: where each output of
 * the candidate goes in its buffer (off[k]; *out_bytes of outputs; returns the whole need
 * with its workspace); the compare's view of the outputs (-1: an output it cannot judge);
 * a site's candidate args (outputs in cand) and layout with the candidate's outputs staged
 * after the production ones. */
size_t kcap_shadow_plan(const kcap_layout *lay, size_t cand_wsb, size_t *off, size_t *out_bytes);
/* The compare's views of a call's outputs, the candidate's as offsets into its buffer
 * (-1: outputs this compare cannot judge); kcap_shadow_cmp_rebase adds the buffer's address
 * once it is known. */
int kcap_shadow_cmp_view(const kcap_layout *lay, const size_t *off, kcmp_args *ca);
void kcap_shadow_cmp_rebase(kcmp_args *ca, CUdeviceptr cand);
void kcap_shadow_site_args(ksite *s, const kcap_call_desc *d, const void *a, const kcap_layout *lay,
                           CUdeviceptr cand, const size_t *off);
/* The poison fill of the candidate's outputs; it also resets the compare totals at cmp_dev
 * (the site's kcmp_dev), which a deferred compare leaves to its staging kernel. */
CUresult kcap_shadow_poison_launch(kring *r, CUdeviceptr p, size_t bytes, CUdeviceptr cmp_dev, CUstream st);
/* After the candidate: the compare, whose publishing block runs the gate (only a divergent call is
 * staged), then both staging phases in one launch (kcap_stage_both); a multi-block compare
 * leaves its join, publish and gate to that staging kernel (ca->defer). force: an eager call;
 * stage 0: the compare alone, no gate (a failed candidate's graph nodes: nothing is staged). */
CUresult kcap_shadow_judge_launch(kring *r, ksite *s, int sid, int force, kcmp_args *ca, int stage,
                                  CUstream st);
/* The candidate's part of an eager shadowed call, on st after production: poison, the
 * candidate (its status in *cst; not OK: nothing of kcap's after it), the compare and
 * staging. Returns the first failed launch of kcap's. */
CUresult kcap_shadow_eager_chain(kring *r, ksite *s, int sid, CUstream st, int *cst);
/* Shadow mode's worker thread (kcap_gpu_shadow_async.c): after the production call on st,
 * queue st's wait for the site's chain and hand the chain to the worker (0), or do nothing
 * (-1: off, unavailable, no side stream; the caller runs the chain in stream). */
int kcap_shadow_async_submit(kring *r, ksite *s, int sid, CUstream st);
/* The drainer: 1 when eager site sid's call gen was let go before its chain ran (what the
 * chain read may have changed: the call is reported KCAP_SHADOW_UNJUDGED). */
int kcap_shadow_async_let_go(int sid, unsigned int gen);
/* A call of entry point `call` with candidate cand_gen has run in stream (its module is
 * loaded): later ones may go through the worker. */
void kcap_shadow_async_warm(int call, unsigned long long cand_gen);
/* A forked child has no worker thread, and an exiting process takes no new job: off. */
void kcap_shadow_async_atfork_child(void);
void kcap_shadow_async_stop(void);
/* The graph path (kcap_gpu_shadow_graph.c): a call in CUDA graph capture (kcap_gpu_shadow's
 * contract), and the drainer's reading of the graph sites' running totals. */
int kcap_gpu_shadow_graph(kring *r, kcap_slot *sl, const void *a, void *ws, size_t wsb, CUstream st,
                          uint64_t seq, kcap_call_fn cand, size_t cand_wsb, uint64_t cand_gen,
                          int *status_out, int *cand_failed);
void kcap_gpu_shadow_graph_settle(kring *r);
void kcap_gpu_shadow_graph_atfork_child(void);
volatile kcmp_out *kcap_gslot_out(kring *r, int slot);
/* The drainer thread (kcap_gpu_drain.c). */
void *kcap_drainer_main(void *arg);
/* Capture-mode switch around CUDA calls made while a host thread may be capturing. */
CUstreamCaptureMode kcap_relax(const kcap_cu *cu);
void kcap_unrelax(const kcap_cu *cu, CUstreamCaptureMode m);

/* kcap_capture.c */
int kcap_gpu_armed(void);
int kcap_gpu_unit_take(void);
unsigned long long kcap_gpu_turned_away(void);
int kcap_gpu_unlimited(void);
void kcap_gpu_unit_settled(int captured);

#endif
