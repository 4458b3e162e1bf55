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
    tk_rng s = tk_seed(seed);
    uint8_t *b = buf;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(tk_next(&s) >> 56); /* the top bits: xorshift64*'s best */
}

void tu_fill_bf16(uint16_t *buf, size_t n, uint64_t seed)
{
    tk_rng s = tk_seed(seed);
    /* per-channel scale (like KV latent channels) times a sum of uniforms (~normal) */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tk_next(&s);
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

void tu_vcall(const tk_vcase *c, uint64_t seed, tk_vcall *v)
{
    tk_rng r = tk_seed(seed);
    tk_vcall_build(c, &r, v);
}

kcap_snapshot *tu_vattn_snapshot(tk_vcall *v, kcap_error *err)
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
    if (v->a.lse)
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
