#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The style checks of docs/style.md on the C++ files a change touches:
# clang-format (.clang-format) on every one, clang-tidy (.clang-tidy) on
# its sources, over the default build's compile_commands.json (made
# readable to Debian's clang 14: -std=c++2b, GCC's precompiled headers
# left out). Files the change did not touch are not judged: older code is
# formatted as it is next changed.
#
#   scripts/lint-changed.sh [BASE]    the files changed since BASE (default:
#                                     HEAD~1, the last commit)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
build=${BUILD:-build/default}
if ! git rev-parse --verify -q "$base" >/dev/null; then
  echo "lint-changed: no $base to compare with (a clone of one commit); nothing checked"
  exit 0
fi
mapfile -t files < <(git diff --name-only --diff-filter=AM "$base" -- '*.cpp' '*.h' | sort)
if [ ${#files[@]} -eq 0 ]; then
  echo "lint-changed: no C++ file changed since $base"
  exit 0
fi
failed=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" 2>/dev/null; then
    echo "lint-changed: $f is not formatted as .clang-format says; run: clang-format -i $f"
    failed=1
  fi
done
db=$(mktemp -d "${TMPDIR:-/tmp}/cohort-lint.XXXXXX")
trap 'rm -rf "$db"' EXIT
if [ ! -f "$build/compile_commands.json" ]; then
  echo "lint-changed: no $build/compile_commands.json; build first (cmake --preset default)" >&2
  exit 1
fi
sed -E 's/-std=c\+\+23/-std=c++2b/g; s/ -include [^ ]*cmake_pch\.hxx//g; s/ -Winvalid-pch//g' \
  "$build/compile_commands.json" >"$db/compile_commands.json"
# A file of a unity build has no command of its own: its unity file does,
# and the file is checked with that command.
python3 - "$db/compile_commands.json" "$PWD" <<'PY'
import json, re, sys
path, root = sys.argv[1], sys.argv[2]
entries = json.load(open(path))
known = {e["file"] for e in entries}
added = []
for e in entries:
    if "/Unity/unity_" not in e["file"]:
        continue
    try:
        text = open(e["file"]).read()
    except OSError:
        continue
    for source in re.findall(r'#include "([^"]+\.cpp)"', text):
        if source in known:
            continue
        known.add(source)
        added.append({"directory": e["directory"], "file": source,
                      "command": e["command"].replace(e["file"], source)})
json.dump(entries + added, open(path, "w"))
PY
sources=()
for f in "${files[@]}"; do
  [[ "$f" == *.cpp ]] || continue
  if grep -q "\"file\": \"$PWD/$f\"" "$db/compile_commands.json"; then sources+=("$f"); fi
done
if [ ${#sources[@]} -gt 0 ]; then
  findings=$(clang-tidy -p "$db" --quiet "${sources[@]}" 2>/dev/null | grep -E "(error|warning): " || true)
  if [ -n "$findings" ]; then
    echo "$findings"
    echo "lint-changed: clang-tidy found the above (.clang-tidy says which checks)"
    failed=1
  fi
fi
checked=${#files[@]}
if [ "$failed" -ne 0 ]; then
  echo "lint-changed: $checked files since $base: 0 passed, 1 failed"
  exit 1
fi
echo "lint-changed: $checked files since $base (${#sources[@]} through clang-tidy): clean"
