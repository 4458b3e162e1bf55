/*
 * kcap_interpose.h — kcap_interpose.c's functions that its assembly dlsym trampoline calls
 * by name (so they cannot be static); hidden from the host by the version script. Nothing
 * else in libkcap calls the interposer: it is the top layer.
 */
#ifndef KCAP_INTERPOSE_H
#define KCAP_INTERPOSE_H

typedef void *(*kcap_dlsym_fn)(void *, const char *);

extern kcap_dlsym_fn kcap_real_dlsym;        /* the real dlsym, resolved at load */
void *kcap_dlsym_init(void);                 /* resolves it (idempotent) */
void *kcap_dlsym_c(void *handle, const char *name);     /* lookups of hooked symbols */
void *kcap_dlsym_route(void *handle, const char *name); /* where a dlsym call goes */

/* The CUDA runtime's graph entry points (stream capture, executable graphs) are interposed
 * in kcap_interpose_graph.c, which has nothing the rest of the interposer calls. */

#endif
