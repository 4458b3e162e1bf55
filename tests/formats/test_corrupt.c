/*
 * test_corrupt.c — the reader against damaged input: every file of the seed corpus
 * (tests/formats/corpus: ok-* must read, bad-* must be refused with the expected error
 * code, a message naming the file and the expected reason), then systematic damage to a valid snapshot: every
 * truncation length on a grid and single-bit flips spread over the whole file must be
 * refused (never read, never crash), flips in stored data naming the damaged dataset.
 */
#include "fmt_testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS "tests/formats/corpus"

/* prefix of the file name, the code it must be refused with, a phrase of the reason */
static const struct {
    const char *prefix;
    int code;
    const char *why;
} expect[] = {
    {"bad-shape", KCAP_ERR_SHAPE, "should be"},
    {"bad-truncated", KCAP_ERR_CORRUPT, "truncated"},
    {"bad-bitflip-body", KCAP_ERR_CHECKSUM, "data damaged"},
    {"bad-bitflip-header", KCAP_ERR_CORRUPT, "corrupt: seal header damaged"},
    {"bad-version", KCAP_ERR_VERSION, "version 2.0 is not supported"},
    {"bad-sealed-version2", KCAP_ERR_CORRUPT, "but the seal says 1"},
    {"bad-foreign-hdf5", KCAP_ERR_NOT_SNAPSHOT, "not a kcap snapshot"},
    {"bad-empty", KCAP_ERR_NOT_SNAPSHOT, "empty file"},
    {"bad-text", KCAP_ERR_NOT_SNAPSHOT, "not a kcap snapshot"},
    {"bad-huge-shape", KCAP_ERR_NOMEM, "shape claims more"},
    /* damage to the seal's magic / version field is corruption, not another format */
    {"bad-flip-magic", KCAP_ERR_CORRUPT, "magic bytes are damaged"},
    {"bad-flip-major", KCAP_ERR_CORRUPT, "corrupt: seal header damaged"},
    /* objects that point outside the file */
    {"bad-softlink", KCAP_ERR_CORRUPT, "a soft link"},
    {"bad-extlink", KCAP_ERR_CORRUPT, "an external link"},
    {"bad-external-storage", KCAP_ERR_CORRUPT, "external raw storage"},
    {"bad-virtual", KCAP_ERR_CORRUPT, "a virtual dataset"},
    /* resealed mutants on which libhdf5 1.10 crashes (alone / after other files) */
    {"bad-h5crash", KCAP_ERR_CORRUPT, "libhdf5 crashed"},
    {"bad-h5state", KCAP_ERR_CORRUPT, ""},
    /* chunks libhdf5 1.10 would copy past the decoded buffer: a resealed mutant that survived
     * the sandboxed probe and crashed the fuzzer's own process (chunk dims beyond the tensor),
     * and frames that decode to half a chunk (tool_mksnap corpus) */
    {"bad-chunk-beyond", KCAP_ERR_CORRUPT, "chunk dimension 1 (514) is beyond the tensor's 2"},
    {"bad-short-frames", KCAP_ERR_CORRUPT, "reading the data: filter returned failure"},
    /* found by a review of crafted files (twenty-second session), made from ok-tiny-causal.h5
     * with h5py and resealed: chunks outside the fast path's layout stored with their filters
     * skipped (16 bytes each: libhdf5 copied a whole chunk out of them, a heap over-read in the
     * reading process) or never written (read as zeros, accepted); a scalar whose value lives
     * in /etc/passwd (external raw storage: accepted, the seal intact); an abi_version of
     * 2^32 + 1 (narrowed to 1: accepted and replayed as ABI 1) */
    {"bad-filter-mask", KCAP_ERR_CORRUPT, "/outputs/o: chunk 0 was stored without its filters"},
    {"bad-missing-chunk", KCAP_ERR_CORRUPT, "/inputs/kv_cache: chunk 1 missing"},
    {"bad-external-scalar", KCAP_ERR_CORRUPT, "/scalars/max_kv_len: declares external raw storage"},
    {"bad-int-range", KCAP_ERR_CORRUPT, "abi_version attribute 4294967297 is out of range"},
    /* a negative q_stride_t with no recorded `strides` attribute: check said OK and replay
     * refused it; the stride scalars are now checked either way */
    {"bad-stride-nostrides", KCAP_ERR_SHAPE, "q: stride 0 = q_stride_t = -576 is negative"},
};

