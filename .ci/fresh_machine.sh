#!/usr/bin/env bash
# The README's two commands on a fresh machine (issue 49): a clone of HEAD with no ../shared beside
# it, in a venv made from a base Python whose site-packages are hidden (nothing but the standard
# library, as a new machine's), with an empty HOME (no ~/.cache/evalflow, no HF or pip cache) and no
# EVALFLOW_*, PYTHON* or model-cache variables. The commands are read from README.md's first bash
# block, so the README and this check cannot drift. Exits non-zero when either command fails.
#
#   .ci/fresh_machine.sh                  # with bubblewrap (tests/sandbox's bwrap cases run)
#   .ci/fresh_machine.sh --without-bwrap  # bubblewrap hidden: those cases must skip, not fail
#
# Needs root (a private mount namespace hides the base interpreter's packages and, with
# --without-bwrap, bwrap; nothing outside it changes), git, and PyPI reachable. PYTHON names the
# interpreter whose base installation is used (default python3; a venv's base is found).
set -euo pipefail

die() { echo "fresh_machine: $*" >&2; exit 2; }

if [ "${1:-}" = --in-namespace ]; then
  # Inside the private mount namespace: $2 work folder, $3 base interpreter, $4 with bwrap (1/0).
  work="$2" base="$3" with_bwrap="$4"
  while IFS= read -r folder; do
    mount -t tmpfs -o ro,size=1m tmpfs "$folder"
  done < <("$base" -I -c 'import os, site, sysconfig
paths = {*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
print("\n".join(sorted(p for p in paths if os.path.isdir(p))))')
  on_path() { "$base" -I -c 'import shutil, sys; sys.exit(shutil.which(sys.argv[1]) is None)' "$1"; }
  if [ "$with_bwrap" = 1 ]; then
    on_path bwrap || die "bwrap is not installed (apt-get install bubblewrap), or pass --without-bwrap"
  else
    : >"$work/not-bwrap"  # an empty file without the execute bit: a PATH lookup (shutil.which) passes it by
    while IFS= read -r found; do
      mount --bind "$work/not-bwrap" "$found"
    done < <(type -ap bwrap | xargs -r -n1 realpath | sort -u)
    ! on_path bwrap || die "bwrap is still on PATH after hiding it"
  fi
  for name in $(compgen -e); do
    case "$name" in
      EVALFLOW_* | PYTHON* | VIRTUAL_ENV | CONDA* | HF_* | HUGGINGFACE* | TRANSFORMERS_* | TORCH_* | XDG_* | \
        NLTK_DATA | LLCPP_* | PEER_* | PYTEST_* | WANDB_* | MLFLOW_* | OPENAI_* | HYDRA_*) unset "$name" ;;
    esac
  done
  export HOME="$work/home"
  export PYTEST_ADDOPTS=-rs  # the reason of each skip in the log (what a fresh machine lacks); runs the same tests
  mkdir -p "$HOME"
  "$base" -c 'import sys, importlib.util as u; sys.exit(u.find_spec("xxhash") is not None)' ||
    die "the base interpreter ($base) still sees installed packages (xxhash)"
  "$base" -m venv "$work/venv"
  # shellcheck disable=SC1091
  . "$work/venv/bin/activate"
  cd "$work/x/evalflow"
  status=0
  mapfile -t commands < <(awk '/^```bash$/ { n++; next } n == 1 && /^```$/ { exit } n == 1 && NF && !/^#/' README.md)
  [ "${#commands[@]}" = 2 ] || die "README.md's first bash block holds ${#commands[@]} commands, not the two (run, test)"
  for i in 0 1; do
    echo "fresh_machine: \$ ${commands[$i]}"
    start=$SECONDS
    bash -c "${commands[$i]}" 2>&1 | tee "$work/command$i.log" || { status=1; echo "fresh_machine: command $((i + 1)) failed"; }
    echo "fresh_machine: command $((i + 1)) took $((SECONDS - start)) s"
  done
  summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s' "$work/command1.log" | tail -1 || true)"
  echo "fresh_machine: pytest: ${summary:-no summary line (pytest did not finish)}"
  exit "$status"
fi

with_bwrap=1
case "${1:-}" in
  "") ;;
  --without-bwrap) with_bwrap=0 ;;
  *) die "usage: $0 [--without-bwrap]" ;;
esac
[ "$(id -u)" = 0 ] || die "needs root, for the private mount namespace that hides the base interpreter's packages"
repo="$(cd "$(dirname "$0")/.." && pwd)"
base="$("${PYTHON:-python3}" -c 'import sys; print(getattr(sys, "_base_executable", "") or sys.executable)')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# a clone of HEAD in <tmp>/x/evalflow: <tmp>/x/shared does not exist
git clone -q --no-checkout "$repo" "$work/x/evalflow"
git -C "$work/x/evalflow" fetch -q "$repo" "$(git -C "$repo" rev-parse HEAD)"
git -C "$work/x/evalflow" checkout -q --detach FETCH_HEAD
echo "fresh_machine: $(git -C "$work/x/evalflow" log -1 --format='%h %s' | cut -c1-100)" \
  "in $work/x/evalflow, base Python $base, bubblewrap $([ $with_bwrap = 1 ] && echo installed || echo hidden)"
start=$SECONDS
status=0
unshare --mount --propagation private bash "$work/x/evalflow/.ci/fresh_machine.sh" --in-namespace "$work" "$base" "$with_bwrap" || status=$?
echo "fresh_machine: $((SECONDS - start)) s in all, exit status $status"
exit "$status"
