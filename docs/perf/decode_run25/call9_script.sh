set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ROUNDS=2 scripts/perf_prefill_ab.sh "main|devbin"
