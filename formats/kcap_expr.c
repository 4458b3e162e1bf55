/*
 * kcap_expr.c — the shape/stride expression evaluator of call descriptions: integer
 * literals, identifiers (scalars, derived symbols, args_size), name[expr] (an element of a
 * recorded integer tensor), + - * / and parentheses. 64-bit, overflow and division by
 * zero are errors, recursion through derived symbols is bounded.
 */
#include "kcap_calls_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const kcap_call_desc *d;
    const kcap_snapshot *s;
    const char *p, *expr;
    kcap_error *err;
    int depth;
} parser;

static int eval_expr(parser *ps, int64_t *out);

static int fail(parser *ps, int code, const char *what)
{
    return kcap_error_set(ps->err, code, "expression '%s': %s", ps->expr, what);
}

static void skip(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static int lookup(parser *ps, const char *name, size_t len, int64_t *out)
{
    char id[KCAP_NAME_MAX];
    if (len >= sizeof id)
        return fail(ps, KCAP_ERR_ARG, "identifier too long");
    memcpy(id, name, len);
    id[len] = '\0';
    const kcap_scalar *sc = kcap_snapshot_scalar(ps->s, id);
    if (sc) {
        if (sc->type != KCAP_SC_INT)
            return kcap_error_set(ps->err, KCAP_ERR_SHAPE, "expression '%s': scalar %s is not "
                                  "an integer", ps->expr, id);
        *out = sc->i;
        return KCAP_OK;
    }
    if (!strcmp(id, "args_size")) {
        *out = (int64_t)ps->d->args_size;
        return KCAP_OK;
    }
    for (int i = 0; i < ps->d->nderived; i++) {
        const char *def = ps->d->derived[i], *eq = strchr(def, '=');
        if (eq && (size_t)(eq - def) == len && !memcmp(def, id, len)) {
            if (ps->depth > 16)
                return fail(ps, KCAP_ERR_ARG, "derived symbols nest too deep");
            return kcap_eval_full(ps->d, ps->s, eq + 1, out, ps->err, ps->depth + 1);
        }
    }
    return kcap_error_set(ps->err, KCAP_ERR_SHAPE, "expression '%s': '%s' is not a recorded "
                          "scalar or a derived symbol", ps->expr, id);
}

static int index_tensor(parser *ps, const char *name, size_t len, int64_t idx, int64_t *out)
{
    char id[KCAP_NAME_MAX];
    if (len >= sizeof id)
        return fail(ps, KCAP_ERR_ARG, "identifier too long");
    memcpy(id, name, len);
    id[len] = '\0';
    const kcap_tensor *t = kcap_snapshot_tensor(ps->s, id, KCAP_DIR_IN);
    if (!t)
        t = kcap_snapshot_tensor(ps->s, id, KCAP_DIR_OUT);
    if (!t)
        return kcap_error_set(ps->err, KCAP_ERR_SHAPE, "expression '%s': tensor %s not "
                              "recorded", ps->expr, id);
    if (!t->data)
        return kcap_error_set(ps->err, KCAP_ERR_UNSUPPORTED, "expression '%s': tensor %s "
                              "data not loaded", ps->expr, id);
    size_t es = kcap_dtype_size(t->dtype), n = es ? t->nbytes / es : 0;
    if (idx < 0 || (uint64_t)idx >= n)
        return kcap_error_set(ps->err, KCAP_ERR_SHAPE, "expression '%s': index %lld outside "
                              "tensor %s of %zu elements", ps->expr, (long long)idx, id, n);
    switch (t->dtype) {
    case KCAP_DT_I32: *out = ((const int32_t *)t->data)[idx]; break;
    case KCAP_DT_I64: *out = ((const int64_t *)t->data)[idx]; break;
    case KCAP_DT_U8: *out = ((const uint8_t *)t->data)[idx]; break;
    default:
        return kcap_error_set(ps->err, KCAP_ERR_SHAPE, "expression '%s': tensor %s is not "
                              "an integer tensor", ps->expr, id);
    }
    return KCAP_OK;
}

static int factor(parser *ps, int64_t *out)
{
    skip(ps);
    if (*ps->p == '(') {
        ps->p++;
        int rc = eval_expr(ps, out);
        if (rc)
            return rc;
        skip(ps);
        if (*ps->p != ')')
            return fail(ps, KCAP_ERR_ARG, "missing ')'");
        ps->p++;
        return KCAP_OK;
    }
    if (*ps->p == '-') {
        ps->p++;
        int64_t v;
        int rc = factor(ps, &v);
        if (rc)
            return rc;
        if (v == INT64_MIN)
            return fail(ps, KCAP_ERR_SHAPE, "overflow");
        *out = -v;
        return KCAP_OK;
    }
    if (isdigit((unsigned char)*ps->p)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*ps->p)) {
            if (__builtin_mul_overflow(v, 10, &v) ||
                __builtin_add_overflow(v, *ps->p - '0', &v))
                return fail(ps, KCAP_ERR_SHAPE, "literal overflows 64 bits");
            ps->p++;
        }
        *out = v;
        return KCAP_OK;
    }
    if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
        const char *b = ps->p;
        while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
            ps->p++;
        size_t len = (size_t)(ps->p - b);
        skip(ps);
        if (*ps->p == '[') {
            ps->p++;
            int64_t idx;
            int rc = eval_expr(ps, &idx);
            if (rc)
                return rc;
            skip(ps);
            if (*ps->p != ']')
                return fail(ps, KCAP_ERR_ARG, "missing ']'");
            ps->p++;
            return index_tensor(ps, b, len, idx, out);
        }
        return lookup(ps, b, len, out);
    }
    return fail(ps, KCAP_ERR_ARG, *ps->p ? "unexpected character" : "unexpected end");
}

