/*
 * vattn_stub.c — deliberately wrong "kernel libraries" for replay's error-path tests.
 *
 * Built several times from this one file (see replay/module.mk):
 *   -DSTUB_NOSYM  exports the ABI helpers but not vattn_verify (a library built from the
 *                 wrong source): replay must name the missing symbol and the library;
 *   -DSTUB_ABI2   claims ABI version 2: replay must refuse version-1 snapshots, naming both;
 *   -DSTUB_CUDA   claims the "cuda" backend: on a machine without a GPU replay must say so;
 *   -DSTUB_HANG   never returns from vattn_verify, after starting a helper process that
 *                 sleeps (its pid written to $STUB_HANG_PIDFILE): `kcap shadow`'s replay gate
 *                 must end at its time limit and leave neither process behind.
 *   shadow-mode candidates that misbehave (test_capture_shadow.sh), each returning success
 *   from vattn_verify unless said: -DSTUB_MODARGS scrambles the sizes and strides of the args
 *   it is given; -DSTUB_HUGEWS asks for SIZE_MAX - 1 bytes of workspace; -DSTUB_SLOWWS spends
 *   30 ms in vattn_workspace_size; -DSTUB_LATEFAIL sleeps 1.5 s in vattn_verify, then
 *   returns an error; -DSTUB_CTOR_ABORT aborts the process it is loaded into; -DSTUB_CLOSEHANG
 *   closes its stdout in vattn_verify, then never returns; -DSTUB_DAEMON starts a helper
 *   process from its constructor that holds every inherited fd for 20 s (its pid written to
 *   $STUB_HANG_PIDFILE); with -DSTUB_SETSID too, that helper leaves the process group and
 *   session first (setsid), as a daemon does, so a group kill misses it.
 * None of them computes anything; they are never reached on the success path.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

#ifdef STUB_ABI2
API int vattn_abi_version(void) { return 2; }
#else
API int vattn_abi_version(void) { return 1; }
#endif

#ifdef STUB_CUDA
API const char *vattn_backend(void) { return "cuda"; }
#else
API const char *vattn_backend(void) { return "cpu"; }
#endif

API const char *vattn_status_string(int status) { return status ? "stub error" : "success"; }
API size_t vattn_workspace_size(const void *args)
{
#ifdef STUB_HUGEWS
    return args ? SIZE_MAX - 1 : (size_t)-1;
#endif
#ifdef STUB_SLOWWS
    usleep(30000);
#endif
    return args ? 0 : (size_t)-1;
}

#ifdef STUB_CTOR_ABORT
__attribute__((constructor)) static void stub_abort(void) { abort(); }
#endif
#if defined STUB_HANG || defined STUB_DAEMON
#include <stdio.h>
/* A helper process that sleeps `s` seconds holding every inherited fd; its pid written to
 * $STUB_HANG_PIDFILE, so a test can check that it was killed. */
static void write_pid(long pid)
{
    const char *pf = getenv("STUB_HANG_PIDFILE");
    FILE *f = pf && pid > 0 ? fopen(pf, "w") : NULL;
    if (f)
        fprintf(f, "%ld\n", pid), fclose(f);
}
static void start_helper(unsigned s)
{
    pid_t h = fork();
    if (h == 0) {
#ifdef STUB_SETSID
        setsid();
        write_pid((long)getpid()); /* once out of the group: the pid file says it left */
#endif
        sleep(s);
        _exit(0);
    }
#ifndef STUB_SETSID
    write_pid((long)h);
#endif
}
#endif
#ifdef STUB_DAEMON
__attribute__((constructor)) static void stub_daemon(void) { start_helper(20); }
#endif

#ifndef STUB_NOSYM
/* status 17 is not a real vattn_status: if a wrong library is ever run, it shows. */
API int vattn_verify(const void *a, void *ws, size_t wsb, void *st)
{
    (void)a, (void)ws, (void)wsb, (void)st;
#ifdef STUB_MODARGS
    memset((char *)a + 8, 0x7f, 64); /* past struct_size: sizes, strides, pointers */
    return 0;
#endif
#if defined STUB_HUGEWS || defined STUB_SLOWWS
    return 0;
#endif
#ifdef STUB_CLOSEHANG
    close(1);
    for (;;)
        pause();
#endif
#ifdef STUB_LATEFAIL
    usleep(1500000);
    return 13;
#endif
#ifdef STUB_HANG
    start_helper(300);
    for (;;)
        pause();
#endif
    return 17;
}
API int vattn_verify_reference(const void *a, void *ws, size_t wsb, void *st)
{
    return vattn_verify(a, ws, wsb, st);
}
#endif
