"""Command line: ``python -m qrlib run PROFILE``, ``park``, ``status``, ``results``,
``baseline``, ``data fetch``."""
from __future__ import annotations

import argparse
import sys

from qrlib.core.errors import QrlibError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m qrlib", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="execute the notebooks with a parameter profile")
    run.add_argument("profile", help="params/<name>.yaml (or just the name)")
    run.add_argument("--only", action="append", default=None, metavar="NN",
                     help="run only this notebook (number or full name); repeatable")
    run.add_argument("--stale", action="store_true",
                     help="run only the notebooks `qrlib status` calls stale or never run")
    run.add_argument("--resume", action="store_true", help="the same as --stale")
    run.add_argument("--long", action="store_true",
                     help="also run the profile's long set (its `long:` notebooks)")
    run.add_argument("--allow-dirty", action="store_true",
                     help="publish from a tree with uncommitted changes to a notebook's "
                          "inputs (the stamps say so)")
    run.add_argument("--log-output", action="store_true", help="stream notebook output")
    run.add_argument("--park-at", default=None, metavar="HH:MM|+MIN",
                     help="at that time stop the running notebook, park its trainings "
                          "(as `park` does) and start no further notebook")
    run.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="run up to N notebooks at once, each after the notebooks it reads "
                          "(`make test` runs smoke with 2); mind memory: one notebook of the "
                          "cpu profile may take 16 GB")
    pk = sub.add_parser("park", help="pack a stopped run's trainings into artifacts/ so a "
                                     "later `run` resumes them (qrlib.workbook.park)")
    pk.add_argument("profile", help="params/<name>.yaml (or just the name)")
    pk.add_argument("--only", action="append", required=True, metavar="NN",
                    help="the notebook whose stopped run to park")
    ps = sub.add_parser("push-size", help="bytes each commit since a base adds and removes, "
                                          "against a push limit (qrlib.workbook.pushsize)")
    ps.add_argument("--since", required=True, metavar="REF", help="the commit the push starts "
                                                                  "from (e.g. origin/main)")
    ps.add_argument("--limit-mib", type=float, default=256.0, help="the host's limit (MiB)")
    base = sub.add_parser("baseline", help="raw-query metrics of one dataset")
    base.add_argument("--dataset", required=True, help="dataset name or BEIR folder path")
    base.add_argument("--retriever", default="bm25", help="bm25 | bm25-ref | dense")
    base.add_argument("--split", default="test")
    base.add_argument("--json", action="store_true", help="print JSON instead of a table")
    st = sub.add_parser("status", help="fresh / stale (and why) / never run, per notebook")
    st.add_argument("--profile", default="cpu", help="params/<name>.yaml (or just the name)")
    st.add_argument("--brief", action="store_true",
                    help="name at most 3 reasons per stale notebook")
    res = sub.add_parser("results", help="write RESULTS.md from tables/<profile>/")
    res.add_argument("--profile", default="cpu", help="profile whose tables are reported")
    res.add_argument("--output", default=None, help="file to write (default: RESULTS.md)")
    res.add_argument("--check", action="store_true", help="fail if the file is out of date")
    data = sub.add_parser("data", help="the offline data sets from their public sources")
    dsub = data.add_subparsers(dest="data_cmd", required=True)
    fetch = dsub.add_parser("fetch", help="download, verify (sha256) and build data sets "
                                          "into ./data (or $QRLIB_DATA)")
    fetch.add_argument("names", nargs="*", help="data sets (default: every buildable one)")
    fetch.add_argument("--dest", default=None, help="folder to build into (default: ./data "
                                                    "or $QRLIB_DATA)")
    fetch.add_argument("--base-url", default="https://raw.githubusercontent.com",
                       help="where <repo>/<commit>/<path> is served (a mirror, or "
                            "qrlib.data.build.clones.serve on a machine without internet)")
    fetch.add_argument("--force", action="store_true", help="rebuild a set that exists")
    fetch.add_argument("--missing", action="store_true",
                       help="only the sets the loaders do not find yet (make data)")
    build = sub.add_parser("build-notebooks", help="regenerate notebooks/*.ipynb from notebooks/src")
    build.add_argument("names", nargs="*", help="notebook names (default: all)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "run":
            from qrlib.workbook import run_profile

            run_profile(args.profile, only=args.only, resume=args.resume, stale=args.stale,
                        long=args.long, allow_dirty=args.allow_dirty,
                        park_at=args.park_at, log_output=args.log_output, jobs=args.jobs)
        elif args.cmd == "park":
            from qrlib.core.io import REPO_ROOT
            from qrlib.workbook.park import left_outputs, park
            from qrlib.workbook.runner import resolve_profile

            dest = park(resolve_profile(args.profile, REPO_ROOT), args.only, REPO_ROOT)
            print(f"parked in {dest.relative_to(REPO_ROOT)}; commit it, then `python -m qrlib "
                  f"run {args.profile} --only {args.only[0]}` resumes it")
            left = left_outputs(dest.parent.name, dest.name.split(".", 1)[0], REPO_ROOT)
            if left["changed"]:
                print(f"the stopped run rewrote {len(left['changed'])} published file(s) it "
                      f"never stamped; put them back: git checkout -- {' '.join(left['changed'])}")
            if left["new"]:
                print(f"and wrote {len(left['new'])} new one(s): rm {' '.join(left['new'])}")
        elif args.cmd == "status":
            from qrlib.workbook.freshness import profile_status, refresh_summary
            from qrlib.workbook.profiles import load_profile, long_notebooks

            from qrlib.core.io import REPO_ROOT
            from qrlib.workbook.park import parked_note
            from qrlib.workbook.runner import resolve_profile

            prof = load_profile(resolve_profile(args.profile, REPO_ROOT))
            long = set(long_notebooks(prof))
            statuses = profile_status(args.profile)
            for s in statuses:
                print(s.line(3 if args.brief else None)
                      + ("  [long set: --long]" if s.notebook in long else "")
                      + parked_note(prof["name"], s.notebook, REPO_ROOT,
                                    fresh=s.state == "fresh"))
            print(refresh_summary(statuses))
        elif args.cmd == "push-size":
            from qrlib.core.io import REPO_ROOT
            from qrlib.workbook.pushsize import push_size_main

            return push_size_main(args.since, REPO_ROOT, args.limit_mib)
        elif args.cmd == "baseline":
            from qrlib.retrieval.baseline import baseline_main

            baseline_main(args.dataset, args.retriever, args.split, as_json=args.json)
        elif args.cmd == "results":
            from qrlib.workbook.results import results_main

            return results_main(args.profile, args.output, check=args.check)
        elif args.cmd == "data":
            from qrlib.data.build.fetch import fetch_main

            return fetch_main(args.names, args.dest, args.base_url, args.force, args.missing)
        elif args.cmd == "build-notebooks":
            from qrlib.workbook import build_notebooks

            for p in build_notebooks(args.names or None):
                print(p)
    except QrlibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; completed notebooks keep their markers under "
              "tables/<profile>/manifest.json (rerun with --stale)" if args.cmd == "run"
              else "error: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
