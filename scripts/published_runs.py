#!/usr/bin/env python3
"""hetplan's predictions against NVIDIA's and torchtitan's published training runs (issue 37).

The rows of examples/external/published (Megatron-Bridge's DGX-H100 and DGX-B200 performance
summary of NeMo containers 25.09 to 26.06, NeMo 24.07's DGX-H100 FP8 summary, torchtitan's Llama
3.1 benchmarks on H100; the README gives their provenance) become hetplan models, clusters and
strategies (scripts/published_sources.py says how, row by row); each is predicted with `hetplan
predict` (the H100 rows with the shipped H100 calibration, the B200 rows with the datasheet
priors) and its predicted tokens/s per GPU set beside the published one. For every predicted row
(or one per model, cluster and sequence length of a source: `--search representative`), `hetplan
search` looks for the best strategy for the same model, GPUs, batch, sequence, framework and
precision, and the published strategy's prediction is set beside the best it finds (all 99 take
about 90 s on the 2-core dev VM).

  python3 scripts/published_runs.py --out-dir DIR [--only ID...] [--models NAME...]
      [--set KEY=VALUE]... [--search all|representative|none] [--search-time-limit S] [--jobs N]
      [--calibration FILE]... [--json FILE]

Writes DIR/runs.json (every row: inputs, strategy, predicted, measured, error, status and reason;
the summary) and DIR/runs.csv (the same rows, flat), with the strategies, predictions and searches
under DIR/strategies, DIR/predictions, DIR/search; prints every targeted row and the summary:
coverage (the rows hetplan cannot express, with the reason), median and p90 |error| overall, by
source, GPU and model, the worst rows, and the search agreement.

--set changes one strategy key of every row (a JSON value: `--set flash_attention=false`), for the
sensitivity of the figures to what the rows do not say; tp_comm_overlap is set only where sequence
parallelism runs (Megatron-Core refuses it elsewhere). --models keeps the rows of the published
model names given (`--models "GPT OSS 120B"`).

Needs the hetplan binary (HETPLAN_BINARY, default build/cli/hetplan). Exit status 2 for bad input.
"""

import argparse
import concurrent.futures
import csv
import datetime
import json
import os
import platform
import subprocess
import sys

import published_sources as sources
from compare_util import binary, percentile

ROOT = sources.ROOT
TARGETS = {"median": 0.10, "p90": 0.20, "search": 0.10}
CSV_COLUMNS = ("id", "source", "target", "skip", "release", "task", "model_published",
               "model_note", "variant", "model", "gpu", "num_gpus", "cluster",
               "precision_published", "precision", "seq_len", "gbs", "mbs", "tp", "pp", "cp", "vp",
               "ep", "fsdp", "measured_tokens_per_s_per_gpu", "predicted_tokens_per_s_per_gpu",
               "error", "status", "feasible", "reason", "infeasible_reason", "assumptions",
               "search_best_tokens_per_s_per_gpu", "search_ratio", "file", "line")


