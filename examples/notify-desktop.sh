#!/bin/sh
# A qd notification command that shows what failed on the desktop: use it as
#   on_failure = ["/path/to/examples/notify-desktop.sh"]
# notify-send (libnotify) on Linux, osascript on macOS. The event's facts
# arrive in QD_* variables (and as JSON on stdin, unused here).
set -u
title="qd: $QD_EVENT: $QD_AGENT task $QD_TASK_ID"
body="$QD_SUMMARY"
if command -v notify-send >/dev/null 2>&1; then
	exec notify-send --urgency=critical --app-name=qd "$title" "$body"
elif command -v osascript >/dev/null 2>&1; then
	exec osascript -e 'on run argv' -e 'display notification (item 2 of argv) with title (item 1 of argv)' -e 'end run' "$title" "$body"
fi
echo "notify-desktop: neither notify-send nor osascript is here" >&2
exit 1
