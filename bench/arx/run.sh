#!/bin/sh
# Runs ARX 3.9.2 (built from its public source) on a CSV file: bench/arx/run.sh HARNESS-ARGS...
# (see Harness.java for the arguments; bench/arx_compare.py runs the recorded cases).
#
# The first run builds ARX's core library with javac (Java 17) from the v3.9.2 tag of
# https://github.com/arx-deidentifier/arx and the jars in its lib/ant folder, without network
# when ARX_REPO names a local clone (a bare one will do). The GUI is left out; a clone whose
# PDFBox or Hadoop jars are missing still builds (see the stubs below). The jar and the
# compiled harness go to ARX_CACHE, outside the repository.
#
#   ARX_REPO   git directory of ARX's source (default: ARX_CACHE/arx.git, cloned when missing)
#   ARX_CACHE  build directory (default: ${XDG_CACHE_HOME:-~/.cache}/anonymizer/arx-3.9.2)
#   ARX_JAVA_OPTS  options for the JVM (default: -Xmx2g)
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
TAG=v3.9.2
CACHE=${ARX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anonymizer/arx-3.9.2}
REPO=${ARX_REPO:-$CACHE/arx.git}
JAR=$CACHE/arx-core.jar
LIBS=$CACHE/lib
CLASSES=$CACHE/harness

mkdir -p "$CACHE"

if [ ! -f "$JAR" ]; then
    if [ ! -e "$REPO" ]; then
        echo "Cloning ARX's source into $REPO" >&2
        git clone --bare --quiet https://github.com/arx-deidentifier/arx.git "$REPO"
    fi
    echo "Building ARX $TAG's core library into $CACHE (once; a minute or two)" >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    git -C "$REPO" archive "$TAG" src/main | tar -x -C "$work"
    rm -rf "$LIBS" && mkdir -p "$LIBS"
    # The libraries ARX's core compiles against; the GUI's (SWT, Eclipse) are not needed, and a
    # jar missing from a partial clone is skipped (javac names it if it was needed after all).
    git -C "$REPO" ls-tree -r --name-only "$TAG" lib/ant | grep '\.jar$' \
        | grep -v -e /eclipse/ -e /swt -e /jhc/ -e /junit/ | while read -r path; do
            if git -C "$REPO" cat-file -e "$TAG:$path" 2>/dev/null; then
                git -C "$REPO" cat-file blob "$TAG:$path" > "$LIBS/$(basename "$path")"
            else
                echo "  (skipping $path: not in $REPO)" >&2
            fi
        done
    find "$work/src/main" -name '*.java' > "$work/sources.txt"
    # Without PDFBox's jar the PDF certificate is left out, and the type its elements name
    # is declared by a stub; without Hadoop's, Mahout's Writable is (bench/arx/stubs/).
    if [ ! -f "$LIBS/pdfbox-app-2.0.1.jar" ]; then
        grep -v -e /certificate/ARXCertificate.java -e /certificate/resources/Watermark.java \
            "$work/sources.txt" > "$work/kept.txt" && mv "$work/kept.txt" "$work/sources.txt"
        find "$HERE/stubs/pdfbox" -name '*.java' >> "$work/sources.txt"
    fi
    if [ ! -f "$LIBS/hadoop-core-1.2.1.jar" ]; then
        find "$HERE/stubs/hadoop" -name '*.java' >> "$work/sources.txt"
    fi
    mkdir -p "$work/classes"
    if ! javac -nowarn -encoding UTF-8 -J-Xmx1g -d "$work/classes" \
        -cp "$(find "$LIBS" -name '*.jar' | sort | tr '\n' ':')" @"$work/sources.txt" \
        > "$work/javac.log" 2>&1; then
        grep -v '^Note:' "$work/javac.log" >&2
        echo "Building ARX failed." >&2
        exit 1
    fi
    # ARX's resources (e.g. the risk model's tables) travel with its classes.
    (cd "$work/src/main" && find . -type f ! -name '*.java' -exec cp --parents {} "$work/classes" \;)
    jar cf "$JAR.tmp" -C "$work/classes" .
    mv "$JAR.tmp" "$JAR"
fi

CP="$JAR:$(find "$LIBS" -name '*.jar' | sort | tr '\n' ':')"
if [ ! -f "$CLASSES/Harness.class" ] || [ "$HERE/Harness.java" -nt "$CLASSES/Harness.class" ]; then
    mkdir -p "$CLASSES"
    javac -nowarn -encoding UTF-8 -d "$CLASSES" -cp "$CP" "$HERE/Harness.java"
fi
# shellcheck disable=SC2086
exec java ${ARX_JAVA_OPTS:--Xmx2g} -cp "$CLASSES:$CP" Harness "$@"
