"""python3 -m kcap — the Python half of the CLI (`kcap export` execs it).

    python3 -m kcap export FILE --to npz|pt [-o OUT|-] [--raw]
    python3 -m kcap show FILE            (tensor names, shapes, dtypes)
    python3 -m kcap report DIR           (DIR/index.html from `kcap replay --report DIR`)
Exit status: 0 ok, 1 the file could not be read/written, 2 usage error.
"""
import argparse
import sys

from . import export as _export
from . import report as _report
from .snapshot import SnapshotError, load


def main(argv=None):
    p = argparse.ArgumentParser(prog="kcap", description="kcap snapshot tools (Python side)")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write a snapshot as another format")
    e.add_argument("file")
    e.add_argument("--to", required=True, choices=_export.FORMATS)
    e.add_argument("-o", "--output",
                   help="output path, - for stdout (default: FILE with the new suffix)")
    e.add_argument("-q", "--quiet", action="store_true", help="no 'wrote' line")
    e.add_argument("-v", "--verbose", action="store_true", help="also list the tensors")
    e.add_argument("--raw", action="store_true", help="keep bf16 as uint16 bits")
    s = sub.add_parser("show", help="list a snapshot's tensors")
    s.add_argument("file")
    r = sub.add_parser("report", help="HTML page of a `kcap replay --report DIR` run")
    r.add_argument("dir")
    a = p.parse_args(argv)
    try:
        if a.cmd == "export":
            out = _export.export(a.file, a.to, a.output, raw=a.raw)
            if not a.quiet:  # with -o - the file went to stdout: the note goes to stderr
                note = sys.stderr if out == "-" else sys.stdout
                print("wrote %s" % ("stdout" if out == "-" else out), file=note)
                if a.verbose:
                    for t in load(a.file).tensors:
                        print("  %-3s %-12s %-9s %s" % (t.direction, t.name, t.dtype,
                                                        list(t.shape)), file=note)
        elif a.cmd == "report":
            _report.write(a.dir)
        else:
            snap = load(a.file)
            for t in snap.tensors:
                print("%-3s %-12s %-9s %s" % (t.direction, t.name, t.dtype, list(t.shape)))
    except (OSError, SnapshotError, ValueError) as err:
        print("kcap %s: %s" % (a.cmd, err), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
