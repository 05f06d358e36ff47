#!/usr/bin/env bash
# Start Redis (unless one already answers), a Celery worker and the web server; Ctrl-C stops
# everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-system-packages.sh redis-server

PY=.venv/bin/python
export DEBUG="${DEBUG:-1}"
mkdir -p var
REDIS_PORT="${REDIS_PORT:-6379}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:${REDIS_PORT}/0}"
PORT="${PORT:-8000}"
# Links in decision e-mails point at this server (they are printed in var/worker.log).
export SITE_URL="${SITE_URL:-http://127.0.0.1:${PORT}}"

pids=()
cleanup() {
  trap - INT TERM EXIT
  # Stop the children first: the terminal (or a pipe such as tee) may already be gone.
  trap '' PIPE
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  echo "Stopping..." 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "Using the Redis already answering on port $REDIS_PORT."
else
  # Append-only file: queued tasks survive a Redis restart.
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly yes \
    --appendfsync everysec --dir "$PWD/var" >var/redis.log 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$REDIS_PORT" ping >/dev/null || { echo "redis-server did not start: see var/redis.log" >&2; exit 1; }
  echo "Redis started on port $REDIS_PORT (log: var/redis.log)."
fi

$PY manage.py migrate --noinput
$PY manage.py check --deploy --fail-level CRITICAL >/dev/null

# -B: the worker also runs Celery beat, whose sweeper finishes what dead workers left behind.
.venv/bin/celery -A anonymizer_site worker -B --loglevel=INFO --concurrency=2 >var/worker.log 2>&1 &
pids+=($!)
echo "Celery worker started (log: var/worker.log)."

$PY manage.py runserver "127.0.0.1:${PORT}" --noreload &
pids+=($!)
sleep 1
echo
if [ "${DEMO_RELEASE:-0}" = "1" ]; then
  # Also an approved Adult release naming "recipient" (runs in this process; a few seconds).
  $PY manage.py seed_demo --with-release
else
  $PY manage.py seed_demo
fi
echo
echo "Anonymizer is running on http://127.0.0.1:${PORT}  (Ctrl-C stops it)"
# Stop everything as soon as one of the processes ends.
wait -n
