#!/usr/bin/env bash
# Stop early, in one line, when the interpreter is missing or is not Python 3.11 to 3.13.
set -euo pipefail
python="${1:-}"
if [ -z "$python" ] || ! command -v "$python" >/dev/null 2>&1; then
  echo "Python 3.11, 3.12 or 3.13 is needed: install it (apt-get install python3 python3-venv on Debian 12)." >&2
  exit 1
fi
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case "$version" in
  3.11|3.12|3.13) ;;
  *)
    echo "Python 3.11, 3.12 or 3.13 is needed, $python is $version: run make PYTHON=/path/to/python3.12." >&2
    exit 1
    ;;
esac
