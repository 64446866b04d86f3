#!/bin/sh
# A long copy in 1 MiB chunks with progress. Usage: copy.sh SRC DEST
set -eu
if [ "${1:-}" = "--" ]; then shift; fi
src="$1"; dest="$2"
size=$(wc -c < "$src" | tr -d ' ')
chunks=$(( (size + 1048575) / 1048576 ))
[ "$chunks" -gt 0 ] || chunks=1
: > "$dest"
i=0
while [ "$i" -lt "$chunks" ]; do
  dd if="$src" of="$dest" bs=1048576 skip="$i" seek="$i" count=1 conv=notrunc 2>/dev/null
  i=$((i + 1))
  echo "staunch-progress: {\"progress\": $i, \"total\": $chunks, \"message\": \"$i of $chunks MiB\"}" >&2
  sleep 0.05
done
echo "copied $size bytes to $dest"
