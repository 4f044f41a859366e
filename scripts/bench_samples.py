#!/usr/bin/env python3
"""Per-repetition figures of `vkmoe bench -o jsonl` or `llama-bench -o jsonl` (stdin):
one line per test with its mean, the mean of repetitions 2.. ("steady": the first
repetition after a model load runs at idle clocks in both programs) and every sample."""
import json
import sys

for line in sys.stdin:
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    s = d.get("samples_ts") or []
    steady = sum(s[1:]) / len(s[1:]) if len(s) > 1 else float("nan")
    print("pp%-5s tg%-4s d%-5s mean %8.2f  steady %8.2f  samples %s" %
          (d.get("n_prompt", 0), d.get("n_gen", 0), d.get("n_depth", 0), d["avg_ts"], steady,
           " ".join("%.2f" % x for x in s)))
