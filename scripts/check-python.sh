#!/usr/bin/env bash
# Stop early, in one line, when the interpreter is missing or is not Python 3.11.
set -euo pipefail
python="${1:-}"
if [ -z "$python" ] || ! command -v "$python" >/dev/null 2>&1; then
  echo "Python 3.11 is needed: install it (apt-get install python3 python3-venv on Debian 12)." >&2
  exit 1
fi
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != "3.11" ]; then
  echo "Python 3.11 is needed, $python is $version: run make PYTHON=/path/to/python3.11." >&2
  exit 1
fi
