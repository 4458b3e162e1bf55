/*
 * kcap_export.c — the ctypes-facing API of kcap_export.h: open/check through the one
 * reader, then plain accessors for metadata, scalars and tensors.
 *
 * Metadata is a table of (name, kind, offset) so a new kcap_meta field is one line here and
 * appears in Python without a change there. Self-contained on purpose (formats + common
 * only): formats/module.mk compiles every .c file of formats/ into the fuzz target.
 */
#include "kcap_export.h"

#include <stdio.h>
#include <string.h>

int kcap_export_abi(void) { return KCAP_EXPORT_ABI; }

static int finish(int rc, const kcap_error *e, char *msg, size_t msglen)
{
    if (msg && msglen)
        snprintf(msg, msglen, "%s", rc ? (e->msg[0] ? e->msg : kcap_err_string(rc)) : "");
    return rc;
}

int kcap_export_open(const char *path, kcap_snapshot **out, char *msg, size_t msglen)
{
    kcap_error e = {0};
    if (!path || !out)
        return finish(kcap_error_set(&e, KCAP_ERR_ARG, "kcap_export_open: NULL argument"), &e,
                      msg, msglen);
    *out = NULL;
    int rc = kcap_snapshot_read(path, out, &e);
    if (rc && !strstr(e.msg, path))
        kcap_error_prefix(&e, "%s", path);
    return finish(rc, &e, msg, msglen);
}

int kcap_export_check(const char *path, char *msg, size_t msglen)
{
    kcap_error e = {0};
    if (!path)
        return finish(kcap_error_set(&e, KCAP_ERR_ARG, "kcap_export_check: NULL path"), &e, msg,
                      msglen);
    int rc = kcap_snapshot_check(path, &e);
    if (rc && !strstr(e.msg, path))
        kcap_error_prefix(&e, "%s", path);
    return finish(rc, &e, msg, msglen);
}

void kcap_export_close(kcap_snapshot *s) { kcap_snapshot_free(s); }

const char *kcap_export_err_string(int code) { return kcap_err_string(code); }

typedef enum { MK_STR = 0, MK_INT = 1, MK_U64, MK_I64 } meta_kind;

typedef struct meta_field {
    const char *name;
    meta_kind kind;
    size_t off;
} meta_field;

#define MF(f, k) {#f, k, offsetof(kcap_meta, f)}
static const meta_field meta_fields[] = {
    MF(format_major, MK_INT),   MF(format_minor, MK_INT),   MF(call, MK_STR),
    MF(abi_version, MK_INT),    MF(time_utc, MK_STR),       MF(host, MK_STR),
    MF(pid, MK_I64),            MF(rank, MK_INT),           MF(device_name, MK_STR),
    MF(cc_major, MK_INT),       MF(cc_minor, MK_INT),       MF(driver_version, MK_INT),
    MF(runtime_version, MK_INT), MF(lib_path, MK_STR),      MF(lib_hash, MK_STR),
    MF(seq, MK_U64),            MF(in_stream_capture, MK_INT), MF(call_status, MK_INT),
    MF(kcap_version, MK_STR),   MF(tags, MK_STR),
};
#undef MF
#define NMETA ((int)(sizeof meta_fields / sizeof meta_fields[0]))

int kcap_export_meta_count(void) { return NMETA; }

const char *kcap_export_meta_name(int i, int *kind)
{
    if (i < 0 || i >= NMETA)
        return NULL;
    if (kind)
        *kind = meta_fields[i].kind == MK_STR ? 0 : 1;
    return meta_fields[i].name;
}

const char *kcap_export_meta_str(const kcap_snapshot *s, int i)
{
    if (!s || i < 0 || i >= NMETA || meta_fields[i].kind != MK_STR)
        return NULL;
    return (const char *)&s->meta + meta_fields[i].off;
}

int64_t kcap_export_meta_int(const kcap_snapshot *s, int i)
{
    if (!s || i < 0 || i >= NMETA)
        return 0;
    const char *p = (const char *)&s->meta + meta_fields[i].off;
    switch (meta_fields[i].kind) {
    case MK_INT: return *(const int *)p;
    case MK_I64: return *(const int64_t *)p;
    case MK_U64: return (int64_t) * (const uint64_t *)p;
    default: return 0;
    }
}

int kcap_export_nscalars(const kcap_snapshot *s) { return s ? s->nscalars : 0; }

int kcap_export_scalar(const kcap_snapshot *s, int i, const char **name, int *type,
                       int64_t *ival, double *fval)
{
    if (!s || i < 0 || i >= s->nscalars)
        return -1;
    const kcap_scalar *c = &s->scalars[i];
    if (name)
        *name = c->name;
    if (type)
        *type = (int)c->type;
    if (ival)
        *ival = c->i;
    if (fval)
        *fval = c->f;
    return 0;
}

int kcap_export_ntensors(const kcap_snapshot *s) { return s ? s->ntensors : 0; }

int kcap_export_tensor_at(const kcap_snapshot *s, int i, kcap_export_tensor *out)
{
    if (!s || !out || i < 0 || i >= s->ntensors)
        return -1;
    const kcap_tensor *t = &s->tensors[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dir = (int)t->dir;
    out->dtype = kcap_dtype_name(t->dtype);
    out->ndim = t->ndim;
    out->has_strides = t->has_strides;
    for (int d = 0; d < t->ndim && d < KCAP_MAX_DIMS; d++) {
        out->shape[d] = t->shape[d];
        out->strides[d] = t->strides[d];
    }
    out->data = t->data;
    out->nbytes = t->nbytes;
    return 0;
}
