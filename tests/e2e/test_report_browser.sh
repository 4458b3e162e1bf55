#!/usr/bin/env bash
# test_report_browser.sh — the `kcap replay --report DIR` page seen in a real browser:
# headless Chromium loads DIR/index.html of a run with failing cases (the perturbed CPU
# library against golden snapshots) and
#   1. in the page itself, every heatmap <img> has loaded (complete, naturalWidth > 0) —
#      a script added to a copy of the page reports what the browser decoded (--dump-dom);
#   2. a screenshot of the page is not blank: a real PNG, many colours, pixel variance, and
#      heatmap colours (not only text on white) in it.
# KCAP_SCREENSHOT=PATH also keeps the screenshot (docs/report-screenshot.png is made so:
# KCAP_SCREENSHOT=docs/report-screenshot.png KCAP_REPORT_CASES=all tests/e2e/test_report_browser.sh).
# Skips (77) only when no Chromium is installed (make deps installs the Debian package) or
# matplotlib, which draws the heatmaps, is missing.
. "$(dirname "$0")/../lib.sh"
G=tests/golden/snapshots
require "$KCAP" "$PERT"
browser=
for b in chromium chromium-browser google-chrome-stable google-chrome; do
    command -v "$b" > /dev/null && { browser=$(command -v "$b"); break; }
done
[ -n "$browser" ] || skip "no Chromium installed (make deps installs the Debian package chromium)"
"$PY" -c 'import matplotlib, PIL' 2>/dev/null ||
    skip "python3-matplotlib (with PIL) not installed: the report has no heatmaps"

mkdir -p "$T/snaps"
if [ "${KCAP_REPORT_CASES:-}" = all ]; then cp "$G"/*.h5 "$T/snaps/"
else cp "$G/h8_q1_s0.h5" "$G/h16_q8_s1.h5" "$G/h64_q7_s0.h5" "$T/snaps/"; fi
ncase=$(ls "$T/snaps" | wc -l)
"$KCAP" replay "$T/snaps" --kernel "$PERT" --ref none --report "$T/rep" -q > "$T/replay.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "replay of the perturbed library should fail (exit 1), got $rc: $(tail -3 "$T/replay.out")"
[ -f "$T/rep/index.html" ] || die "no $T/rep/index.html"
nimg=$(grep -o '<img ' "$T/rep/index.html" | wc -l)
[ "$nimg" -eq $((2 * ncase)) ] || fail "want a heatmap of o and lse per failing case ($((2 * ncase))), the page has $nimg"

# headless Chromium: a private profile, no sandbox (CI runs as root), no GPU, a timeout
chrome() {
    timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --no-first-run --hide-scrollbars --user-data-dir="$T/profile" "$@" 2> "$T/chrome.err"
}

# 1. what the browser loaded, reported by the page
sed 's|</body>|<script>window.addEventListener("load", function () {\
  var im = document.images, ok = 0, bad = [];\
  for (var i = 0; i < im.length; i++)\
    if (im[i].complete \&\& im[i].naturalWidth > 0) ok++; else bad.push(im[i].getAttribute("src"));\
  var p = document.createElement("pre"); p.id = "kcap-check";\
  p.textContent = "images=" + im.length + " loaded=" + ok + " broken=" + bad.join(",") +\
    " rows=" + document.querySelectorAll("tr.fail").length;\
  document.body.appendChild(p); });</script></body>|' "$T/rep/index.html" > "$T/rep/check.html"
chrome --virtual-time-budget=10000 --dump-dom "file://$T/rep/check.html" > "$T/dom.html"
check=$(grep -o 'id="kcap-check">[^<]*' "$T/dom.html" | sed 's/.*>//')
echo "browser: $check"
[ "$check" = "images=$nimg loaded=$nimg broken= rows=$ncase" ] ||
    fail "in Chromium: '$check' (want images=$nimg loaded=$nimg, $ncase failing rows); $(tail -3 "$T/chrome.err")"

# 2. the screenshot is a picture of the page, not a blank or an error page
chrome --window-size=1100,1500 --screenshot="$T/shot.png" "file://$T/rep/index.html" > /dev/null
"$PY" - "$T/shot.png" <<'PYEOF' || fail "screenshot check"
import sys
import numpy as np
from PIL import Image
path = sys.argv[1]
with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
a = np.asarray(Image.open(path).convert("RGB")).astype(np.int32)
h, w, _ = a.shape
colours = len(np.unique(a.reshape(-1, 3) @ np.array([1 << 16, 1 << 8, 1])))
chroma = a.max(axis=2) - a.min(axis=2)          # 0 for white, grey and black
coloured = float((chroma > 60).mean())          # magma's reds and purples, the table rows
dark = float((a.max(axis=2) < 60).mean())       # magma's near-black: the heatmaps' bodies
print("screenshot: %dx%d, %d colours, std %.1f, %.1f%% coloured, %.1f%% dark pixels"
      % (w, h, colours, a.std(), 100 * coloured, 100 * dark))
assert (w, h) == (1100, 1500), (w, h)
assert a.std() > 20, "nearly uniform: a blank page"
assert colours > 200, "too few colours for heatmaps"
# text on white (a page whose images did not load) is ~1% dark and has no colour
assert coloured > 0.01 and dark > 0.10, "the heatmaps are not on the page"
PYEOF
if [ -n "${KCAP_SCREENSHOT:-}" ]; then
    # palette PNG: a fraction of the size, indistinguishable for a page of flat colours
    "$PY" -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).convert("RGB").quantize(256).save(sys.argv[2], optimize=True)' \
        "$T/shot.png" "$KCAP_SCREENSHOT" && echo "kept the screenshot as $KCAP_SCREENSHOT"
fi
finish "report in a browser ok"
