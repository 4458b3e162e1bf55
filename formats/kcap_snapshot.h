/*
 * kcap_snapshot.h — the in-memory snapshot and the file API (write, read, check).
 *
 * A snapshot is one hooked call: metadata, scalar arguments, input tensors (as they were
 * before the call) and output tensors (after it), all in host memory as dense row-major
 * buffers. On disk it is one HDF5 file laid out as formats/FORMAT.md says, tensors chunked
 * and compressed with byte-shuffle + zstd (HDF5 filter 32015). Capture fills a snapshot and
 * hands it to a kcap_writer; replay and the CLI get one back from kcap_snapshot_read().
 */
#ifndef KCAP_SNAPSHOT_H
#define KCAP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_error.h" /* common/ */

#ifdef __cplusplus
extern "C" {
#endif

#define KCAP_FORMAT_MAJOR 1
#define KCAP_FORMAT_MINOR 2
#define KCAP_MAX_DIMS 4
#define KCAP_NAME_MAX 64

typedef enum kcap_dtype {
    KCAP_DT_INVALID = 0,
    KCAP_DT_BF16, /* stored as uint16 bits, attribute dtype = "bfloat16" */
    KCAP_DT_F16,
    KCAP_DT_F32,
    KCAP_DT_F64,
    KCAP_DT_I32,
    KCAP_DT_I64,
    KCAP_DT_U8,
    KCAP_DT_COUNT
} kcap_dtype;

size_t kcap_dtype_size(kcap_dtype dt);          /* 0 for invalid */
const char *kcap_dtype_name(kcap_dtype dt);     /* "bfloat16", "float16", "float32", ... */
kcap_dtype kcap_dtype_from_name(const char *s); /* KCAP_DT_INVALID if unknown */

/* IN: /inputs, OUT: /outputs (what the call returned), CAND: /candidate (format 1.2: what a
 * candidate kernel returned on the same inputs in shadow mode; same names as outputs). */
typedef enum kcap_dir { KCAP_DIR_IN = 1, KCAP_DIR_OUT = 2, KCAP_DIR_CAND = 3 } kcap_dir;
/* The group of a direction: "inputs", "outputs", "candidate". */
const char *kcap_dir_group(kcap_dir dir);

typedef struct kcap_tensor {
    char name[KCAP_NAME_MAX]; /* argument name from the call description, e.g. "q" */
    kcap_dir dir;
    kcap_dtype dtype;
    int ndim;
    int64_t shape[KCAP_MAX_DIMS];
    int has_strides;                /* 1 when the call passed a strided view */
    int64_t strides[KCAP_MAX_DIMS]; /* that view's strides, in elements */
    void *data;                     /* dense row-major, nbytes = prod(shape) * dtype size */
    size_t nbytes;
    int owned;                      /* 1: kcap_snapshot_free() frees data */
} kcap_tensor;

typedef enum kcap_scalar_type { KCAP_SC_INT = 1, KCAP_SC_FLOAT = 2 } kcap_scalar_type;

typedef struct kcap_scalar {
    char name[KCAP_NAME_MAX];
    kcap_scalar_type type;
    int64_t i; /* KCAP_SC_INT */
    double f;  /* KCAP_SC_FLOAT (a float32 argument is stored exactly) */
} kcap_scalar;

/* Root metadata (FORMAT.md lists each as an attribute). Strings are NUL-terminated. */
typedef struct kcap_meta {
    int format_major, format_minor;
    char call[KCAP_NAME_MAX]; /* call description name, e.g. "vattn_verify" */
    int abi_version;
    char time_utc[40];        /* ISO 8601, e.g. 2026-11-30T01:02:03.456Z */
    char host[256];
    int64_t pid;
    int rank;                 /* -1 when no RANK / LOCAL_RANK / TP-rank variable was set */
    char device_name[128];    /* "" / "cpu" for the CPU library */
    int cc_major, cc_minor;   /* 0 0 when unknown */
    int driver_version, runtime_version; /* CUDA's integer encodings, 0 when unknown */
    char lib_path[1024];      /* the kernel library that served the call */
    char lib_hash[80];        /* "xxh64:<16 hex>" of the library file's bytes */
    uint64_t seq;             /* the call's sequence number in its process (0-based) */
    int in_stream_capture;    /* 1 if the call was made during CUDA stream capture */
    int call_status;          /* what the real function returned */
    char kcap_version[32];
    char tags[256];           /* "key=value,..." the host set with kcap_tag (format 1.1; "" none) */
} kcap_meta;

typedef struct kcap_snapshot {
    kcap_meta meta;
    int nscalars;
    kcap_scalar *scalars;
    int ntensors;
    kcap_tensor *tensors;
} kcap_snapshot;

/* Create an empty snapshot (meta zeroed, format version set). NULL on allocation failure. */
kcap_snapshot *kcap_snapshot_create(void);
/* Free a snapshot and every owned tensor buffer. Accepts NULL. */
void kcap_snapshot_free(kcap_snapshot *s);
/* Append a scalar. */
int kcap_snapshot_add_int(kcap_snapshot *s, const char *name, int64_t v);
int kcap_snapshot_add_float(kcap_snapshot *s, const char *name, double v);
/* Append a tensor; allocates an owned dense buffer of the right size (returned in *data)
 * unless `borrow` is non-NULL, in which case the snapshot points at it (owned = 0). */
int kcap_snapshot_add_tensor(kcap_snapshot *s, const char *name, kcap_dir dir, kcap_dtype dt,
                             int ndim, const int64_t *shape, const int64_t *strides_or_null,
                             void *borrow, void **data);
/* Lookups (NULL / -1 if absent). */
const kcap_tensor *kcap_snapshot_tensor(const kcap_snapshot *s, const char *name, kcap_dir dir);
const kcap_scalar *kcap_snapshot_scalar(const kcap_snapshot *s, const char *name);
/* Total dense bytes of all tensors. */
size_t kcap_snapshot_bytes(const kcap_snapshot *s);

/* ---- writing ------------------------------------------------------------------------- */

typedef struct kcap_writer_opts {
    int threads;        /* compression threads; 0 = number of online CPUs */
    int level;          /* zstd level, default 1 (0 means default) */
    size_t chunk_bytes; /* target chunk size, default 4 MiB (0 means default) */
    size_t min_compress_bytes; /* smaller tensors stay uncompressed, default 64 KiB */
} kcap_writer_opts;

typedef struct kcap_writer kcap_writer; /* opaque: thread pool + scratch buffers */

/* opts may be NULL (defaults). NULL on failure (err says why). */
kcap_writer *kcap_writer_create(const kcap_writer_opts *opts, kcap_error *err);
void kcap_writer_free(kcap_writer *w); /* accepts NULL */

/* Write atomically: temp file in the same directory (mode 0600), fsync, rename without
 * replacing (renameat2 RENAME_NOREPLACE, else link + unlink), fsync dir. Never leaves a
 * partial file under `path`; never follows a symlink at `path`; never replaces an existing
 * file: KCAP_ERR_EXISTS when `path` exists (checked first, and again atomically at the
 * rename, so a concurrent writer of the same name loses cleanly, its temp file removed).
 * One snapshot at a time per writer (callers serialise); internally parallel. */
int kcap_snapshot_write(kcap_writer *w, const kcap_snapshot *s, const char *path,
                        kcap_error *err);

/* mkdir -p with mode 0700 for created components; refuses a symlink as the final component. */
int kcap_mkdir_private(const char *dir, kcap_error *err);

/* ---- reading ------------------------------------------------------------------------- */

/* Read and fully validate (structure, version, call description shapes, checksums).
 * On failure *out is NULL and err names the file, the dataset and the problem. */
int kcap_snapshot_read(const char *path, kcap_snapshot **out, kcap_error *err);

/* Metadata and tensor headers only (no data read; tensors have data == NULL), plus the
 * stored (compressed) byte count of each tensor in *stored_bytes (array of ntensors, caller
 * frees) when stored_bytes is non-NULL. For `kcap info` and `kcap ls`. */
int kcap_snapshot_read_header(const char *path, kcap_snapshot **out, size_t **stored_bytes,
                              kcap_error *err);

/* Full validation without keeping the data (kcap check). */
int kcap_snapshot_check(const char *path, kcap_error *err);

/* Register the zstd filter (id 32015) with the in-process libhdf5; idempotent. */
int kcap_h5zstd_register(void);

/* Copies src into dst (n bytes, NUL-terminated, truncated) with every byte that is not
 * printable ASCII, and the backslash, written as \xNN: every string that comes from a file
 * (metadata, names, paths) is printed through this, so terminal escape sequences stored
 * in a snapshot stay inert. Returns dst. */
const char *kcap_printable(char *dst, size_t n, const char *src);
/* kcap_printable into one of 8 static buffers used in turn (a 4096-byte path with every
 * byte escaped fits), so a printf may show several. Not thread-safe: for the commands'
 * terminal output. */
const char *kcap_shown(const char *src);

/* XXH64 of a buffer (seed 0), used for tensor checksums and lib_hash. */
uint64_t kcap_xxh64(const void *data, size_t len, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
