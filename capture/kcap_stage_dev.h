/*
 * kcap_stage_dev.h — the layouts the zero-stall staging path shares between libkcap's host
 * code (cc) and its kernels (kcap_gather.cu, nvcc): a tensor segment of a phase, the staging
 * kernels' arguments, the ring's device header, a call site's device state and a region's
 * doorbell in mapped host memory. Written once, so the two sides cannot drift apart; plain C
 * types only (no pointers: device addresses travel as unsigned long long).
 */
#ifndef KCAP_STAGE_DEV_H
#define KCAP_STAGE_DEV_H

#define KCAP_MAX_SEGS 10  /* tensors of one phase (the staging kernel's parameter array) */
#define KCAP_NCOUNTS 2    /* distinct device-side counts of one call */
#define KCAP_STAGE_THREADS 512     /* the staging kernels' block ... */
#define KCAP_STAGE_BLOCKS_PER_SM 2 /* ... and grid: enough loads in flight to stream rows */

/* One tensor of a phase (kcap_stage_layout.h computes them). */
struct kcap_seg {
    unsigned long long src; /* device address of the first row */
    long long dst_off;      /* static segments: byte offset of this segment in the region */
    long long row_bytes;    /* bytes per row */
    long long nrows;        /* static segments: rows */
    long long s0, s1, n1;   /* row r at src + (r / n1) * s0 + (r % n1) * s1 (bytes) */
    unsigned long long idx; /* non-zero: row r at src + idx[r] * s0 (pool rows) */
    int idx_size;           /* 4 or 8 */
    int counter;            /* -1 static; else rows = count[counter], placed after the fixed part */
    long long pool_rows;    /* range check of idx */
};

struct kcap_stage_args {
    unsigned long long ring;    /* struct kcap_ring_dev * */
    unsigned long long site;    /* struct kcap_site_dev * */
    unsigned long long bell;    /* mapped pinned host: struct kcap_bell[KCAP_RING_NREC] */
    unsigned long long outcome; /* eager sites: mapped pinned host word (gen << 1 | captured) */
    unsigned long long lost;    /* shadow graph sites: mapped host counter of divergences not staged */
    unsigned long long count_src[KCAP_NCOUNTS]; /* device address of each count element */
    int count_size[KCAP_NCOUNTS]; /* 4 or 8 */
    int ncounts;
    long long fixed_bytes;      /* bytes that do not depend on the counts */
    int phase;                  /* 0 inputs (places the region), 1 outputs (publishes it) */
    int nsegs;
    int site_id;
    int force;                  /* eager call the host already chose: no graph budget */
    unsigned int gen;           /* the host's launch number of this site (eager) */
    /* shadow mode, phase 0 of kcap_stage_both after a deferred compare (kcap_cmp_args.defer):
       its totals (struct kcap_cmp_dev *), results (struct kcap_cmp_out *, mapped host), tensor
       count and gen; cmp_dev 0: the compare published and ran the gate itself */
    unsigned long long cmp_dev, cmp_out;
    int cmp_nt;
    unsigned int cmp_gen;
    struct kcap_seg seg[KCAP_MAX_SEGS];
};

struct kcap_ring_dev {
    unsigned long long base;        /* staging memory, 0 when none (disarmed or no memory) */
    unsigned long long cap;         /* its bytes */
    unsigned long long head, tail;  /* bytes placed / released (monotonic; tail by the host) */
    unsigned long long tickets;     /* regions placed */
    unsigned long long tail_ticket; /* regions released (the host) */
    unsigned long long graph_taken; /* snapshots taken at graph replays, ever */
    unsigned long long graph_limit; /* graph_taken may grow up to this (the host) */
    unsigned long long big_need;    /* largest snapshot refused as larger than the ring */
    unsigned int lock;
    unsigned int drops_full, drops_big, drops_nomem;
};

struct kcap_site_dev {
    unsigned long long start; /* region start (monotonic; at base + start % cap) */
    unsigned long long end;
    long long count[KCAP_NCOUNTS];
    unsigned long long ticket;
    unsigned int done;   /* blocks finished in the current phase */
    int valid;           /* this launch captures */
    int status;          /* 1: an index was out of range (rows zero-filled) */
    unsigned int gen;
};

/* The doorbell of one region (index ticket % KCAP_RING_NREC): fields first, ticket last. */
struct kcap_bell {
    unsigned long long start, end;
    long long count[KCAP_NCOUNTS];
    int site_id;
    unsigned int gen;
    int status;
    int pad;
    unsigned long long ticket;
};

#endif
