#!/usr/bin/env bash
# CI-only: confseq 0.0.11 (Waudby-Smith & Ramdas' reference code) in a side venv, for the
# cross-check of evalflow's anytime-valid interval (tests/insight/test_sequential.py). Its betting
# module is pure Python but the package does not install on this Python: its build compiles C++
# boundaries with pybind11 2.6 (no Python 3.11) and Boost, and it uses np.float_ (gone in NumPy 2).
# So the venv gets NumPy 1.26 and the betting module's imports, and the sdist's pure-Python
# modules are copied in; the compiled boundaries (unused by betting_cs) are left out.
set -euo pipefail
venv="${CONFSEQ_VENV:-$HOME/.cache/evalflow-confseq/venv}"
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import confseq.betting' 2>/dev/null && exit 0
python -m venv --clear "$venv"
"$venv/bin/pip" install -q "numpy<2" scipy matplotlib multiprocess
sdist="$(mktemp -d)"
"$venv/bin/pip" download -q --no-deps -d "$sdist" "confseq==0.0.11"
tar xzf "$sdist"/confseq-0.0.11.tar.gz -C "$sdist"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$site/confseq"
cp "$sdist"/confseq-0.0.11/src/confseq/*.py "$site/confseq/"
"$venv/bin/python" -c 'import confseq.betting'
