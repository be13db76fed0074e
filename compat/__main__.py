"""``python -m compat``: run the matrix (or some suites), list the suites, build the Java
client program or everything the suites need, re-render RESULTS.md.  Run from the repository's root."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from compat import java_build, report, suites
from compat.report import Row
from compat.runner import run_variant

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
RESULTS_DIR = HERE / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run suites (all by default) and write compat/RESULTS.md")
    run.add_argument("suites", nargs="*", metavar="SUITE")
    run.add_argument("--quick", action="store_true",
                     help="the quick subset (PLAINTEXT only); writes the JSON, not RESULTS.md")
    run.add_argument("--variant", action="append", help="only these variants (plaintext, sasl_ssl, ...)")
    run.add_argument("--reference", choices=("3.9", "2.8"),
                     help="against Apache Kafka's own brokers (PLAINTEXT variants; JSON only) to check the suites")
    commands.add_parser("list", help="the suites and their variants")
    commands.add_parser("build-java", help="compile compat/java into the JVM cache (if its sources changed)")
    prepare = commands.add_parser("prepare", help="download and build what suites need (all by default; cached), "
                                                  "without running them")
    prepare.add_argument("suites", nargs="*", metavar="SUITE")
    commands.add_parser("report", help="re-render compat/RESULTS.md from the rows it carries")
    args = parser.parse_args(argv)

    if args.command == "list":
        for s in suites.all_suites():
            print(f"{s.NAME:20} {', '.join(v.name for v in s.VARIANTS):20} {s.TITLE}")
        return 0
    if args.command == "build-java":
        try:
            print(f"compat/java: {java_build.build()}")
        except java_build.JavaBuildError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    if args.command == "prepare":
        try:
            chosen = suites.find(args.suites)
        except ValueError as e:
            parser.error(str(e))
        for suite in chosen:
            if (step := getattr(suite, "prepare", None)) is not None:
                started = time.monotonic()
                step()
                print(f"{suite.NAME}: prepared in {time.monotonic() - started:.0f} s", flush=True)
        return 0
    if args.command == "report":
        _write_md(report.read_rows(RESULTS_MD.read_text()))
        return 0
    try:
        selected = suites.find(args.suites)
    except ValueError as e:
        parser.error(str(e))
    rows: list[Row] = []
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    kind = "-quick" if args.quick else f"-kafka-{args.reference}" if args.reference else ""
    for suite in selected:
        for variant in suite.VARIANTS:
            if (args.quick and not variant.quick) or (args.variant and variant.name not in args.variant) \
                    or (args.reference and variant.security is not None):
                continue
            where = f" on Apache Kafka {args.reference}" if args.reference else ""
            label = variant.listener if variant.name == variant.listener.lower() else f"{variant.listener}, {variant.name}"
            print(f"== {suite.NAME} ({label}){where} ...", flush=True)
            workdir = RESULTS_DIR / "work" / f"{suite.NAME}-{variant.name}{kind}"
            row = run_variant(suite, variant, workdir, quick=args.quick, reference=args.reference)
            rows.append(row)
            print(f"   {row.passed} passed, {row.failed} failed, {row.skipped} skipped in {row.seconds:.0f} s")
            for case in row.problems:
                print(f"   {case.status.value}: {case.name}: {case.cause}")
            # After every row, so that a run stopped half-way keeps the rows it finished.
            json_path = report.write_json(rows, RESULTS_DIR / f"run-{stamp}{kind}.json")
            if not args.quick and not args.reference:
                old = report.read_rows(RESULTS_MD.read_text()) if RESULTS_MD.exists() else []
                _write_md(report.merge(old, [row], {}), quiet=True)
    if rows:
        print(f"wrote {json_path.relative_to(HERE.parent)}" +
              ("" if args.quick or args.reference else f" and {RESULTS_MD.relative_to(HERE.parent)}"))
    return 1 if any(r.failed for r in rows) else 0


def _write_md(rows: list[Row], quiet: bool = False) -> None:
    known = suites.all_suites()
    ordered = report.merge(rows, [], {s.NAME: s.ORDER for s in known})
    RESULTS_MD.write_text(report.render(ordered, {s.NAME: s.TITLE for s in known}))
    if not quiet:
        print(f"wrote {RESULTS_MD.relative_to(HERE.parent)}")


if __name__ == "__main__":
    sys.exit(main())
