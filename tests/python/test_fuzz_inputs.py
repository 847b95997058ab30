"""scripts/fuzz_inputs.py: hetplan's commands meet the error contract of docs/cli.md on mutated
input files (exit 2 with a message naming the file; no crash, hang or library message), and the
classifier tells those apart.

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_fuzz_inputs.py
"""

import json
import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import fuzz_inputs  # noqa: E402

HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))


def done(code, stderr):
    return subprocess.CompletedProcess(["hetplan"], code, "", stderr)


class ClassifyTest(unittest.TestCase):
    def test_verdicts(self):
        name = "fuzz00001-model.yaml"
        classify = lambda code, err, hung=False: fuzz_inputs.classify(
            None if hung else done(code, err), name, hung)[0]
        self.assertEqual(classify(0, ""), "ok")
        self.assertEqual(classify(2, f"hetplan: error: /t/{name}: block.heads: expected > 0"),
                         "refused")
        self.assertEqual(classify(2, "hetplan: error: --tp 3: expected a divisor"), "unnamed")
        self.assertEqual(classify(2, f"hetplan: error: /t/{name}: malformed JSON: "
                                     "[json.exception.parse_error.101] parse error"), "internal")
        self.assertEqual(classify(1, "hetplan: internal error: vector::_M_range_check"),
                         "internal")
        self.assertEqual(classify(-11, ""), "crash")
        self.assertEqual(classify(134, f"{name}"), "crash")
        self.assertEqual(classify(0, "", hung=True), "hang")
        self.assertEqual(classify(1, "hetplan: internal error: std::bad_alloc"), "memory")
        self.assertEqual(classify(-9, ""), "memory")
        self.assertEqual(classify(-24, ""), "hang")  # SIGXCPU: past the cpu time limit


class MutateTest(unittest.TestCase):
    def test_one_change_per_document(self):
        import random
        rng = random.Random(3)
        doc = {"a": 1, "b": {"c": [1, 2, 3], "d": "x"}}
        for _ in range(50):
            new, what = fuzz_inputs.mutate_doc(rng, doc)
            self.assertNotEqual(json.dumps(new), json.dumps(doc), what)  # True is 1 in Python
            self.assertEqual(doc, {"a": 1, "b": {"c": [1, 2, 3], "d": "x"}})  # not changed


class MutateYamlTest(unittest.TestCase):
    DOC = {"name": "c", "nodes": [{"type": "a", "count": 2}, {"type": "b", "count": 4}],
           "network": {"links": [{"between": ["a", "b"], "gbit": 25, "latency_us": 200}]}}

    def test_the_flow_emitter_writes_the_same_document(self):
        import yaml
        self.assertEqual(yaml.safe_load(fuzz_inputs.emit(self.DOC)), self.DOC)

    def test_merge_keys_keep_the_document_and_the_rest_is_yaml_only(self):
        import random
        import yaml
        rng = random.Random(5)
        seen = set()
        for _ in range(300):
            text, what = fuzz_inputs.mutate_yaml(rng, self.DOC)
            seen.add(what.split()[0])
            if "merged" in what:  # PyYAML reads merge keys as YAML 1.1 defines them
                self.assertIn("<<:", text)
                self.assertEqual(yaml.safe_load(text), self.DOC, what)
            if "alias bomb" in what:  # a few lines, expanding to 9^depth values
                self.assertLess(len(text), 3000)
                self.assertIn("*l", text)
        self.assertEqual(self.DOC["nodes"][0], {"type": "a", "count": 2})  # not changed
        for kind in ("anchor", "tag", "a", "set"):
            self.assertIn(kind, seen)

    def test_deep_nesting_is_written_without_recursion(self):
        import random
        rng = random.Random(1)
        texts = [fuzz_inputs.mutate_shared(rng, self.DOC, "json") for _ in range(40)]
        deepest = max(t.count("[") + t.count("{") for t, _ in texts)
        self.assertGreaterEqual(deepest, 3000)


@unittest.skipUnless(os.path.exists(HETPLAN), f"{HETPLAN} not built")
class ContractTest(unittest.TestCase):
    def test_every_target_meets_the_error_contract(self):
        runs = 12 * len(fuzz_inputs.TARGETS)
        counts, findings = fuzz_inputs.fuzz(HETPLAN, runs, seed=11, timeout=60)
        shown = "\n".join(f"[{v}] {t}: {what} (exit {code})\n  {err}"
                          for t, v, what, code, err, _ in findings)
        self.assertEqual(findings, [], shown)
        # Each target's mutations reached its reader's errors, not only harmless changes (a
        # lenient reader keeps what it can, so its few refusals may not come up in 12 runs).
        for t in fuzz_inputs.TARGETS:
            if not t.lenient:
                self.assertGreater(counts.get((t.name, "refused"), 0), 0, t.name)
            self.assertGreater(sum(counts.get((t.name, v), 0) for v in ("ok", "refused")), 0,
                               t.name)


if __name__ == "__main__":
    unittest.main()
