#!/usr/bin/env bash
# Contributor check: the committed tree stands alone. Clones HEAD into an empty temporary folder, hides every
# folder given as an argument (reference copies a developer keeps outside the repository: a private mount
# namespace with an empty tmpfs over each, when `unshare` is allowed), and runs the README's test command there. Fails unless pytest reports
# 0 failed, 0 errors and 0 skipped.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/mmvet-grader"
cd "$work/mmvet-grader"
hide=""
for d in "$@"; do [ -d "$d" ] && hide="$hide $(cd "$d" && pwd)"; done
run='rc=0; python -m pytest -q -rfEs -p no:cacheprovider -n auto --dist loadfile -m "not serial" || rc=$?; python -m pytest -q -rfEs -p no:cacheprovider -m serial || rc=$?; exit $rc'
if [ -n "$hide" ] && unshare -m true 2>/dev/null; then
  cmd="for d in$hide; do mount -t tmpfs none \"\$d\"; done; $run"
  out="$(unshare -m bash -c "$cmd" 2>&1 | tee /dev/stderr)"
else
  [ -n "$hide" ] && echo "warning: could not hide$hide (unshare not permitted); the clone is elsewhere anyway" >&2
  out="$(bash -c "$run" 2>&1 | tee /dev/stderr)"
fi
# the summary lines of both runs (the parallel one, then the serial one)
summary="$(printf '%s\n' "$out" | grep -E '(passed|failed|error).* in [0-9.]+s' | tr '\n' ' ')"
if printf '%s' "$summary" | grep -Eq 'failed|error|skipped' || [ "$(printf '%s' "$summary" | grep -o passed | wc -l)" -lt 2 ]; then
  echo "fresh clone: NOT clean: $summary" >&2; exit 1
fi
echo "fresh clone: clean: $summary"