def hetplan(args):
    r = subprocess.run([binary()] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def file_name(run):
    return run["id"].replace(":", "-")


def predict(run, out_dir, calibration, strategy=None, tag=""):
    """Runs `hetplan predict` on a run's strategy (or `strategy`); returns its `predicted` object,
    or raises RuntimeError with hetplan's message when it refuses the input."""
    name = file_name(run) + tag
    spath = os.path.join(out_dir, "strategies", name + ".json")
    ppath = os.path.join(out_dir, "predictions", name + ".json")
    with open(spath, "w") as f:
        json.dump(strategy or run["strategy"], f, indent=1)
    cmd = ["predict", "--model", model_arg(run), "--cluster", run["cluster"], "--strategy", spath,
           "--seq-len", str(run["seq_len"]), "--json", ppath]
    for c in calibration:
        cmd += ["--calibration", c]
    rc, out, err = hetplan(cmd)
    if rc != 0:
        lines = [x for x in (err or out).strip().splitlines() if x.strip()]
        raise RuntimeError(f"hetplan predict exit {rc}: {lines[-1] if lines else ''}")
    with open(ppath) as f:
        return json.load(f)["predicted"]


def model_arg(run):
    m = run["model"]
    return os.path.join(ROOT, m) if m.endswith(".yaml") else m


def predict_run(run, out_dir, calibration):
    """Fills a run's status, prediction, error and reason."""
    run.update({"status": "", "predicted_tokens_per_s_per_gpu": None, "error": None,
                "feasible": None, "infeasible_reason": "", "breakdown": {}})
    if run["strategy"] is None:
        run["status"] = "not-expressible" if run["reason"] else "not-target"
        return run
    try:
        p = predict(run, out_dir, calibration)
    except RuntimeError as e:
        run["status"], run["reason"] = "hetplan-refused", str(e)
        return run
    run["feasible"] = bool(p["feasible"])
    run["infeasible_reason"] = "" if p["feasible"] else p.get("reason", "")
    run["breakdown"] = {k: v for k, v in (p.get("breakdown") or {}).items()
                        if isinstance(v, (int, float))}
    run["iteration_s"] = p.get("iteration_s")
    tokens = p.get("tokens_per_s") or 0
    if tokens <= 0:  # a rule broken: no time to compare
        run["status"] = "infeasible"
        run["reason"] = f"hetplan: {p.get('reason', 'infeasible')}"
        return run
    run["predicted_tokens_per_s_per_gpu"] = tokens / run["num_gpus"]
    run["error"] = run["predicted_tokens_per_s_per_gpu"] / run["measured_tokens_per_s_per_gpu"] - 1
    run["status"] = "predicted" if p["feasible"] else "predicted-infeasible"
    return run


def compared(runs):
    """The targeted rows with a predicted throughput (those hetplan deems over memory count: the
    runs did run, and their time is predicted all the same)."""
    return [r for r in runs if r["target"] and r["error"] is not None]


def error_stats(values):
    """count, median and p90 of |error|, and the median signed error."""
    ape = sorted(abs(e) for e in values)
    return {"count": len(ape), "median_ape": percentile(ape, 0.5), "p90_ape": percentile(ape, 0.9),
            "median_signed": percentile(sorted(values), 0.5)}


def grouped(runs, key):
    groups = {}
    for r in runs:
        groups.setdefault(key(r), []).append(r["error"])
    return {k: error_stats(v) for k, v in sorted(groups.items())}


def search_summary(runs, searched):
    """How many published strategies come within TARGETS["search"] of the best found; also over
    the rows whose published strategy hetplan deems to fit (the search keeps only those that
    fit, so a published strategy over memory can beat its best)."""
    fits = [r for r in searched if r["feasible"]]

    def within(rows):
        return sum(r["search_ratio"] >= 1 - TARGETS["search"] for r in rows)
    return {"rows": len(searched), "within": within(searched), "fitting_rows": len(fits),
            "fitting_within": within(fits),
            "no_result": [r["id"] for r in runs if r.get("search_error")],
            "ids": [r["id"] for r in searched]}


def summarize(runs):
    targets = [r for r in runs if r["target"]]
    rows = compared(runs)
    missing = [r for r in targets if r["error"] is None]
    acc = error_stats([r["error"] for r in rows])
    searched = [r for r in runs if r.get("search_ratio") is not None]
    summary = {
        "coverage": {"rows": len(targets), "expressible": len(rows),
                     "fraction": len(rows) / len(targets) if targets else float("nan"),
                     "not_expressible": [{"id": r["id"], "model": r["model_published"],
                                          "gpu": r["gpu"], "reason": r["reason"]}
                                         for r in missing]},
        "accuracy": acc,
        "feasible_only": error_stats([r["error"] for r in rows if r["feasible"]]),
        "predicted_over_memory": [r["id"] for r in rows if not r["feasible"]],
        "by_source": grouped(rows, lambda r: r["source"]),
        "by_gpu": grouped(rows, lambda r: r["gpu"]),
        "by_model": grouped(rows, lambda r: f"{r['source']} {r['model_published']}"),
        "worst": [r["id"] for r in sorted(rows, key=lambda r: -abs(r["error"]))[:8]],
        "search": search_summary(runs, searched),
    }
    summary["targets_met"] = {
        "coverage": not missing,
        "median": acc["count"] > 0 and acc["median_ape"] <= TARGETS["median"],
        "p90": acc["count"] > 0 and acc["p90_ape"] <= TARGETS["p90"],
        "search": bool(searched) and summary["search"]["within"] == len(searched)}
    return summary


def search_subset(runs, mode):
    """The rows `hetplan search` runs for: every predicted target row, or the first (in each
    table, the newest) of each model, GPU count and sequence length of a source."""
    rows = [r for r in compared(runs)]
    if mode == "all":
        return rows
    if mode == "none":
        return []
    seen, out = set(), []
    for r in rows:
        key = (r["source"], r["model"], r["cluster"], r["seq_len"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def search_flags():
    rc, out, err = hetplan(["search", "--help"])
    return out + err


def search_run(run, out_dir, calibration, time_limit, help_text):
    """`hetplan search` for a run's model, cluster and batch under its framework; the published
    strategy's prediction over the best found (like for like: in the run's precision where the
    search takes one, else both in bf16)."""
    s = run["strategy"]
    path = os.path.join(out_dir, "search", file_name(run) + ".json")
    cmd = ["search", "--model", model_arg(run), "--cluster", run["cluster"], "--global-batch",
           str(run["gbs"]), "--seq-len", str(run["seq_len"]), "--framework", s["framework"],
           "--time-limit", str(time_limit), "--threads", "1", "--quiet", "--top", "3",
           "--json", path]
    for c in calibration:
        cmd += ["--calibration", c]
    published = run["predicted_tokens_per_s_per_gpu"]
    if "--precision" in help_text:
        cmd += ["--precision", s["precision"]]
        run["search_precision"] = s["precision"]
    else:
        run["search_precision"] = "bf16"
        if s["precision"] != "bf16":
            p = predict(run, out_dir, calibration, dict(s, precision="bf16"), "-bf16")
            published = (p.get("tokens_per_s") or 0) / run["num_gpus"]
    if s.get("host_mode") and s["host_mode"] != "eager":
        cmd += ["--host-mode", s["host_mode"]]
    if s.get("lora"):  # the same fine-tuning: LoRA of the row's rank on its layers
        cmd += ["--lora-rank", str(s["lora"]["rank"]),
                "--lora-modules", ",".join(s["lora"]["target_modules"])]
    rc, out, err = hetplan(cmd)
    if rc != 0:
        run["search_error"] = (err or out).strip().splitlines()[-1:]
        return run
    with open(path) as f:
        result = json.load(f)
    best = [x for x in result.get("strategies", []) if x["predicted"]["feasible"]]
    run["search_stats"] = {k: result["stats"].get(k) for k in
                           ("candidates", "evaluated", "feasible", "elapsed_s",
                            "time_limit_reached")}
    if not best:
        run["search_error"] = ["no feasible strategy found"]
        return run
    top = best[0]
    run["search_best_tokens_per_s_per_gpu"] = top["predicted"]["tokens_per_s"] / run["num_gpus"]
    run["search_best"] = {k: top.get(k) for k in ("dp", "tp", "pp", "cp", "ep", "micro_batch",
                                                  "schedule", "chunks", "recompute", "recompute_modules",
                                                  "zero")}
    run["search_ratio"] = published / run["search_best_tokens_per_s_per_gpu"]
    return run


def context(args):
    rc, version, _ = hetplan(["--version"])
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    return {"hetplan_version": version.strip(), "commit": commit, "host": platform.node(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python3", "scripts/published_runs.py"] + sys.argv[1:]),
            "inputs": [sources.MBRIDGE, sources.NEMO_PRETRAIN, sources.NEMO_FINETUNE,
                       sources.TORCHTITAN], "calibration": args.calibration}


def write_csv(path, runs):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in runs:
            w.writerow(dict(r, assumptions="; ".join(r["assumptions"])))


def label(s):
    """A strategy in a few words: dp, tp, pp, cp, ep, micro-batch, schedule."""
    sched = s["schedule"] + (f"x{s['chunks']}" if (s.get("chunks") or 1) > 1 else "")
    return (f"dp{s['dp']} tp{s['tp']} pp{s['pp']} cp{s.get('cp') or 1} ep{s.get('ep') or 1} "
            f"mb{s['micro_batch']} {sched} {s['recompute']} zero{s['zero']}")


def breakdown_text(run):
    """The prediction's iteration breakdown, largest first, as shares of the iteration."""
    b, total = run["breakdown"], run.get("iteration_s") or 0
    items = sorted(((v, k) for k, v in b.items() if v > 0), reverse=True)
    return ", ".join(f"{k} {100 * v / total:.0f}%" for v, k in items) if total else ""


def pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def print_report(runs, summary):
    print(f"{'row':<20} {'model':<16} {'gpu':<4} {'GPUs':>4} {'precision':<13} {'tp':>2} {'pp':>2} "
          f"{'cp':>2} {'vp':>2} {'ep':>3} {'published':>9} {'hetplan':>9} {'error':>7}  status")
    for r in runs:
        if not r["target"]:
            continue
        pred = r["predicted_tokens_per_s_per_gpu"]
        print(f"{r['id']:<20} {r['model_published'][:16]:<16} {r['gpu']:<4} {r['num_gpus']:>4} "
              f"{(r.get('precision') or r['precision_published'] or '-')[:13]:<13} {r['tp']:>2} "
              f"{r['pp']:>2} {r['cp']:>2} {r['vp']:>2} {r['ep']:>3} "
              f"{r['measured_tokens_per_s_per_gpu']:>9.0f} "
              f"{'-' if pred is None else f'{pred:9.0f}':>9} {pct(r['error']):>7}  "
              f"{r['status']}{'' if r['feasible'] in (None, True) else ' (over memory)'}")
    c, a = summary["coverage"], summary["accuracy"]
    print(f"\ncoverage: {c['expressible']} of {c['rows']} targeted rows expressible")
    for m in c["not_expressible"]:
        print(f"  {m['id']} {m['model']} ({m['gpu']}): {m['reason']}")
    if a["count"]:
        print(f"accuracy (tokens/s per GPU): {a['count']} rows, median |error| "
              f"{100 * a['median_ape']:.1f}%, p90 {100 * a['p90_ape']:.1f}%, median signed "
              f"{pct(a['median_signed'])}; {len(summary['predicted_over_memory'])} predicted over "
              f"memory")
        for title, key in (("source", "by_source"), ("GPU", "by_gpu"), ("model", "by_model")):
            print(f"by {title}:")
            for k, e in summary[key].items():
                print(f"  {k:<40} {e['count']:>3} rows  median |error| "
                      f"{100 * e['median_ape']:5.1f}%"
                      f"  p90 {100 * e['p90_ape']:5.1f}%  signed {pct(e['median_signed'])}")
        by_id = {r["id"]: r for r in runs}
        print("worst rows:")
        for i in summary["worst"]:
            r = by_id[i]
            parts = breakdown_text(r)
            print(f"  {i} {r['model_published']} {r['gpu']} {r['num_gpus']} GPUs "
                  f"{pct(r['error'])}: {parts}")
    s = summary["search"]
    if s["rows"]:
        print(f"search: the published strategy within {100 * TARGETS['search']:.0f}% of the best "
              f"found for {s['within']} of {s['rows']} rows ({s['fitting_within']} of the "
              f"{s['fitting_rows']} whose published strategy hetplan deems to fit)")
        for r in runs:
            if r.get("search_ratio") is not None:
                print(f"  {r['id']:<20} {r['model_published'][:16]:<16} published/best "
                      f"{r['search_ratio']:.3f} ({r['search_precision']}"
                      f"{'' if r['feasible'] else ', published over memory'}) best "
                      f"{label(r['search_best'])}")
    for r in runs:
        if r.get("search_error"):
            print(f"  {r['id']}: search: {' '.join(r['search_error'])}")
    print("targets met: " + ", ".join(f"{k} {'yes' if v else 'no'}"
                                      for k, v in summary["targets_met"].items()))


def parse_set(items):
    """--set KEY=VALUE pairs, each VALUE read as JSON (a bare word as a string)."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set: expected KEY=VALUE, found {item!r}")
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out


def apply_set(runs, changes):
    for r in runs:
        s = r["strategy"]
        if s is None:
            continue
        for key, value in changes.items():
            if key == "tp_comm_overlap" and not s["sequence_parallel"]:
                continue
            s[key] = value
        if changes:
            r["assumptions"].append("--set " + json.dumps(changes, sort_keys=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True, help="runs.json, runs.csv, strategies, "
                    "predictions, search")
    ap.add_argument("--only", nargs="+", default=[],
                    help="run ids (table:line, as runs.csv gives them) to predict")
    ap.add_argument("--models", nargs="+", default=[], help="published model names to keep")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a strategy key changed in every row (repeatable)")
    ap.add_argument("--search", choices=("all", "representative", "none"), default="all")
    ap.add_argument("--search-time-limit", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=2, help="hetplan processes at a time")
    ap.add_argument("--calibration", action="append", default=[],
                    help="calibration files added to the shipped ones (repeatable)")
    ap.add_argument("--json", help="also write runs.json's document to FILE")
    args = ap.parse_args()
    try:
        runs = sources.all_runs()
        changes = parse_set(args.set)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {r["id"] for r in runs})
        if unknown:
            print(f"error: --only: no run {unknown[0]}", file=sys.stderr)
            return 2
        runs = [r for r in runs if r["id"] in args.only]
    if args.models:
        runs = [r for r in runs if r["model_published"] in args.models]
    apply_set(runs, changes)
    for sub in ("strategies", "predictions", "search"):
        os.makedirs(os.path.join(args.out_dir, sub), exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        list(pool.map(lambda r: predict_run(r, args.out_dir, args.calibration), runs))
        subset = search_subset(runs, args.search)
        if subset:
            help_text = search_flags()
            list(pool.map(lambda r: search_run(r, args.out_dir, args.calibration,
                                               args.search_time_limit, help_text), subset))
    summary = summarize(runs)
    doc = {"format": "hetplan-published-runs", "schema_version": 1, "context": context(args),
           "targets": TARGETS, "summary": summary, "runs": runs}
    for path in [os.path.join(args.out_dir, "runs.json")] + ([args.json] if args.json else []):
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    write_csv(os.path.join(args.out_dir, "runs.csv"), runs)
    print_report(runs, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
