"""testing.py — pytest plugin: one test per snapshot of a golden folder.

    pytest [-p kcap.testing] --kcap-golden DIR --kcap-kernel LIB.so [-k NAME] [--junitxml F]

(python/kcap-VERSION.dist-info registers the plugin as the pytest11 entry point
"kcap.testing": with PYTHONPATH=python or after `make install`, -p is not needed.)
Each *.h5 under DIR becomes an item named after the file, replayed by `kcap replay FILE
--kernel LIB --json -` with the settings the folder's kcap-manifest.toml/.json gives that
case (tolerances, reference, pool mode, skip, xfail: see kcap.manifest). A failure shows
the failing tensors, worst element and its (request, token, head, channel); the worst
max_abs of each case is recorded as a JUnit property.
"""
import math
import os

import pytest

from .manifest import Manifest, ManifestError, replay_flags
from .replay import ReplayError, describe_failure, find_kcap, replay_case


def pytest_addoption(parser):
    g = parser.getgroup("kcap", "kcap snapshot replay")
    g.addoption("--kcap-golden", action="append", default=[], metavar="DIR",
                help="folder of snapshots: one test per *.h5 (repeatable)")
    g.addoption("--kcap-kernel", metavar="LIB", help="kernel library under test")
    g.addoption("--kcap-bin", metavar="PATH", help="kcap binary (default: in-tree build, PATH)")
    g.addoption("--kcap-timeout", type=float, default=600, help="seconds per case")


def _golden_dirs(config):
    return [os.path.realpath(d) for d in config.getoption("kcap_golden")]


def pytest_configure(config):
    dirs = _golden_dirs(config)
    if not dirs:
        return
    t = config.getoption("kcap_timeout")
    if not (t > 0 and math.isfinite(t)):  # 0, negative and nan reached subprocess as is
        raise pytest.UsageError("--kcap-timeout %s: not a positive finite number of seconds" % t)
    for d in dirs:
        if not os.path.isdir(d):
            raise pytest.UsageError("--kcap-golden %s: not a directory" % d)
    if not config.getoption("kcap_kernel"):
        raise pytest.UsageError("--kcap-golden needs --kcap-kernel LIB.so")
    if not os.path.isfile(config.getoption("kcap_kernel")):
        raise pytest.UsageError("--kcap-kernel %s: no such file" % config.getoption("kcap_kernel"))
    kcap = find_kcap(config.getoption("kcap_bin"))
    if not kcap:
        raise pytest.UsageError("kcap binary not found (build it, or pass --kcap-bin)")
    config._kcap = {"bin": kcap, "manifests": {}}
    for d in dirs:  # a bad manifest is a usage error before anything runs
        _manifest(config, d)
    if not config.option.file_or_dir:  # no test paths given: collect the folders only
        config.args = list(dirs)


def _manifest(config, folder):
    cache = config._kcap["manifests"]
    if folder not in cache:
        try:
            cache[folder] = Manifest.find(folder)
        except (ManifestError, OSError) as e:
            raise pytest.UsageError(str(e))
    return cache[folder]


def _golden_root(config, path):
    p = os.path.realpath(str(path))
    for d in _golden_dirs(config):
        if p == d or p.startswith(d + os.sep):
            return d
    return None


def pytest_collect_file(file_path, parent):
    if file_path.suffix != ".h5" or file_path.name.startswith("."):
        return None
    root = _golden_root(parent.config, file_path)
    if root is None:
        return None
    return SnapshotFile.from_parent(parent, path=file_path, root=root)


class SnapshotFile(pytest.File):
    """A snapshot file: collects to one SnapshotCase."""

    def __init__(self, *args, root=None, **kw):
        super().__init__(*args, **kw)
        self.root = root

    def collect(self):
        name = self.path.stem
        settings = _manifest(self.config, self.root).settings(name)
        item = SnapshotCase.from_parent(self, name=name, settings=settings)
        if "skip" in settings:
            item.add_marker(pytest.mark.skip(reason=settings["skip"]))
        if "xfail" in settings:
            item.add_marker(pytest.mark.xfail(reason=settings["xfail"], raises=CaseFailed,
                                              strict=settings.get("strict", True)))
        yield item


class CaseFailed(Exception):
    """The replayed case did not pass (details in the message)."""


class SnapshotCase(pytest.Item):
    """One snapshot replayed through the kernel under test."""

    def __init__(self, *args, settings=None, **kw):
        super().__init__(*args, **kw)
        self.settings = settings or {}

    def runtest(self):
        conf = self.config._kcap
        case, _doc, _err = replay_case(conf["bin"], self.path,
                                       self.config.getoption("kcap_kernel"),
                                       replay_flags(self.settings),
                                       timeout=self.config.getoption("kcap_timeout"))
        worst = [t.get("max_abs") for v in (case.get("vs_captured"), case.get("vs_ref")) if v
                 for t in (v.get("tensors") or {}).values() if t.get("max_abs") is not None]
        if worst:
            self.user_properties.append(("max_abs", max(worst)))
        self.user_properties.append(("status", case.get("status")))
        if not case.get("pass"):
            raise CaseFailed(describe_failure(case))

    def repr_failure(self, excinfo):
        if excinfo.errisinstance((CaseFailed, ReplayError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, "kcap replay %s" % self.name
