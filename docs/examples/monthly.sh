#!/usr/bin/env bash
# The monthly release pipeline over the Anonymizer's HTTP API, with curl and jq: upload this
# month's file as the next version of a dataset, apply a saved recipe (the request is submitted
# at once), wait for the approval, accept the terms, download and check the SHA-256 header.
#
#   ANONYMIZER_URL=https://anonymizer.example.org ANONYMIZER_TOKEN=... \
#       ./monthly.sh DATASET_ID RECIPE_ID FILE [OUT]
#
# Exit status: 0 downloaded and verified; 1 refused, rejected, failed or a wrong checksum;
# 2 timed out. See docs/pipeline.md.
set -euo pipefail

dataset=${1:?dataset id}
recipe=${2:?recipe id}
file=${3:?file to upload}
out=${4:-release.csv}
url=${ANONYMIZER_URL:-http://127.0.0.1:8000}/api/v1
token=${ANONYMIZER_TOKEN:?set ANONYMIZER_TOKEN}
poll=${POLL_SECONDS:-10}
timeout=${TIMEOUT_SECONDS:-259200}

# One call: the body on stdout; a refusal's problem+json detail on stderr, and exit 1.
api() {
  local body status
  body=$(mktemp)
  status=$(curl -sS -o "$body" -w '%{http_code}' -H "Authorization: Bearer $token" "$@")
  if [[ $status != 2* ]]; then
    echo "Refused ($status): $(jq -r '.detail // empty' "$body" 2>/dev/null)" >&2
    rm -f "$body"
    exit 1
  fi
  cat "$body"
  rm -f "$body"
}

# Poll until the jq filter $2 on GET $1 prints one of the words in $3.
wait_for() {
  local deadline=$((SECONDS + timeout)) value
  while ((SECONDS < deadline)); do
    value=$(api "$url$1" | jq -r "$2")
    if [[ " $3 " == *" $value "* ]]; then
      echo "$value"
      return 0
    fi
    sleep "$poll"
  done
  echo "Still waiting after ${timeout} s." >&2
  exit 2
}

# 1. The new version; its columns keep the previous version's roles once profiled.
version=$(api -X POST -F "file=@$file" "$url/datasets/$dataset/versions" | jq -r .id)
echo "Uploaded dataset $version"
status=$(wait_for "/datasets/$version" .status "ready failed")
if [[ $status == failed ]]; then
  api "$url/datasets/$version" | jq -r '"The file was refused: " + .error' >&2
  exit 1
fi
api "$url/datasets/$version" | jq -r '.schema_changes[] | "Schema: " + .'

# 2. The recipe's request, submitted at once (refused while a new column has no role).
request=$(api -X POST -H 'Content-Type: application/json' \
  -d "{\"dataset\": $version}" "$url/recipes/$recipe/apply" | jq -r .id)
echo "Submitted request $request"

# 3. Wait for the run, then for the officers' decision.
state=$(wait_for "/requests/$request" .state "approved failed rejected cancelled changes revoked expired")
if [[ $state != approved ]]; then
  echo "Request $request ended $state: see its page." >&2
  exit 1
fi

# 4. Accept the terms once, download, and check the SHA-256 the server states.
if [[ $(api "$url/releases/$request" | jq -r .terms_accepted) != true ]]; then
  api -X POST "$url/releases/$request/terms" >/dev/null
fi
headers=$(mktemp)
status=$(curl -sS -D "$headers" -o "$out" -w '%{http_code}' -H "Authorization: Bearer $token" \
  "$url/releases/$request/files/csv")
if [[ $status != 200 ]]; then
  echo "Download refused ($status): $(jq -r '.detail // empty' "$out" 2>/dev/null)" >&2
  rm -f "$out" "$headers"
  exit 1
fi
stated=$(tr -d '\r' <"$headers" | awk -F': ' 'tolower($1) == "x-content-sha256" {print $2}')
rm -f "$headers"
actual=$(sha256sum "$out" | cut -d' ' -f1)
if [[ $actual != "$stated" ]]; then
  echo "Checksum mismatch: got $actual, stated $stated" >&2
  rm -f "$out"
  exit 1
fi
echo "Downloaded $out (SHA-256 $stated, verified)"
