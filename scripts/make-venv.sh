#!/usr/bin/env bash
# Create a virtualenv with the given Python (3.11 to 3.13). Debian ships venv support separately
# (python3-venv); install it with apt-get when it is missing and we are root.
set -euo pipefail
python="$1"
venv="$2"
[ -x "$venv/bin/python" ] && exit 0
if ! "$python" -m venv "$venv" 2>/dev/null; then
  rm -rf "$venv"
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing python3-venv with apt-get..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq python3-venv >/dev/null
    "$python" -m venv "$venv"
  else
    echo "Python's venv module is missing: install it ('sudo apt-get install python3-venv') and run again." >&2
    exit 1
  fi
fi
