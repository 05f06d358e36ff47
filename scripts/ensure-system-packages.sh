#!/usr/bin/env bash
# Install the Debian packages the app or its tests need, when missing and when we are root.
# Usage: ensure-system-packages.sh redis-server [chromium] [postgresql] [java]
set -euo pipefail
missing=()
for package in "$@"; do
  case "$package" in
    redis-server) command -v redis-server >/dev/null 2>&1 || missing+=(redis-server) ;;
    chromium) [ -x /usr/bin/chromium ] || missing+=(chromium) ;;
    # The tests make throwaway clusters with initdb and pg_ctl; the service is never started.
    postgresql) compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql) ;;
    # Spark (pyspark's standalone cluster and driver) runs on Java 17 or 21.
    java) command -v java >/dev/null 2>&1 || missing+=(default-jre-headless) ;;
    *) echo "unknown package $package" >&2; exit 2 ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "Missing ${missing[*]}: install with 'sudo apt-get install ${missing[*]}' and run again." >&2
  exit 1
fi
echo "Installing ${missing[*]} with apt-get..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