static int term(parser *ps, int64_t *out)
{
    int rc = factor(ps, out);
    while (!rc) {
        skip(ps);
        char op = *ps->p;
        if (op != '*' && op != '/')
            break;
        ps->p++;
        int64_t r;
        if ((rc = factor(ps, &r)))
            break;
        if (op == '*') {
            if (__builtin_mul_overflow(*out, r, out))
                rc = fail(ps, KCAP_ERR_SHAPE, "overflow");
        } else {
            if (r == 0)
                rc = fail(ps, KCAP_ERR_SHAPE, "division by zero");
            else if (*out == INT64_MIN && r == -1)
                rc = fail(ps, KCAP_ERR_SHAPE, "overflow");
            else
                *out /= r;
        }
    }
    return rc;
}

static int eval_expr(parser *ps, int64_t *out)
{
    if (++ps->depth > 64)
        return fail(ps, KCAP_ERR_ARG, "nested too deep");
    int rc = term(ps, out);
    while (!rc) {
        skip(ps);
        char op = *ps->p;
        if (op != '+' && op != '-')
            break;
        ps->p++;
        int64_t r;
        if ((rc = term(ps, &r)))
            break;
        if (op == '+' ? __builtin_add_overflow(*out, r, out)
                      : __builtin_sub_overflow(*out, r, out))
            rc = fail(ps, KCAP_ERR_SHAPE, "overflow");
    }
    ps->depth--;
    return rc;
}

int kcap_eval_full(const kcap_call_desc *d, const kcap_snapshot *snap, const char *expr,
                   int64_t *out, kcap_error *err, int depth)
{
    parser ps = {d, snap, expr, expr, err, depth};
    int rc = eval_expr(&ps, out);
    if (rc)
        return rc;
    skip(&ps);
    if (*ps.p)
        return fail(&ps, KCAP_ERR_ARG, "trailing characters");
    return KCAP_OK;
}

int kcap_expr_eval(const kcap_call_desc *d, const kcap_snapshot *snap, const char *expr,
                   int64_t *out, kcap_error *err)
{
    if (!d || !expr || !out)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_expr_eval: NULL argument");
    return kcap_eval_full(d, snap, expr, out, err, 0);
}
