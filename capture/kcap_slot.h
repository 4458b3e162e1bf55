/*
 * kcap_slot.h — the types every layer of libkcap shares about a hooked call: its calling
 * convention, its index in the hooked-call list (kernels/vattn_hooks.def) and the wrapper
 * slot that binds one real function of one loaded library to its description. Types only.
 */
#ifndef KCAP_SLOT_H
#define KCAP_SLOT_H

#include <stdatomic.h>
#include <stddef.h>

#include "kcap_calls.h" /* formats/ */

/* Every hooked call has this shape: args struct, workspace, its bytes, stream. */
typedef int (*kcap_call_fn)(const void *args, void *ws, size_t ws_bytes, void *stream);
/* The status every hooked ABI returns for success. */
#define KCAP_CALL_OK 0

/* One index per line of the hooked-call list, in its order (= kcap_builtin_calls). */
enum {
#define KCAP_HOOK(sym, family) KCAP_CALL_##sym,
#include "vattn_hooks.def"
#undef KCAP_HOOK
    KCAP_NCALLS
};

typedef struct kcap_slot {
    _Atomic(kcap_call_fn) real;  /* the library's function this slot forwards to */
    int call;                    /* KCAP_CALL_* */
    const kcap_call_desc *desc;  /* its description */
    /* cached library identity, filled on first capture through this slot */
    atomic_int lib_ready;
    char lib_path[1024];
    char lib_hash[80];
    void *lib_base;
} kcap_slot;

#endif
