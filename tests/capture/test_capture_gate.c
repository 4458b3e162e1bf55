/*
 * test_capture_gate.c — `kcap shadow`'s replay gate (capture/kcap_shadow_gate.c) on its own:
 * replay documents (docs/JSON.md's shape, as kcap replay writes them) read into the gate's
 * counts — passes, cases outside tolerance, candidates returning other statuses than at
 * capture, snapshots that could not run, a load error with escapes, file names holding the
 * document's own key texts — and the pass rule: an exit status 0 without a document (a
 * candidate that ended the replay early) or with a case not passed is no pass. Each line the
 * gate says names its case.
 */
#include "kcap_shadow_gate.h"
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

#define CASE(file, pass, cs, rs) \
    "{\"file\":\"" file "\",\"status\":\"" pass "\",\"captured_status\":" #cs ",\"replay_status\":" #rs "}"
#define DOC(load, cases, summary) \
    "{\"tool\":\"kcap replay\",\"schema_version\":1,\"load_error\":" load ",\"cases\":[" cases "],\"summary\":" summary "}\n"

static kcap_gate_result parse(const char *doc)
{
    kcap_gate_result g;
    memset(&g, 0, sizeof g);
    kcap_gate_parse(doc, &g);
    return g;
}

static int says(const kcap_gate_result *g, const char *want)
{
    char line[2048] = "";
    FILE *f = fmemopen(line, sizeof line - 1, "w");
    if (!f)
        return 0;
    kcap_gate_say(f, "/c/cand.so", "/d", g, "\n");
    fclose(f);
    int ok = strstr(line, want) != NULL;
    if (!ok)
        printf("  said: %s", line);
    return ok;
}

