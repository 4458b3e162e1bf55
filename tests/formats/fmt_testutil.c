/*
 * fmt_testutil.c — see fmt_testutil.h.
 */
#include "fmt_testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[512];

static void rm_tmp(void)
{
    if (tmpdir[0] && !getenv("KCAP_KEEP_TMP")) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", tmpdir, tmpdir);
        if (system(cmd)) {
        }
    }
}

const char *tu_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/kcapfmt.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(rm_tmp);
    }
    return tmpdir;
}

char *tu_path(const char *name)
{
    /* per thread: test_files' writer threads build paths at the same time (a shared ring
       once handed one thread another's path, and it wrote into the other's file) */
    static _Thread_local char ring[8][1024];
    static _Thread_local int at;
    char *p = ring[at++ % 8];
    snprintf(p, 1024, "%s/%s", tu_tmpdir(), name);
    return p;
}

void tu_fill(void *buf, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    uint8_t *b = buf;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(tk_next_xs(&s) >> 24);
}

void tu_fill_bf16(uint16_t *buf, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    /* per-channel scale (like KV latent channels) times a sum of uniforms (~normal) */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tk_next_xs(&s);
        float g = (float)((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF)) /
                      65536.0f - 1.5f;
        float scale = 0.05f + 0.02f * (float)((i % QK) % 7);
        buf[i] = tk_bf16(g * scale);
    }
}

int tu_run(const char *cmd, char *out, size_t outn)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = 0;
    if (out && outn) {
        n = fread(out, 1, outn - 1, p);
        out[n] = '\0';
    } else {
        char tmp[4096];
        while (fread(tmp, 1, sizeof tmp, p) > 0) {
        }
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tu_vattn_make(tu_vattn *v, int bs, int q_len, int H, int64_t num_slots, int dtype,
                  int index_type, int with_vis, int with_lse, int padded, uint64_t seed)
{
    memset(v, 0, sizeof *v);
    vattn_args *a = &v->a;
    a->struct_size = sizeof *a;
    a->dtype = dtype;
    a->index_type = index_type;
    a->bs = bs;
    a->q_len = q_len;
    a->num_heads = H;
    a->num_slots = num_slots;
    a->max_kv_len = 0;
    a->sm_scale = 0.0625f;
    int T = bs * q_len;
    a->q_stride_h = padded ? QK + 24 : QK;
    a->q_stride_t = padded ? (int64_t)H * a->q_stride_h + 40 : (int64_t)H * QK;
    a->o_stride_h = padded ? DV + 8 : DV;
    a->o_stride_t = padded ? (int64_t)H * a->o_stride_h + 16 : (int64_t)H * DV;
    a->kv_stride = padded ? QK + 64 : QK;
    v->indptr = malloc(sizeof(int32_t) * (size_t)(bs + 1));
    uint64_t s = seed * 7 + 3;
    v->indptr[0] = 0;
    for (int b = 0; b < bs; b++)
        v->indptr[b + 1] = v->indptr[b] + q_len + (int32_t)(tk_next_xs(&s) % 9);
    v->nnz = v->indptr[bs];
    v->indices = malloc((size_t)v->nnz * 8);
    for (int64_t i = 0; i < v->nnz; i++) {
        /* duplicates on purpose: some ids repeat (shared prefixes) */
        int64_t slot = (int64_t)(tk_next_xs(&s) % (uint64_t)(num_slots < 4 ? num_slots : num_slots / 2));
        if (index_type == VATTN_INDEX_INT32)
            ((int32_t *)v->indices)[i] = (int32_t)slot;
        else
            ((int64_t *)v->indices)[i] = slot;
    }
    v->q_bytes = ((size_t)(T - 1) * (size_t)a->q_stride_t + (size_t)(H - 1) * (size_t)a->q_stride_h + QK) * 2;
    v->o_bytes = ((size_t)(T - 1) * (size_t)a->o_stride_t + (size_t)(H - 1) * (size_t)a->o_stride_h + DV) * 2;
    v->kv_bytes = (size_t)num_slots * (size_t)a->kv_stride * 2;
    v->q = malloc(v->q_bytes);
    v->kv = malloc(v->kv_bytes);
    v->o = malloc(v->o_bytes);
    tu_fill_bf16(v->q, v->q_bytes / 2, seed + 1);
    tu_fill_bf16(v->kv, v->kv_bytes / 2, seed + 2);
    memset(v->o, 0x5A, v->o_bytes);
    if (with_vis) {
        v->vis = malloc((size_t)bs * (size_t)q_len * (size_t)q_len);
        tu_fill(v->vis, (size_t)bs * (size_t)q_len * (size_t)q_len, seed + 3);
        for (size_t i = 0; i < (size_t)bs * (size_t)q_len * (size_t)q_len; i++)
            v->vis[i] &= 1;
    }
    if (with_lse)
        v->lse = calloc((size_t)T * (size_t)H, sizeof(float));
    a->q = v->q;
    a->kv_cache = v->kv;
    a->kv_indptr = v->indptr;
    a->kv_indices = v->indices;
    a->visibility = v->vis;
    a->o = v->o;
    a->lse = v->lse;
    return 0;
}

void tu_vattn_free(tu_vattn *v)
{
    free(v->q);
    free(v->kv);
    free(v->o);
    free(v->indptr);
    free(v->indices);
    free(v->vis);
    free(v->lse);
    memset(v, 0, sizeof *v);
}

kcap_snapshot *tu_vattn_snapshot(tu_vattn *v, kcap_error *err)
{
    const kcap_call_desc *d = kcap_call_find("vattn_verify");
    kcap_snapshot *s = kcap_snapshot_create();
    if (!s || kcap_call_record(d, &v->a, KCAP_ARG_IN, kcap_host_mem_ops(), s, err)) {
        kcap_snapshot_free(s);
        return NULL;
    }
    /* "run" the kernel: outputs get fresh values (only inside the view for o) */
    int T = v->a.bs * v->a.q_len, H = v->a.num_heads;
    uint16_t *o = v->o;
    uint16_t tmp[512];
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            tu_fill_bf16(tmp, 512, (uint64_t)(t * 131 + h));
            memcpy(o + t * v->a.o_stride_t + h * v->a.o_stride_h, tmp, sizeof tmp);
        }
    if (v->lse)
        for (int i = 0; i < T * H; i++)
            v->lse[i] = (float)(i % 17) * 0.37f - (i % 5 == 0 ? INFINITY : 0.0f);
    if (kcap_call_record(d, &v->a, KCAP_ARG_OUT, kcap_host_mem_ops(), s, err)) {
        kcap_snapshot_free(s);
        return NULL;
    }
    snprintf(s->meta.time_utc, sizeof s->meta.time_utc, "2026-01-02T03:04:05.678Z");
    snprintf(s->meta.host, sizeof s->meta.host, "testhost");
    s->meta.pid = 4242;
    s->meta.rank = 3;
    snprintf(s->meta.device_name, sizeof s->meta.device_name, "cpu");
    snprintf(s->meta.lib_path, sizeof s->meta.lib_path, "/x/libverify_attn_cpu.so");
    snprintf(s->meta.lib_hash, sizeof s->meta.lib_hash, "xxh64:0123456789abcdef");
    s->meta.seq = 7;
    s->meta.call_status = 0;
    snprintf(s->meta.kcap_version, sizeof s->meta.kcap_version, "0.1.0");
    return s;
}
