#!/bin/sh
# Runs a cross-check script with the test venv's Python; exit 77 (ctest: skipped)
# with a message when the venv is missing. Usage: run_python.sh PYTHON SCRIPT ARGS...
py=$1; shift
if [ ! -x "$py" ]; then
  echo "SKIPPED: no test venv at $py (scripts/setup creates it)"
  exit 77
fi
exec "$py" "$@"
