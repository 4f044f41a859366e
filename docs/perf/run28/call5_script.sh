set -uo pipefail
source scripts/device_env.sh
qwen3_model
summ() { python3 -c '
import sys, json
for l in sys.stdin:
    if not l.startswith("{"): continue
    d = json.loads(l)
    s = d["samples_ts"]
    print("p%-4s d%-5s mean %7.2f  samples %s" % (d["n_prompt"], d["n_depth"], d["avg_ts"], " ".join("%.2f" % x for x in s)))'; }
unpack_llama
for round in 1 2; do
  warm_up; echo "--- round $round vkmoe $(date +%T)"; peak $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 -o jsonl 2>/dev/null | summ
  warm_up; echo "--- round $round llama-bench -fa 1 $(date +%T)"; peak /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | summ
done 2>&1 | tee "$OUT/confirm.txt"
