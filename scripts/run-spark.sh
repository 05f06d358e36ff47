#!/usr/bin/env bash
# Start a local standalone Spark cluster (a master and two workers on 127.0.0.1, from the
# pyspark package's own spark-class) and then the app (scripts/run-dev.sh) with SPARK_MASTER
# pointing at it; Ctrl-C stops everything this script started. Logs go to VAR_DIR/spark/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-system-packages.sh java

PY=.venv/bin/python
if ! SPARK_HOME="$($PY -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null)"; then
  echo "pyspark is not installed: run '.venv/bin/python -m pip install -e .[spark]' first." >&2
  exit 1
fi
export SPARK_HOME
VAR="${VAR_DIR:-var}"
mkdir -p "$VAR/spark"
VAR="$(cd "$VAR" && pwd)"
SPARK_PORT="${SPARK_PORT:-7077}"
export SPARK_LOCAL_IP=127.0.0.1
# The executors run the engine's code (release_batch) in the app's own Python.
export PYSPARK_PYTHON="$PWD/$PY"
export PYSPARK_DRIVER_PYTHON="$PWD/$PY"
export SPARK_MASTER="spark://127.0.0.1:${SPARK_PORT}"

pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
  --host 127.0.0.1 --port "$SPARK_PORT" --webui-port "$((SPARK_PORT + 1))" \
  >"$VAR/spark/master.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$SPARK_PORT") 2>/dev/null && break
  sleep 0.2
done
(exec 3<>"/dev/tcp/127.0.0.1/$SPARK_PORT") 2>/dev/null \
  || { echo "The Spark master did not start: see $VAR/spark/master.log" >&2; exit 1; }
for i in 1 2; do
  mkdir -p "$VAR/spark/worker-$i"
  "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "$SPARK_MASTER" \
    --host 127.0.0.1 --cores 1 --memory "${SPARK_WORKER_MEMORY:-1g}" --webui-port 0 \
    --work-dir "$VAR/spark/worker-$i" >"$VAR/spark/worker-$i.log" 2>&1 &
  pids+=($!)
done
echo "Spark master on $SPARK_MASTER (web UI http://127.0.0.1:$((SPARK_PORT + 1))), two workers; logs in $VAR/spark/."

# run-dev.sh's processes inherit SPARK_MASTER: the worker's runs go through the cluster.
scripts/run-dev.sh &
pids+=($!)
wait -n "${pids[@]}" || true
echo "A process of the Spark cluster or the app stopped: stopping everything." >&2
exit 1
