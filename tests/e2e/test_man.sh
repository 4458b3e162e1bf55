#!/usr/bin/env bash
# test_man.sh — the manual page cli/kcap.1 (installed by make install) is the one
# cli/kcap_man.sh generates from the CLI's own help text, it renders without roff warnings,
# and it carries every command the dispatcher lists with that command's usage line.
. "$(dirname "$0")/../lib.sh"
require "$KCAP"
bash cli/kcap_man.sh "$KCAP" > "$T/kcap.1" || fail "cli/kcap_man.sh failed"
cmp -s "$T/kcap.1" cli/kcap.1 || fail "cli/kcap.1 is not what the help text generates (run make): $(diff "$T/kcap.1" cli/kcap.1 | head -5)"
if command -v groff > /dev/null; then
    warn=$(groff -man -Tutf8 -ww -z cli/kcap.1 2>&1)
    [ -z "$warn" ] || fail "groff warnings: $warn"
    page=$(groff -man -Tutf8 -P-cbou cli/kcap.1 2>/dev/null)
    for c in $("$KCAP" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p'); do
        usage=$("$KCAP" "$c" --help | grep -m1 '^usage:' | tr -s ' ')
        grep -qF -- "$usage" <<<"$(tr -s ' ' <<<"$page")" || fail "the page lacks '$usage'"
    done
    [ "$(grep -c 'usage: kcap ' <<<"$page")" -ge 9 ] || fail "fewer than 9 commands in the page"
else
    echo "groff not installed: rendering not checked"
fi
finish "man page ok"
