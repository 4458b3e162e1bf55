/*
 * kcap_calls_text.c — renders a call description as a Markdown table. The same text goes
 * into every snapshot (root attribute call_description, so a file explains itself without
 * kcap) and into `kcap info --desc` / FORMAT.md.
 */
#include "kcap_calls.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *b;
    size_t n, cap;
    int oom;
} sbuf;

static void add(sbuf *s, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int w = vsnprintf(s->b ? s->b + s->n : NULL, s->b ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0)
            return;
        if (s->b && s->n + (size_t)w < s->cap) {
            s->n += (size_t)w;
            return;
        }
        size_t nc = (s->cap + (size_t)w + 1) * 2;
        char *nb = realloc(s->b, nc);
        if (!nb) {
            s->oom = 1;
            return;
        }
        s->b = nb;
        s->cap = nc;
    }
}

static const char *kind_name(kcap_arg_kind k)
{
    return k == KCAP_ARG_SCALAR ? "scalar" : k == KCAP_ARG_IN ? "input" : k == KCAP_ARG_OUT ? "output" : "ignored";
}

static const char *field_name(kcap_field_type f)
{
    switch (f) {
    case KCAP_F_I32: return "int32";
    case KCAP_F_U32: return "uint32";
    case KCAP_F_I64: return "int64";
    case KCAP_F_F32: return "float32";
    default: return "pointer";
    }
}

char *kcap_call_describe(const kcap_call_desc *d)
{
    sbuf s = {0};
    add(&s, "call %s, ABI version %d, args struct %zu bytes\n", d->name, d->abi_version,
        d->args_size);
    for (int i = 0; i < d->nderived; i++)
        add(&s, "%sderived %s", i ? ", " : "", d->derived[i]);
    add(&s, "\n\n| argument | kind | field | dtype | shape | gathered as | notes |\n"
            "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < d->nargs; i++) {
        const kcap_arg_desc *a = &d->args[i];
        add(&s, "| %s | %s%s | %s | ", a->name, kind_name(a->kind), a->optional ? " (optional)" : "",
            field_name(a->field));
        int tensor = a->kind == KCAP_ARG_IN || a->kind == KCAP_ARG_OUT;
        add(&s, "%s | ", tensor ? a->dtype : "");
        if (tensor) {
            add(&s, "[");
            for (int k = 0; k < a->ndim; k++)
                add(&s, "%s%s", k ? ", " : "", a->shape[k]);
            add(&s, "]");
        }
        add(&s, " | ");
        if (tensor && a->gather == KCAP_GATHER_DENSE)
            add(&s, "dense");
        else if (tensor && a->gather == KCAP_GATHER_STRIDED) {
            add(&s, "strided view, strides (");
            for (int k = 0; k < a->ndim; k++)
                add(&s, "%s%s", k ? ", " : "", a->strides[k]);
            add(&s, ")");
        } else if (tensor)
            add(&s, "rows of a pool selected by %s (row stride %s, pool rows %s)", a->index_arg,
                a->row_stride, a->pool_rows);
        add(&s, " | %s%s%s |\n", a->doc ? a->doc : "", a->fill ? "; rebuilt as " : "",
            a->fill ? a->fill : "");
    }
    if (s.oom) {
        free(s.b);
        return NULL;
    }
    return s.b;
}
