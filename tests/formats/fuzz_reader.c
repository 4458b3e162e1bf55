/*
 * fuzz_reader.c — libFuzzer target over the snapshot reader: each input becomes an
 * in-memory file (memfd) read with kcap_snapshot_read, _read_header and _check. Built with
 * clang -fsanitize=fuzzer,address,undefined when clang is present (formats/module.mk);
 * tests/formats/test_fuzz.sh runs the seed corpus and a short fuzzing session.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kcap_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("kcap-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
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
    close(fd);
    return 0;
}
