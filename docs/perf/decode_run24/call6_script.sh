set -uo pipefail
source scripts/device_env.sh
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "rpt4|devbin" "rpt2|devbin|VKMOE_Q8X_RPT=2" "rpt1|devbin|VKMOE_Q8X_RPT=1"
