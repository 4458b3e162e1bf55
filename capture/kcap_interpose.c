/*
 * kcap_interpose.c — how libkcap.so catches the hooked calls (the X-macro list
 * kernels/vattn_hooks.def generates the wrappers, the routing and the export map).
 *
 * Two bindings exist in real hosts and both must be caught:
 *  (a) the dynamic linker: a program linked against the kernel library resolves the symbol
 *      in the global scope, where a preloaded library comes first. We define the symbols and
 *      forward to the next definition (dlsym(RTLD_NEXT)).
 *  (b) dlopen + dlsym (Python ctypes, hence SGLang): the lookup goes to the library's own
 *      scope and never sees our definition, so we interpose dlsym itself and hand back a
 *      wrapper. Several real libraries may be loaded at once (the CPU and the CUDA library),
 *      so each distinct real function gets its own wrapper slot: a fixed set of wrapper
 *      functions, each bound to one slot, so a wrapper always knows whom to forward to.
 *
 * The wrappers' fast path — the cost every call pays while capture is dormant — is one
 * relaxed atomic load and a tail call. Everything else lives in kcap_slow_call().
 *
 * dlsym(RTLD_NEXT / RTLD_DEFAULT, ...) is resolved by glibc relative to its caller's return
 * address. If our dlsym called the real one for such a lookup, the "caller" would be
 * libkcap.so and the host's lookup would silently change meaning; so on x86-64 dlsym is a
 * tiny assembly trampoline that tail-jumps to the real dlsym for every name but ours,
 * keeping the return address.
 */
#include "kcap_interpose.h"
#include "kcap_capture.h"
#include "kcap_log.h"
#include "kcap_meta.h"
#include "kcap_slot.h"
#include "kcap_state.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#define KCAP_NSLOTS 8

kcap_dlsym_fn kcap_real_dlsym;


static kcap_slot g_slots[KCAP_NCALLS][KCAP_NSLOTS];
static kcap_slot g_direct[KCAP_NCALLS]; /* the linker-bound (RTLD_NEXT) definitions */
static pthread_mutex_t g_slot_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_slots_full;
static _Thread_local int t_in_dlsym;

/* The hooked symbols, in list order (no libc: dlsym runs before anything is set up). */
static const char *const g_names[KCAP_NCALLS] = {
#define KCAP_HOOK(sym, family) #sym,
#include "vattn_hooks.def"
#undef KCAP_HOOK
};

const char *kcap_call_name(int call) { return g_names[call]; }

/* ------------------------------------------------------------------------------------ */
/* dlsym                                                                                 */

/* dlsym can run inside a sanitizer runtime's own initialisation (before its shadow memory
 * exists): the dlsym path is never instrumented and calls no intercepted function. */
#define KCAP_NO_SAN __attribute__((no_sanitize("address", "undefined")))

