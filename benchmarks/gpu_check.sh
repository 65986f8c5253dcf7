#!/usr/bin/env bash
# The GPU check: one command, at most 8 minutes, at most 8 small files
# in $OUT (versions.json, stages.csv, unit_tests.txt, grpo.json, grpo_log.csv,
# throughput.csv, summary.md, check.log).
#
# On the lent GPU machine (no network), after `make gpu-bundle` here:
#   device run, carry [".gpu-bundle"], command "bash benchmarks/gpu_check.sh", timeout 480
# CPU dry run at a tiny size (tests/test_gpu_check.py):
#   OUT=/tmp/out GPU_CHECK_TINY=1 bash benchmarks/gpu_check.sh
#
# Models are the real Qwen2.5 architectures with random weights (no weights travel): the
# check measures plumbing and speed, never quality. See benchmarks/gpu_check.py.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-$PWD/.gpu-bundle}
TINY=${GPU_CHECK_TINY:-0}
WORK=${GPU_CHECK_WORK:-$(mktemp -d /tmp/qrlib-gpu-check.XXXXXX)}
exec > >(tee -a "$OUT/check.log") 2>&1
start=$(date +%s)
echo "gpu_check: $(date -u +%FT%TZ) tiny=$TINY bundle=$BUNDLE work=$WORK"

if [ -d "$BUNDLE/wheels" ] && ls "$BUNDLE"/wheels/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$BUNDLE"/wheels/*.whl || { echo "wheel install failed"; exit 3; }
  export PYTHONPATH="$WORK/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -d "$BUNDLE/data" ]; then
  export QRLIB_DATA="$BUNDLE/data"
  # the tests read ../shared/data beside the checkout (tests/conftest.py)
  [ -e ../shared/data ] || { mkdir -p ../shared && ln -s "$BUNDLE/data" ../shared/data; }
fi
[ -f "$BUNDLE/commit.txt" ] && export QRLIB_COMMIT=$(cat "$BUNDLE/commit.txt")
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 QRLIB_ROLLOUTS=hf PYTHONUNBUFFERED=1 \
  TOKENIZERS_PARALLELISM=false QRLIB_CACHE="$WORK/cache"
tiny=(); [ "$TINY" = 1 ] && tiny=(--tiny)
common=(--out "$OUT" --bundle "$BUNDLE" --work "$WORK" "${tiny[@]}")

# stage NAME SECONDS CMD...: run CMD under a time limit, append NAME,exit,seconds
# GPU_CHECK_STAGES="grpo throughput" runs only those (a rerun inside a short lease)
STAGES=" ${GPU_CHECK_STAGES:-versions unit_tests grpo throughput} "
stage() {
  local name=$1 limit=$2 s rc
  shift 2
  [[ "$STAGES" == *" $name "* ]] || return 0
  s=$(date +%s)
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  echo "$name,$rc,$(( $(date +%s) - s ))" >> "$OUT/stages.csv"
}

stage versions 60 $PY benchmarks/gpu_check.py versions "${common[@]}"
# unit tests of the trainer, policy, generation without an engine, rewards and retrieval;
# on the GPU machine they run with CUDA visible (tests that need offline weights fail
# and are counted apart)
TESTS=${GPU_CHECK_TESTS:-tests/test_train.py tests/test_policy.py tests/test_rewards.py tests/test_retrieval.py tests/test_env.py tests/test_sharedprefix.py tests/test_parsing.py}
stage unit_tests "${GPU_CHECK_TEST_LIMIT:-75}" $PY -m pytest -q -p no:cacheprovider \
  -o addopts="" -m "not slow" --timeout=60 --junitxml "$WORK/junit.xml" $TESTS
[[ "$STAGES" == *" unit_tests "* ]] && $PY benchmarks/gpu_check.py junit --xml "$WORK/junit.xml" "${common[@]}"
stage grpo "${GPU_CHECK_GRPO_LIMIT:-200}" $PY benchmarks/gpu_check.py grpo "${common[@]}"
stage throughput "${GPU_CHECK_TP_LIMIT:-180}" $PY benchmarks/gpu_check.py throughput "${common[@]}"
echo "total,0,$(( $(date +%s) - start ))" >> "$OUT/stages.csv"
$PY benchmarks/gpu_check.py report "${common[@]}"
