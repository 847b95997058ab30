"""scripts/coverage_summary.py: the per-folder and least-covered summary scripts/coverage.sh prints
of gcovr's JSON report, on a small report written here in gcovr 5.2's format.

Run: python3 -m unittest tests/python/test_coverage_summary.py
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import coverage_summary  # noqa: E402


def line(number, count, branches=(), noncode=False):
    entry = {"line_number": number, "count": count,
             "branches": [{"count": c, "fallthrough": False, "throw": False} for c in branches],
             "gcovr/noncode": noncode}
    return entry


REPORT = {
    "gcovr/format_version": "0.3",
    "files": [
        {   # 4 code lines (one noncode left out), 3 run; 4 branches, 1 taken; 1 of 2 functions never
            "file": "costmodel/gemm.cpp",
            "lines": [line(1, 5, (3, 0)), line(2, 0, (0, 0)), line(3, 1), line(4, 2),
                      line(5, 0, noncode=True)],
            "functions": [{"name": "a", "lineno": 1, "execution_count": 5},
                          {"name": "b", "lineno": 2, "execution_count": 0}],
        },
        {   # 2 code lines, 0 run
            "file": "search/serve/flow.cpp",
            "lines": [line(1, 0), line(2, 0)],
            "functions": [{"name": "c", "lineno": 1, "execution_count": 0}],
        },
        {   # a file at the top of its folder: folder "cli"
            "file": "cli/main.cpp",
            "lines": [line(1, 1)],
            "functions": [],
        },
    ],
}


class CoverageSummaryTest(unittest.TestCase):
    def run_summary(self, report, *extra):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "coverage.json")
            with open(path, "w") as f:
                json.dump(report, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                status = coverage_summary.main([path, *extra])
            return status, out.getvalue()

    def test_counts_per_file_and_folder(self):
        self.assertEqual(coverage_summary.file_counts(REPORT["files"][0]), (4, 3, 4, 1, 2, 1))
        self.assertEqual(coverage_summary.folder_of("search/serve/flow.cpp"), "search/serve")
        self.assertEqual(coverage_summary.folder_of("cli/main.cpp"), "cli")
        status, text = self.run_summary(REPORT, "--min-lines", "2")
        self.assertEqual(status, 0)
        rows = {r.split()[0]: r.split() for r in text.splitlines()[1:4]}
        self.assertEqual(rows["costmodel"], ["costmodel", "4", "75.0%", "4", "25.0%", "2", "1"])
        self.assertEqual(rows["search/serve"], ["search/serve", "2", "0.0%", "0", "-", "1", "1"])
        self.assertEqual(rows["cli"], ["cli", "1", "100.0%", "0", "-", "0", "0"])
        # Least covered first; cli/main.cpp has 1 code line, under --min-lines 2.
        listed = text.split("least covered files of 2 code lines or more")[1].splitlines()[1:]
        self.assertEqual([r.split()[0] for r in listed],
                         ["search/serve/flow.cpp", "costmodel/gemm.cpp"])
        self.assertIn("75.0% of     4   25.0% of     4    1 of   2", listed[1])

    def test_a_file_that_is_not_gcovr_json_is_named(self):
        with self.assertRaises(SystemExit) as e:
            self.run_summary({"lines": []})
        self.assertIn("expected gcovr's JSON", str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
