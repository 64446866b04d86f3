#!/bin/sh
# Fails half the time (a flaky network call, say). It changes nothing, so calling it again is
# safe: the tool is declared retry_safe.
n=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
if [ $((n % 2)) -eq 0 ]; then
  echo "error: upstream timed out (try again)" >&2
  exit 75
fi
echo "fetched the status: all green"