KCAP_NO_SAN static int kcap_streq(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

KCAP_NO_SAN void *kcap_dlsym_init(void)
{
    kcap_dlsym_fn f = __atomic_load_n(&kcap_real_dlsym, __ATOMIC_ACQUIRE);
    if (f)
        return (void *)f;
    /* dlvsym is not interposed, so this cannot recurse into us. */
    f = (kcap_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f)
        f = (kcap_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&kcap_real_dlsym, f, __ATOMIC_RELEASE);
    return (void *)f;
}

/* Resolve the real dlsym before any host code can call ours. */
static void kcap_interpose_atfork_child(void);
__attribute__((constructor(101))) static void kcap_interpose_ctor(void)
{
    kcap_dlsym_init();
    pthread_atfork(NULL, NULL, kcap_interpose_atfork_child);
}

/* The index of a hooked symbol, or -1. */
KCAP_NO_SAN static int kcap_hook_index(const char *name)
{
    for (int c = 0; name && c < KCAP_NCALLS; c++)
        if (name[0] == g_names[c][0] && kcap_streq(name, g_names[c]))
            return c;
    return -1;
}

/* Where a dlsym call goes, decided without calling the real dlsym: straight to it (tail
 * jump, so glibc sees the host's return address) for every lookup but ours, because the
 * caller matters for RTLD_DEFAULT too (a library loaded RTLD_LOCAL also searches its own
 * dependencies) as well as for RTLD_NEXT; only the hooked symbols through a handle or
 * RTLD_DEFAULT go to kcap_dlsym_c. NULL: no real dlsym (return NULL). */
KCAP_NO_SAN void *kcap_dlsym_route(void *handle, const char *name)
{
    void *real = kcap_dlsym_init();
    if (!real)
        return NULL;
    if (handle == RTLD_NEXT || kcap_hook_index(name) < 0)
        return real;
    return (void *)kcap_dlsym_c;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym,@function\n"
        ".p2align 4\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call kcap_dlsym_route\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  jmp *%rax\n"
        "1: ret\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#else
void *dlsym(void *handle, const char *name) { return kcap_dlsym_c(handle, name); }
#endif

static kcap_call_fn kcap_wrapper_for(int call, kcap_call_fn real);
static kcap_call_fn kcap_direct_resolve(int call);
static int kcap_is_direct(const void *p);

KCAP_NO_SAN void *kcap_dlsym_c(void *handle, const char *name)
{
    kcap_dlsym_fn real = (kcap_dlsym_fn)kcap_dlsym_init();
    if (!real)
        return NULL;
    void *p = real(handle, name);
    /* TLS is touched only for our names: dlsym runs very early (sanitizer runtimes,
       other preloads call it from their initialisers, before our TLS may be usable) */
    int call = p ? kcap_hook_index(name) : -1;
    if (call < 0 || t_in_dlsym)
        return p;
    t_in_dlsym = 1;
    void *out = p;
    if (kcap_is_direct(p)) {
        /* the lookup found our linker-level definition: fine if a real one exists behind it,
           otherwise the host must see what it would have seen without us (nothing) */
        if (!kcap_direct_resolve(call))
            out = NULL;
    } else {
        /* the library's own workspace rule, for capture's argument check (kcap_meta.c) */
        const char *ws = kcap_builtin_calls[call].workspace_fn;
        kcap_library_bind((kcap_call_fn)p, ws ? real(handle, ws) : NULL);
        out = (void *)kcap_wrapper_for(call, (kcap_call_fn)p);
    }
    t_in_dlsym = 0;
    return out;
}

/* ------------------------------------------------------------------------------------ */
/* wrappers                                                                              */

static inline int kcap_enter(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream)
{
    kcap_call_fn f = atomic_load_explicit(&sl->real, memory_order_acquire);
    if (__builtin_expect(!atomic_load_explicit(&kcap_g_slow, memory_order_relaxed), 1))
        return f(a, ws, wsb, stream);
    return kcap_slow_call(sl, a, ws, wsb, stream);
}

/* KCAP_NSLOTS wrappers per hooked call, each bound to its slot. */
#define KCAP_WRAP(sym, i)                                                                  \
    static int kcap_wrap_##sym##_##i(const void *a, void *ws, size_t wsb, void *s)         \
    {                                                                                      \
        return kcap_enter(&g_slots[KCAP_CALL_##sym][i], a, ws, wsb, s);                    \
    }
#define KCAP_HOOK(sym, family)                                                             \
    KCAP_WRAP(sym, 0) KCAP_WRAP(sym, 1) KCAP_WRAP(sym, 2) KCAP_WRAP(sym, 3)                \
    KCAP_WRAP(sym, 4) KCAP_WRAP(sym, 5) KCAP_WRAP(sym, 6) KCAP_WRAP(sym, 7)
#include "vattn_hooks.def"
#undef KCAP_HOOK

static const kcap_call_fn g_wrappers[KCAP_NCALLS][KCAP_NSLOTS] = {
#define KCAP_HOOK(sym, family)                                                             \
    {kcap_wrap_##sym##_0, kcap_wrap_##sym##_1, kcap_wrap_##sym##_2, kcap_wrap_##sym##_3,    \
     kcap_wrap_##sym##_4, kcap_wrap_##sym##_5, kcap_wrap_##sym##_6, kcap_wrap_##sym##_7},
#include "vattn_hooks.def"
#undef KCAP_HOOK
};
_Static_assert(KCAP_NSLOTS == 8, "KCAP_HOOK above spells out 8 wrappers per call");

static kcap_call_fn kcap_wrapper_for(int call, kcap_call_fn real)
{
    /* a wrapper handed out earlier (e.g. the host looks a wrapper up again) stays itself */
    for (int i = 0; i < KCAP_NSLOTS; i++)
        if (real == g_wrappers[call][i])
            return real;
    for (int i = 0; i < KCAP_NSLOTS; i++)
        if (atomic_load_explicit(&g_slots[call][i].real, memory_order_acquire) == real)
            return g_wrappers[call][i];
    pthread_mutex_lock(&g_slot_lock);
    kcap_call_fn w = NULL;
    for (int i = 0; i < KCAP_NSLOTS && !w; i++) {
        kcap_call_fn cur = atomic_load_explicit(&g_slots[call][i].real, memory_order_relaxed);
        if (cur == real)
            w = g_wrappers[call][i];
        else if (!cur) {
            g_slots[call][i].call = call;
            g_slots[call][i].desc = &kcap_builtin_calls[call];
            atomic_store_explicit(&g_slots[call][i].real, real, memory_order_release);
            w = g_wrappers[call][i];
        }
    }
    pthread_mutex_unlock(&g_slot_lock);
    if (!w) {
        /* out of slots (a library loaded and unloaded many times): serve it uncaptured */
        kcap_log_once(&g_log_slots_full, KCAP_LOG_WARN,
                      "more than %d distinct %s functions loaded; further ones are not captured",
                      KCAP_NSLOTS, g_names[call]);
        return real;
    }
    return w;
}

/* A forked child: the slot lock may have been held by another thread of the parent. */
static void kcap_interpose_atfork_child(void) { pthread_mutex_init(&g_slot_lock, NULL); }

static kcap_call_fn kcap_direct_resolve(int call)
{
    kcap_slot *sl = &g_direct[call];
    kcap_call_fn f = atomic_load_explicit(&sl->real, memory_order_acquire);
    if (f)
        return f;
    kcap_dlsym_fn real = (kcap_dlsym_fn)kcap_dlsym_init();
    if (!real)
        return NULL;
    /* called from inside libkcap.so, so RTLD_NEXT means "after us" */
    f = (kcap_call_fn)real(RTLD_NEXT, g_names[call]);
    if (f) {
        const char *ws = kcap_builtin_calls[call].workspace_fn;
        kcap_library_bind(f, ws ? real(RTLD_NEXT, ws) : NULL);
        sl->call = call;
        sl->desc = &kcap_builtin_calls[call];
        atomic_store_explicit(&sl->real, f, memory_order_release);
    }
    return f;
}

/* The linker-bound definitions, one per hooked call. When no real library is behind us
 * (the host resolved our symbol without loading one) they return the description's
 * no_library_status. */
#define KCAP_HOOK(sym, family)                                                             \
    __attribute__((visibility("default"))) int sym(const void *a, void *ws, size_t wsb,    \
                                                   void *s);                               \
    int sym(const void *a, void *ws, size_t wsb, void *s)                                  \
    {                                                                                      \
        kcap_slot *sl = &g_direct[KCAP_CALL_##sym];                                        \
        if (__builtin_expect(!atomic_load_explicit(&sl->real, memory_order_acquire), 0) && \
            !kcap_direct_resolve(KCAP_CALL_##sym))                                         \
            return kcap_builtin_calls[KCAP_CALL_##sym].no_library_status;                  \
        return kcap_enter(sl, a, ws, wsb, s);                                              \
    }
#include "vattn_hooks.def"
#undef KCAP_HOOK

static const kcap_call_fn g_direct_fns[KCAP_NCALLS] = {
#define KCAP_HOOK(sym, family) sym,
#include "vattn_hooks.def"
#undef KCAP_HOOK
};

/* 1 if p is one of our linker-level definitions. */
KCAP_NO_SAN static int kcap_is_direct(const void *p)
{
    for (int c = 0; c < KCAP_NCALLS; c++)
        if (p == (const void *)g_direct_fns[c])
            return 1;
    return 0;
}
