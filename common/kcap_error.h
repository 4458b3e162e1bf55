/*
 * kcap_error.h — error codes and messages shared by every kcap module.
 *
 * zstd-style: functions return an int code (0 = KCAP_OK); kcap_err_string() is the one
 * table of generic messages. Where a caller needs the specifics (which file, which dataset,
 * what is wrong), functions also take an optional kcap_error* that receives the code and a
 * formatted sentence. Libraries never print and never exit(); the CLI prints.
 */
#ifndef KCAP_ERROR_H
#define KCAP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kcap_err {
    KCAP_OK = 0,
    KCAP_ERR_ARG,         /* bad argument from the caller (NULL, out of range, bad option) */
    KCAP_ERR_NOMEM,       /* allocation failed or a memory cap was reached */
    KCAP_ERR_IO,          /* open/read/write/fsync/rename failed (errno text in the message) */
    KCAP_ERR_NOT_SNAPSHOT,/* not an HDF5 file, or an HDF5 file that is not a kcap snapshot */
    KCAP_ERR_VERSION,     /* unknown major format version */
    KCAP_ERR_CORRUPT,     /* structure damaged: missing/extra datasets, bad attributes */
    KCAP_ERR_CHECKSUM,    /* stored checksum does not match the data */
    KCAP_ERR_SHAPE,       /* a tensor's shape or dtype disagrees with the call description */
    KCAP_ERR_HDF5,        /* libhdf5 reported an error */
    KCAP_ERR_ZSTD,        /* zstd compression or decompression failed */
    KCAP_ERR_CUDA,        /* a CUDA runtime/driver call failed */
    KCAP_ERR_CONFIG,      /* invalid configuration value (environment variable, option) */
    KCAP_ERR_LIBRARY,     /* dlopen/dlsym of a kernel library failed, or wrong ABI */
    KCAP_ERR_UNKNOWN_CALL,/* no call description with that name */
    KCAP_ERR_FULL,        /* a queue, ring or byte cap is full: the item was dropped */
    KCAP_ERR_KERNEL,      /* the kernel returned a non-zero status */
    KCAP_ERR_MISMATCH,    /* replay: result outside tolerance */
    KCAP_ERR_UNSUPPORTED, /* feature not available on this machine/build */
    KCAP_ERR_EXISTS,      /* the target file exists: snapshots never replace one */
    KCAP_ERR_COUNT
} kcap_err;

/* Generic message of a code (never NULL). */
const char *kcap_err_string(int code);

/* Detailed error: the code plus one sentence naming the object and the problem. */
typedef struct kcap_error {
    int code;
    char msg[1024];
} kcap_error;

/* Sets e->code and formats e->msg; e may be NULL (then does nothing). Returns code. */
int kcap_error_set(kcap_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message (used to add a file name on the way up). */
void kcap_error_prefix(kcap_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
