#!/usr/bin/env bash
# test_man.sh — the manual page cli/kcap.1 (installed by make install) is the one
# cli/kcap_man.sh generates from the CLI's own help text, it renders without roff warnings,
# and it carries every command the dispatcher lists with that command's usage line.
set -u
cd "$(dirname "$0")/../.."
B=${KCAP_BUILD:-build}
K=$B/bin/kcap
[ -x "$K" ] || { echo "FAIL: $K not built"; exit 1; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bash cli/kcap_man.sh "$K" > "$work/kcap.1" || bad "cli/kcap_man.sh failed"
cmp -s "$work/kcap.1" cli/kcap.1 || bad "cli/kcap.1 is not what the help text generates (run make): $(diff "$work/kcap.1" cli/kcap.1 | head -5)"
if command -v groff > /dev/null; then
    warn=$(groff -man -Tutf8 -ww -z cli/kcap.1 2>&1)
    [ -z "$warn" ] || bad "groff warnings: $warn"
    page=$(groff -man -Tutf8 -P-cbou cli/kcap.1 2>/dev/null)
    for c in $("$K" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p'); do
        usage=$("$K" "$c" --help | grep -m1 '^usage:' | tr -s ' ')
        grep -qF -- "$usage" <<<"$(tr -s ' ' <<<"$page")" || bad "the page lacks '$usage'"
    done
    [ "$(grep -c 'usage: kcap ' <<<"$page")" -ge 9 ] || bad "fewer than 9 commands in the page"
else
    echo "groff not installed: rendering not checked"
fi
[ $fail -eq 0 ] && echo "man page ok"
exit $fail