int main(void)
{
    kcap_gate_result g = parse(DOC("null", CASE("/d/a.h5", "pass", 0, 0) "," CASE("/d/b.h5", "pass", 0, 0),
                                   "{\"cases\":2,\"passed\":2,\"failed\":0,\"errors\":0,\"wall_ms\":3.5}"));
    TK_CHECK(g.have && g.cases == 2 && g.passed == 2 && !g.beyond && !g.errors && !g.status_mismatch &&
                 !g.load_error[0], "two passing cases");

    /* names holding the document's key texts are escaped in it: not read as keys */
    g = parse(DOC("null", CASE("/d/x\\\"summary\\\":{\\\"cases\\\":99.h5", "fail", 0, 0) ","
                  CASE("/d/y\\\"load_error\\\":\\\"EVIL.h5", "error", 0, 0) ","
                  CASE("/d/z\\\\\\\".h5", "fail", 0, 2),
                  "{\"cases\":3,\"passed\":0,\"failed\":3,\"errors\":1,\"wall_ms\":1}"));
    TK_CHECK(g.have && g.cases == 3 && g.errors == 1 && g.status_mismatch == 1 && g.beyond == 1 && !g.load_error[0],
             "tricky names: 3 cases, 1 error, 1 status mismatch, 1 outside tolerance (%d %d %d %d)", g.cases,
             g.errors, g.status_mismatch, g.beyond);
    TK_CHECK(says(&g, "fails 1 of the 3 snapshots in /d (outside tolerance; it also returned other statuses "
                      "than at capture; 1 more could not be replayed)"), "mixed: all three said");

    /* a case that could not run keeps replay_status 0: an error, not a status mismatch, even
       when its call had failed at capture */
    g = parse(DOC("null", CASE("/d/a.h5", "error", 3, 0) "," CASE("/d/b.h5", "fail", 0, 0),
                  "{\"cases\":2,\"passed\":0,\"failed\":2,\"errors\":1,\"wall_ms\":1}"));
    TK_CHECK(g.errors == 1 && g.status_mismatch == 0 && g.beyond == 1, "an error case captured with status 3: "
             "1 error, 0 mismatches, 1 outside tolerance (%d %d %d)", g.errors, g.status_mismatch, g.beyond);
    TK_CHECK(says(&g, "fails 1 of the 2 snapshots in /d (outside tolerance; 1 more could not be replayed)"),
             "said as outside tolerance");

    g = parse(DOC("null", CASE("/d/a.h5", "fail", 0, 3) "," CASE("/d/b.h5", "fail", 0, 3),
                  "{\"cases\":2,\"passed\":0,\"failed\":2,\"errors\":0,\"wall_ms\":1}"));
    TK_CHECK(g.status_mismatch == 2 && g.beyond == 0, "a candidate returning errors: 2 status mismatches, "
             "none outside tolerance (%d %d)", g.status_mismatch, g.beyond);
    TK_CHECK(says(&g, "returns another status than at capture on 2 of the 2 snapshots in /d"),
             "error statuses said as such, not as outside tolerance");

    g = parse("{\"cases\":[{\"file\":\"/d/a.h5\",\"status\":\"error\",\"error\":\"/d/a.h5: not an HDF5 file\","
              "\"captured_status\":0,\"replay_status\":0}],\"summary\":{\"cases\":1,\"passed\":0,\"failed\":1,"
              "\"errors\":1,\"wall_ms\":1}}");
    TK_CHECK(says(&g, "could not be judged on 1 of the 1 snapshots in /d (they could not be replayed, none was "
                      "outside tolerance; the first: /d/a.h5: not an HDF5 file)"),
             "an unreadable snapshot: not the candidate's failure, and why");

    g = parse(DOC("\"kernel library /c/a \\\"q\\\".so does not export vattn_abi_version\"", "",
                  "{\"cases\":0,\"passed\":0,\"failed\":0,\"errors\":0,\"wall_ms\":0}"));
    TK_CHECK(!strcmp(g.load_error, "kernel library /c/a \"q\".so does not export vattn_abi_version"),
             "the load error unescaped whole: '%s'", g.load_error);
    TK_CHECK(says(&g, "cannot be loaded as a kernel library: kernel library /c/a \"q\".so does not export"),
             "the load error said");

    char big[1200];
    memset(big, 'L', sizeof big - 1);
    big[sizeof big - 1] = 0;
    char *doc = malloc(4096);
    snprintf(doc, 4096, "{\"load_error\":\"kernel library /%s.so does not export vattn_abi_version\"}", big);
    g = parse(doc);
    free(doc);
    TK_CHECK(strlen(g.load_error) == sizeof g.load_error - 1, "a long load error is cut at the buffer, "
             "never past it (%zu)", strlen(g.load_error));

    /* the pass rule, on what kcap_gate_run read: exit 0 alone is no pass */
    g = parse("");
    g.rc = 0;
    TK_CHECK(!kcap_gate_passed(&g) && says(&g, "ended with no result"), "exit 0 and no document: no pass, said");
    g = parse(DOC("null", CASE("/d/a.h5", "pass", 0, 0), "{\"cases\":1,\"passed\":1,\"failed\":0,\"errors\":0,"
                  "\"wall_ms\":1}"));
    g.rc = 0;
    TK_CHECK(kcap_gate_passed(&g), "exit 0, a document, every case passed: a pass");
    g.rc = 1;
    TK_CHECK(!kcap_gate_passed(&g), "every case passed but exit 1: no pass");
    g = parse(DOC("null", CASE("/d/a.h5", "pass", 0, 0) "," CASE("/d/b.h5", "fail", 0, 0),
                  "{\"cases\":2,\"passed\":1,\"failed\":1,\"errors\":0,\"wall_ms\":1}"));
    g.rc = 0;
    TK_CHECK(!kcap_gate_passed(&g), "a case not passed: no pass, whatever the exit status");
    g = parse(DOC("null", CASE("/d/a.h5", "pass", 0, 0), "{\"cases\":1,\"passed\":1,\"failed\":0,\"errors\":0,"
                  "\"wall_ms\":1}"));
    g.rc = 139, g.signal = 11;
    TK_CHECK(says(&g, "killed by signal 11") && says(&g, "after every snapshot had passed"),
             "a replay that crashed after passing: the signal said");
    return tk_summary("test_capture_gate");
}
