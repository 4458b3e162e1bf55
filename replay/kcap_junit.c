/*
 * kcap_junit.c — JUnit XML writer (see kcap_junit.h).
 */
#include "kcap_junit.h"

#include <stdio.h>
#include <time.h>

#include "kcap_json.h"     /* kcap_doc: the atomic / stdout output document; kcap_utf8_len */
#include "kcap_snapshot.h" /* kcap_printable */

/* XML text or attribute value: the five entities, tab / newline / CR as character
 * references, well-formed UTF-8 as is, and what XML 1.0 forbids or what is not UTF-8 (other
 * control bytes, DEL, a byte outside a well-formed sequence — a file name is bytes —, and
 * U+FFFE / U+FFFF) as the text \xNN per byte, kcap_printable's notation, as the terminal
 * shows it. */
static void xml_text(FILE *f, const char *s)
{
    for (const char *p = s ? s : ""; *p;) {
        unsigned char c = (unsigned char)*p;
        size_t n = kcap_utf8_len(p);
        int nonchar = n == 3 && c == 0xef && (unsigned char)p[1] == 0xbf &&
                      (unsigned char)p[2] >= 0xbe; /* U+FFFE, U+FFFF */
        if (n > 1 && !nonchar) {
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        int forbidden = (c < 0x20 || c == 0x7f) && c != '\n' && c != '\t' && c != '\r';
        if (n == 0 || nonchar || forbidden) {
            char one[2] = {*p, '\0'}, shown[8];
            fputs(kcap_printable(shown, sizeof shown, one), f);
            p++;
            continue;
        }
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        case '\n': fputs("&#10;", f); break;
        case '\t': fputs("&#9;", f); break;
        case '\r': fputs("&#13;", f); break;
        default: fputc(c, f);
        }
        p++;
    }
}

int kcap_junit_write(const char *path, const char *suite, const kcap_junit_case *cases, int n,
                     double time_s, kcap_error *err)
{
    kcap_doc doc;
    int rc = kcap_doc_open(&doc, path, "--junit", err);
    if (rc)
        return rc;
    FILE *f = doc.f;
    int nfail = 0, nerr = 0, nskip = 0;
    for (int i = 0; i < n; i++) {
        nfail += cases[i].status == KCAP_JUNIT_FAIL;
        nerr += cases[i].status == KCAP_JUNIT_ERROR;
        nskip += cases[i].status == KCAP_JUNIT_SKIP;
    }
    char stamp[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"", f);
    xml_text(f, suite);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\" "
               "timestamp=\"%s\">\n", n, nfail, nerr, nskip, time_s, stamp);
    static const char *const tag[] = {"", "failure", "error", "skipped"};
    for (int i = 0; i < n; i++) {
        const kcap_junit_case *c = &cases[i];
        fputs("  <testcase classname=\"", f);
        xml_text(f, c->classname);
        fputs("\" name=\"", f);
        xml_text(f, c->name);
        fprintf(f, "\" time=\"%.3f\"", c->time_s);
        if (c->status == KCAP_JUNIT_PASS) {
            fputs("/>\n", f);
            continue;
        }
        fprintf(f, ">\n    <%s message=\"", tag[c->status]);
        xml_text(f, c->message);
        fprintf(f, "\"");
        if (c->status != KCAP_JUNIT_SKIP)
            fprintf(f, " type=\"%s\"", c->status == KCAP_JUNIT_FAIL ? "mismatch" : "error");
        fputc('>', f);
        xml_text(f, c->detail);
        fprintf(f, "</%s>\n  </testcase>\n", tag[c->status]);
    }
    fputs("</testsuite>\n</testsuites>\n", f);
    return kcap_doc_close(&doc, err);
}
