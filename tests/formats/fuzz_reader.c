/*
 * fuzz_reader.c — libFuzzer target over the snapshot reader: each input becomes the
 * content of one named temp file (libhdf5 resolves the real path of what it opens, so a
 * memfd never got past H5Fopen) read with kcap_snapshot_read, _read_header and _check.
 * Built with clang -fsanitize=fuzzer,address,undefined when clang is present
 * (formats/module.mk); tests/formats/test_fuzz.sh runs the seed corpus and a short
 * fuzzing session. Unsealed inputs stop at the seal; fuzz_reseal.c covers what lies behind.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kcap_snapshot.h"

static char path[256];
static int fd = -1;

static void drop(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        const char *td = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/kcap-fuzz-XXXXXX", td && *td ? td : "/tmp");
        if ((fd = mkstemp(path)) < 0)
            return 0;
        atexit(drop);
    }
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
        return 0;
    kcap_snapshot *s = NULL;
    kcap_error err;
    if (kcap_snapshot_read(path, &s, &err) == 0 && !s)
        abort(); /* success must hand back a snapshot */
    kcap_snapshot_free(s);
    s = NULL;
    size_t *stored = NULL;
    if (kcap_snapshot_read_header(path, &s, &stored, &err) == 0 && (!s || !stored))
        abort();
    free(stored);
    kcap_snapshot_free(s);
    kcap_snapshot_check(path, &err);
    return 0;
}
