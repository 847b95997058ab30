#!/usr/bin/env python3
"""Summarises gcovr's JSON report (scripts/coverage.sh): line and branch coverage per folder, and
the files least covered, with how many of their functions no test calls.

    coverage_summary.py COVERAGE.json [--total TOTAL.txt] [--least N] [--min-lines L]

A line counts when gcov says it is code (gcovr's "gcovr/noncode" lines do not); a branch counts
when gcovr kept it (scripts/coverage.sh leaves out unreachable and exception branches). Folders are
the first two path segments (search/serve, profiler/common), or one for a file at a folder's top.
"""
import argparse
import json
import sys
from collections import defaultdict


def file_counts(entry):
    """(lines, lines run, branches, branches taken, functions, functions never called)."""
    lines = run = branches = taken = 0
    for line in entry.get("lines", []):
        if line.get("gcovr/noncode"):
            continue
        lines += 1
        run += line.get("count", 0) > 0
        for branch in line.get("branches", []):
            branches += 1
            taken += branch.get("count", 0) > 0
    functions = entry.get("functions", [])
    never = sum(1 for f in functions if f.get("execution_count", 0) == 0)
    return lines, run, branches, taken, len(functions), never


def folder_of(path):
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def percent(part, whole):
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="gcovr --json output")
    parser.add_argument("--total", help="gcovr --print-summary output, printed first")
    parser.add_argument("--least", type=int, default=25, help="files to list (default 25)")
    parser.add_argument("--min-lines", type=int, default=100,
                        help="list only files of at least this many code lines (default 100)")
    args = parser.parse_args(argv)
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"coverage_summary: {args.report}: {e}")
    files = report.get("files")
    if not isinstance(files, list):
        sys.exit(f"coverage_summary: {args.report}: expected gcovr's JSON (a \"files\" list)")

    if args.total:
        with open(args.total) as f:
            print(f.read().rstrip())
        print()

    per_file = {}
    folders = defaultdict(lambda: [0] * 6)
    for entry in files:
        counts = file_counts(entry)
        per_file[entry["file"]] = counts
        total = folders[folder_of(entry["file"])]
        for i, c in enumerate(counts):
            total[i] += c

    print(f"{'folder':<24} {'lines':>7} {'run':>7} {'branches':>9} {'taken':>7} {'functions':>9} "
          f"{'never':>6}")
    for name in sorted(folders):
        lines, run, branches, taken, functions, never = folders[name]
        print(f"{name:<24} {lines:>7} {percent(run, lines):>7} {branches:>9} "
              f"{percent(taken, branches):>7} {functions:>9} {never:>6}")

    listed = [(run / lines, path, c) for path, c in per_file.items()
              for lines, run in [c[:2]] if lines >= args.min_lines]
    listed.sort()
    print(f"\nleast covered files of {args.min_lines} code lines or more "
          f"(lines run, branches taken, functions never called):")
    for share, path, (lines, run, branches, taken, functions, never) in listed[:args.least]:
        print(f"  {path:<52} {percent(run, lines)} of {lines:>5}  {percent(taken, branches)} of "
              f"{branches:>5}  {never:>3} of {functions:>3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