static int put(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(b, 1, n, f);
    return fclose(f);
}

static void corpus(void)
{
    DIR *d = opendir(CORPUS);
    TK_CHECK(d != NULL, "corpus directory %s (run from the repository root)", CORPUS);
    if (!d)
        return;
    struct dirent *e;
    int nok = 0, nbad = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CORPUS, e->d_name);
        kcap_snapshot *s = NULL, *h = NULL;
        kcap_error err = {0}, err2 = {0}, err3 = {0};
        int rc = kcap_snapshot_read(path, &s, &err);
        int rh = kcap_snapshot_read_header(path, &h, NULL, &err2);
        int rk = kcap_snapshot_check(path, &err3);
        if (!strncmp(e->d_name, "ok-", 3)) {
            nok++;
            TK_CHECK(rc == 0 && rh == 0 && rk == 0, "%s must read: %s", path, err.msg);
        } else {
            nbad++;
            int want = -1;
            const char *why = "";
            for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
                if (!strncmp(e->d_name, expect[i].prefix, strlen(expect[i].prefix))) {
                    want = expect[i].code;
                    why = expect[i].why;
                }
            TK_CHECK(want >= 0, "%s: no expectation in the table", path);
            TK_CHECK(rc != 0 && !s && rk == rc && rh == rc, "%s must be refused by every reader "
                     "(read %d, header %d, check %d)", path, rc, rh, rk);
            TK_CHECK(rc == want, "%s: code %d (%s), want %d: %s", path, rc, kcap_err_string(rc),
                     want, err.msg);
            TK_CHECK(strstr(err.msg, why) && strstr(err2.msg, why) && strstr(err3.msg, why),
                     "%s: the reason should say '%s': read '%s', header '%s', check '%s'", path,
                     why, err.msg, err2.msg, err3.msg);
            TK_CHECK(strstr(err.msg, path) != NULL, "%s: message names the file: %s", path, err.msg);
            printf("  %-48s %s\n", e->d_name, err.msg + strlen(path) + 2);
        }
        kcap_snapshot_free(s);
        kcap_snapshot_free(h);
    }
    closedir(d);
    TK_CHECK(nok >= 2 && nbad >= 10, "corpus has %d ok and %d bad files", nok, nbad);
}

static void damage(void)
{
    size_t n = 0;
    uint8_t *b = tk_slurp(CORPUS "/ok-small-strided.h5", &n);
    TK_CHECK(b && n > 20000, "valid seed");
    if (!b)
        return;
    char *p = tu_path("damaged.h5");
    int read_ok = 0, unnamed = 0, tries = 0;
    for (size_t len = 0; len < n; len += n / 61 + 1) {
        put(p, b, len);
        kcap_snapshot *s = NULL;
        kcap_error err = {0};
        read_ok += kcap_snapshot_read(p, &s, &err) == 0;
        kcap_snapshot_free(s);
        tries++;
    }
    TK_CHECK(!read_ok, "%d of %d truncations read as valid", read_ok, tries);
    read_ok = tries = 0;
    for (size_t pos = 0; pos < n; pos += n / 307 + 1) {
        b[pos] ^= (uint8_t)(1u << (pos % 8));
        put(p, b, n);
        kcap_snapshot *s = NULL;
        kcap_error err = {0};
        int rc = kcap_snapshot_read(p, &s, &err);
        b[pos] ^= (uint8_t)(1u << (pos % 8));
        read_ok += rc == 0;
        /* damage past the header is located: a dataset or the HDF5 metadata is named */
        if (rc && pos >= 16384 && !strstr(err.msg, "/inputs/") && !strstr(err.msg, "/outputs/") &&
            !strstr(err.msg, "HDF5 metadata") && unnamed++ < 3)
            fprintf(stderr, "unnamed damage at %zu: %s\n", pos, err.msg);
        kcap_snapshot_free(s);
        tries++;
    }
    TK_CHECK(!read_ok, "%d of %d bit flips read as valid", read_ok, tries);
    TK_CHECK(!unnamed, "%d flips without a dataset named", unnamed);
    free(b);
}

int main(void)
{
    corpus();
    damage();
    return tk_summary("test_corrupt");
}
