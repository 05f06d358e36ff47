#!/bin/sh
# Runs SafePub in ARX 3.9.2 (EDDifferentialPrivacy): bench/arx/run-safepub.sh ARGS...
# (see SafePubHarness.java for the arguments; bench/safepub_compare.py records the cases).
# Uses the ARX build of bench/arx/run.sh (same ARX_REPO, ARX_CACHE and ARX_JAVA_OPTS); the first
# run builds it.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${ARX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anonymizer/arx-3.9.2}
JAR=$CACHE/arx-core.jar
LIBS=$CACHE/lib
CLASSES=$CACHE/safepub-harness

if [ ! -f "$JAR" ]; then
    # run.sh builds ARX's core library, then its own harness complains of the missing data.
    "$HERE/run.sh" --derived-k yes --sample-size 1 --ks 1 --significances 0.05 \
        --population-sizes 1 > /dev/null
fi
CP="$JAR:$(find "$LIBS" -name '*.jar' | sort | tr '\n' ':')"
if [ ! -f "$CLASSES/SafePubHarness.class" ] || [ "$HERE/SafePubHarness.java" -nt "$CLASSES/SafePubHarness.class" ]; then
    mkdir -p "$CLASSES"
    javac -nowarn -encoding UTF-8 -d "$CLASSES" -cp "$CP" "$HERE/SafePubHarness.java"
fi
# shellcheck disable=SC2086
exec java ${ARX_JAVA_OPTS:--Xmx2g} -cp "$CLASSES:$CP" SafePubHarness "$@"
