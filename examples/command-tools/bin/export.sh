#!/bin/sh
# A paginated export: fetches `pages` pages (simulated), appends each to the output file and
# reports progress after each page. Prints a JSON summary on stdout (result = "json").
# Usage: export.sh PAGES OUT_FILE
set -eu
pages="$1"; out="$2"
: > "$out"
page=1
while [ "$page" -le "$pages" ]; do
  # A real export would call an API here, e.g. curl -fsS "$API/orders?page=$page".
  sleep 0.2
  printf 'order-%s-1\norder-%s-2\n' "$page" "$page" >> "$out"
  echo "staunch-progress: {\"progress\": $page, \"total\": $pages, \"message\": \"page $page of $pages\"}" >&2
  page=$((page + 1))
done
printf '{"pages": %s, "rows": %s, "file": "%s"}\n' "$pages" "$(wc -l < "$out" | tr -d ' ')" "$out"
