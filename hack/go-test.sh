#!/usr/bin/env bash
# go test, with every failure repeated at the end. The node suites run for
# many minutes and later tests log a lot (the controller's expected errors
# while the API server is away), so a failure's message would otherwise
# scroll out of the part of the log a reader sees first.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT

go test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
	echo
	echo "=== failures (repeated from above: each failed test and its test-file lines)"
	awk '
		/^[ \t]*--- FAIL/           { print; failing = 1; next }
		/^(=== |--- PASS|PASS$|FAIL|ok )/ { failing = 0 }
		/^FAIL[ \t]/ || /^panic:/   { print }
		failing && /_test\.go:[0-9]+: / { print }
	' "$log"
fi
exit "$status"
