#!/bin/sh
# Counts to STEPS, DELAY_MS apart, with progress: what `staunch probe` calls.
n="$1"; ms="$2"
i=0
while [ "$i" -lt "$n" ]; do
  i=$((i + 1))
  sleep "$(awk "BEGIN{print $ms/1000}")"
  echo "staunch-progress: {\"progress\": $i, \"total\": $n}" >&2
done
echo "counted to $n"
