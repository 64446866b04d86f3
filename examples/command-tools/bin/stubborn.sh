#!/bin/sh
# Ignores SIGTERM, as some programs do: staunch SIGKILLs its process group after the grace.
trap '' TERM
i=0
while :; do
  i=$((i + 1))
  echo "staunch-progress: {\"progress\": $i, \"message\": \"still going\"}" >&2
  sleep 0.5
done
