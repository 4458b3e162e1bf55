"""test_report.py — `kcap replay --report DIR` (kcap.report): the page lists every case,
a failing case gets an error heatmap per output, and the heatmap data locates the one
element the perturbed library shifts (last request's first token, last head)."""
import html.parser
import os

import pytest

import kcap
from kcap.report import error_map
from conftest import CPU_LIB, KCAP, PERTURBED_LIB, run


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.imgs = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class"):
            self.rows.append(a["class"])
        if tag == "img":
            self.imgs.append(a["src"])


def report(corpus, lib, out):
    p = run(KCAP, "replay", corpus, "--kernel", lib, "--ref", "none", "--report", out,
            "--quiet")
    page = Page()
    page.feed((out / "index.html").read_text())
    return p, page


def test_failing_cases_get_heatmaps(small_corpus, tmp_path):
    out = tmp_path / "rep"
    p, page = report(small_corpus, PERTURBED_LIB, out)
    assert p.returncode == 1, p.stderr.decode()
    assert page.rows == ["fail"] * 3
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pytest.skip("matplotlib not installed: page without heatmaps")
    assert len(page.imgs) == 6  # o and lse of each failing case
    for src in page.imgs:
        with open(out / src, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_error_map_locates_the_shifted_element(small_corpus, tmp_path):
    out = tmp_path / "rep"
    report(small_corpus, PERTURBED_LIB, out)
    for name in os.listdir(small_corpus):
        cap, saved = kcap.load(small_corpus / name), kcap.load(out / "outputs" / name)
        err = error_map(cap, saved, "o")
        T, H = cap.outputs["o"].shape[:2]
        t = T - cap.scalars["q_len"]
        assert err.shape == (T, H) and err[t, H - 1] > 0.25
        rest = err.copy()
        rest[t, H - 1] = 0
        assert rest.max() < 0.02  # bf16 re-association noise only


def test_passing_run_has_no_heatmaps(small_corpus, tmp_path):
    p, page = report(small_corpus, CPU_LIB, tmp_path / "rep")
    assert p.returncode == 0 and page.rows == ["pass"] * 3 and page.imgs == []
