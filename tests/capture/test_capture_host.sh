#!/usr/bin/env bash
# test_capture_host.sh — host invariants at the edges of libkcap.so: the host's errno survives
# a captured call; a fork while another thread holds libkcap's library-identity lock leaves a
# child that can still capture (no inherited held lock); a library loaded RTLD_LOCAL keeps its
# dlsym(RTLD_DEFAULT) scope and reaches its own CUDA runtime through every interposed graph
# call (capture, instantiate, launch, exec changes: the caller's arguments, the runtime's
# status; dormant too, and with the runtime in the global scope; no driver needed); a transient
# process_vm_readv error does not switch the safe host reads off for the rest of the process.
. "$(dirname "$0")/lib.sh"
SHIM=$ROOT/$B/tests/capture/libkcap_testshim.so
DLMAIN=$ROOT/$B/tests/capture/dl_scope_main
DLUSER=$ROOT/$B/tests/capture/libdl_scope_user.so
need "$LIBKCAP" "$CLIENT" "$SHIM" "$DLMAIN" "$DLUSER"

# errno: set to 4242 before every call, the client checks it after
"$CLIENT" --calls 3 --seed 51 --errno 2>"$T/errno_ref.err" || { cat "$T/errno_ref.err"; fail "errno: without preload"; }
with_kcap KCAP_DIR="$T/errno" -- "$CLIENT" --calls 3 --seed 51 --errno 2>"$T/errno.err" &&
    [ "$(count_h5 "$T/errno")" = 3 ] && ok "errno unchanged by captured calls" ||
    { cat "$T/errno.err"; fail "errno changed by a captured call"; }
with_kcap KCAP_DIR="$T/errno_sel" KCAP_CALLS=1 -- "$CLIENT" --calls 3 --seed 51 --errno 2>"$T/errno_sel.err" &&
    ok "errno unchanged with KCAP_CALLS selection" || { cat "$T/errno_sel.err"; fail "errno: KCAP_CALLS selection"; }

# fork while a capture thread sits in kcap_lib_identity (realpath stalled 600 ms by the shim)
timeout 60 env KCAP_DIR="$T/fork" KCAP_SHIM_STALL_REALPATH=libverify_attn_cpu \
    LD_PRELOAD="$SHIM:$PRELOAD" "$CLIENT" --seed 52 --fork-during 2>"$T/fork.err"
rc=$?
[ $rc = 0 ] && [ "$(count_h5 "$T/fork")" = 2 ] && ok "fork during a capture: child captures, no hang" ||
    { cat "$T/fork.err"; ls "$T/fork"; fail "fork during a capture (rc $rc)"; }

# RTLD_LOCAL library: same answers with and without libkcap.so; its graph calls reach its
# runtime with the caller's arguments and the runtime's status (also dormant, and with the
# runtime in the global scope); no CUDA driver is needed for any of it
want=$("$DLMAIN" "$DLUSER")
got=$(with_kcap KCAP_DIR="$T/dl" -- "$DLMAIN" "$DLUSER" 2>"$T/dl.err")
[ "$want" = "lookup=1 graph=0 exec=0" ] && [ "$got" = "$want" ] &&
    ok "RTLD_LOCAL library: dlsym(RTLD_DEFAULT) scope and its CUDA runtime kept ($got)" ||
    { cat "$T/dl.err"; fail "RTLD_LOCAL library: '$got', without libkcap '$want'"; }
got=$(with_kcap KCAP_DIR="$T/dld" KCAP_DORMANT=1 -- "$DLMAIN" "$DLUSER" 2>"$T/dld.err")
[ "$got" = "$want" ] && ok "dormant: graph calls forwarded exactly ($got)" ||
    { cat "$T/dld.err"; fail "dormant graph calls: '$got', without libkcap '$want'"; }
got=$(with_kcap KCAP_DIR="$T/dlg" -- "$DLMAIN" "$DLUSER" global 2>"$T/dlg.err")
[ "$got" = "$want" ] && [ "$("$DLMAIN" "$DLUSER" global)" = "$want" ] &&
    ok "runtime in the global scope: graph calls forwarded exactly ($got)" ||
    { cat "$T/dlg.err"; fail "global-scope graph calls: '$got', without libkcap '$want'"; }

# every executable-graph call the dep library defines (runtime and driver API) is one libkcap
# interposes: a change made through one it did not would leave a stale clean twin running
exported=$(nm -D --defined-only "$LIBKCAP" | awk '{print $3}')
missing=
for s in $(sed -n 's/^int \(cu[A-Za-z_0-9]*\)(.*/\1/p; s/^KT_SET(\(cu[A-Za-z_0-9]*\),.*/\1/p' tests/capture/dl_scope_dep.c); do
    grep -qx "$s" <<<"$exported" || missing="$missing $s"
done
n=$(sed -n 's/^int \(cu[A-Za-z_0-9]*\)(.*/\1/p; s/^KT_SET(\(cu[A-Za-z_0-9]*\),.*/\1/p' tests/capture/dl_scope_dep.c | wc -l)
[ -z "$missing" ] && [ "$n" -ge 39 ] && ok "libkcap interposes all $n graph entry points of the runtime and driver APIs" ||
    fail "libkcap does not export:$missing ($n names)"

# one transient process_vm_readv failure: that snapshot fails, later reads still use the syscall
mkdir -p "$T/vmref" "$T/vmcap"
"$CLIENT" --calls 3 --seed 53 --dump "$T/vmref" || fail "vm: reference run"
env KCAP_DIR="$T/vm" KCAP_SHIM_VM_ENOMEM=1 LD_PRELOAD="$SHIM:$PRELOAD" \
    "$CLIENT" --calls 3 --seed 53 --dump "$T/vmcap" 2>"$T/vm.err"
rc=$?
calls=$(sed -n 's/^shim: process_vm_readv calls=\([0-9]*\)$/\1/p' "$T/vm.err")
[ $rc = 0 ] && same_outputs "$T/vmref" "$T/vmcap" && [ "${calls:-0}" -gt 1 ] &&
    [ "$(count_h5 "$T/vm")" = 2 ] && grep -q 'failures(record=1' "$T/vm.err" &&
    ok "transient ENOMEM: one snapshot failed, host unaffected, process_vm_readv kept ($calls calls)" ||
    { cat "$T/vm.err"; fail "transient process_vm_readv error (rc $rc, calls ${calls:-?})"; }
finish
