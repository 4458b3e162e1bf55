"""manifest.py — per-case settings of a snapshot folder (kcap-manifest.toml or .json).

A golden folder DIR has at most one manifest, found as DIR/kcap-manifest.{toml,json} or,
failing that, beside the folder (DIR/../kcap-manifest.*: `kcap check DIR` reports every
non-snapshot file inside DIR, so the corpus keeps its manifest one level up); each case (a snapshot's file name without .h5) gets
the [defaults] table overlaid by every [cases."PATTERN"] table whose fnmatch pattern matches
its name, in file order. Keys: atol, rtol, lse_atol, lse_rtol (tolerances, numbers >= 0),
ref ("none" | "cpu" | "gpu"), pool ("auto" | "original" | "remap"), skip / xfail (a reason
string), strict (bool, an xfail that passes fails; default true). Unknown keys or bad values
are errors naming the file and the key: a typo must not silently loosen a tolerance.
"""
import fnmatch
import json
import os

NAMES = ("kcap-manifest.toml", "kcap-manifest.json")
_NUM = ("atol", "rtol", "lse_atol", "lse_rtol")
_CHOICES = {"ref": ("none", "cpu", "gpu"), "pool": ("auto", "original", "remap")}
_STR = ("skip", "xfail")
# manifest key -> `kcap replay` option
CLI_FLAGS = {"atol": "--atol", "rtol": "--rtol", "lse_atol": "--lse-atol",
             "lse_rtol": "--lse-rtol", "ref": "--ref", "pool": "--pool"}


class ManifestError(ValueError):
    """A manifest that cannot be parsed or holds an unknown key / a bad value."""


def _check_table(path, where, table):
    if not isinstance(table, dict):
        raise ManifestError("%s: %s must be a table" % (path, where))
    for k, v in table.items():
        ok = ((k in _NUM and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0)
              or (k in _CHOICES and v in _CHOICES[k])
              or (k in _STR and isinstance(v, str) and v)
              or (k == "strict" and isinstance(v, bool)))
        if not ok:
            known = ", ".join(_NUM + tuple(_CHOICES) + _STR + ("strict",))
            if k not in _NUM + tuple(_CHOICES) + _STR + ("strict",):
                raise ManifestError("%s: %s: unknown key %r (known: %s)" % (path, where, k, known))
            raise ManifestError("%s: %s: bad value %r for %r" % (path, where, v, k))
    return table


def _parse(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        if path.endswith(".toml"):
            import tomllib  # Python >= 3.11
            doc = tomllib.loads(data.decode())
        else:
            doc = json.loads(data.decode())
    except ImportError:
        raise ManifestError("%s: reading TOML needs Python >= 3.11 (tomllib); use "
                            "kcap-manifest.json" % path) from None
    except ValueError as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ManifestError("%s: %s" % (path, e)) from None
    if not isinstance(doc, dict):
        raise ManifestError("%s: top level must be a table" % path)
    extra = set(doc) - {"defaults", "cases"}
    if extra:
        raise ManifestError("%s: unknown section(s) %s (use [defaults] and [cases.\"NAME\"])"
                            % (path, ", ".join(sorted(extra))))
    return doc


class Manifest:
    """Settings per case name; an empty Manifest when the folder has none."""

    def __init__(self, path=None):
        self.path = path
        self.defaults, self.cases = {}, []
        if path is None:
            return
        doc = _parse(path)
        self.defaults = _check_table(path, "[defaults]", doc.get("defaults", {}))
        cases = doc.get("cases", {})
        if not isinstance(cases, dict):
            raise ManifestError("%s: [cases] must be a table of tables" % path)
        for pattern, table in cases.items():
            self.cases.append((pattern, _check_table(path, "[cases.%r]" % pattern, table)))

    @classmethod
    def find(cls, folder):
        """The manifest of a folder (inside it, else beside it), else an empty one."""
        for d in (folder, os.path.dirname(os.path.abspath(folder))):
            for n in NAMES:
                p = os.path.join(d, n)
                if os.path.isfile(p):
                    return cls(p)
        return cls()

    def settings(self, name):
        """Merged settings of one case."""
        out = dict(self.defaults)
        for pattern, table in self.cases:
            if fnmatch.fnmatchcase(name, pattern):
                out.update(table)
        return out

    def unmatched(self, names):
        """Case patterns that match none of `names` (likely typos)."""
        return [p for p, _ in self.cases if not any(fnmatch.fnmatchcase(n, p) for n in names)]


def replay_flags(settings):
    """`kcap replay` options for a case's settings."""
    flags = []
    for key, flag in CLI_FLAGS.items():
        if key in settings:
            flags += [flag, str(settings[key])]
    return flags
