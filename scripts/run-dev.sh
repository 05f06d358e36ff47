#!/usr/bin/env bash
# Start Redis (unless one already answers), a Celery worker and the web server; Ctrl-C stops
# everything this script started. A worker that dies (killed, out of memory) is started again
# after a short back-off; Redis and the web server stay up. If Redis or the web server stops,
# everything stops.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-system-packages.sh redis-server

PY=.venv/bin/python
export DEBUG="${DEBUG:-1}"
# Logs and Redis's append-only file go to VAR_DIR (the settings keep the database there too).
VAR="${VAR_DIR:-var}"
mkdir -p "$VAR"
VAR="$(cd "$VAR" && pwd)"
REDIS_PORT="${REDIS_PORT:-6379}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:${REDIS_PORT}/0}"
PORT="${PORT:-8000}"
# Links in decision e-mails point at this server (they are printed in the worker's log).
export SITE_URL="${SITE_URL:-http://127.0.0.1:${PORT}}"

redis_pid=""
web_pid=""
worker_pid=""
cleanup() {
  trap - INT TERM EXIT
  # Stop the children first: the terminal (or a pipe such as tee) may already be gone.
  trap '' PIPE
  if [ -n "$worker_pid" ]; then kill -- "-$worker_pid" 2>/dev/null || true; fi
  for pid in $web_pid $redis_pid; do kill "$pid" 2>/dev/null || true; done
  echo "Stopping..." 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "Using the Redis already answering on port $REDIS_PORT."
else
  # Append-only file: queued tasks survive a Redis restart.
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly yes \
    --appendfsync everysec --dir "$VAR" >"$VAR/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$REDIS_PORT" ping >/dev/null || { echo "redis-server did not start: see $VAR/redis.log" >&2; exit 1; }
  echo "Redis started on port $REDIS_PORT (log: $VAR/redis.log)."
fi

$PY manage.py migrate --noinput
$PY manage.py check --deploy --fail-level CRITICAL >/dev/null

# -B: the worker also runs Celery beat, whose sweeper finishes what dead workers left behind.
# In a process group of its own: when its main process is killed, its pool processes and beat
# (left orphaned) are stopped with it.
start_worker() {
  setsid .venv/bin/celery -A anonymizer_site worker -B --loglevel=INFO --concurrency=2 \
    >>"$VAR/worker.log" 2>&1 &
  worker_pid=$!
  worker_started=$SECONDS
  echo "Celery worker started (pid $worker_pid, log: $VAR/worker.log)."
}
: >"$VAR/worker.log"
start_worker

$PY manage.py runserver "127.0.0.1:${PORT}" --noreload &
web_pid=$!
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

# A worker that ends is started again, after 1 s, then 2, 4 ... at most 30 s while it keeps
# dying young (the back-off starts over once one has run a minute). Anything else ending stops
# everything.
backoff=1
while true; do
  ended=""
  status=0
  wait -n -p ended || status=$?
  if [ -n "$ended" ] && [ "$ended" = "$worker_pid" ]; then
    kill -9 -- "-$ended" 2>/dev/null || true # what it left behind: pool processes, beat
    if [ $((SECONDS - worker_started)) -ge 60 ]; then backoff=1; fi
    echo "$(date '+%H:%M:%S') The Celery worker (pid $ended) stopped with status $status; starting another in ${backoff} s."
    sleep "$backoff"
    backoff=$((backoff * 2 > 30 ? 30 : backoff * 2))
    start_worker
  else
    echo "$(date '+%H:%M:%S') ${ended:+Process $ended }stopped with status $status: stopping everything." >&2
    exit 1
  fi
done
