#!/usr/bin/env bash
# Print a Python 3.11-3.13 interpreter other than the one given (empty when there is none):
# `make test` runs the engine's tests on it too, so two supported versions are exercised.
set -uo pipefail
primary_version=$("${1:-python3}" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
for version in 3.13 3.12 3.11; do
  [ "$version" = "$primary_version" ] && continue
  for candidate in "python$version" "$HOME/.pyenv/versions/$version"*/bin/"python$version" \
      /usr/bin/"python$version" /usr/local/bin/"python$version"; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import venv' 2>/dev/null; then
      found=$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
      if [ "$found" = "$version" ]; then
        command -v "$candidate"
        exit 0
      fi
    fi
  done
done
