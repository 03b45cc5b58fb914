#!/bin/sh
# A qd notification command that mails what failed: use it as
#   on_failure = ["/path/to/examples/notify-mail.sh", "you@example.com"]
# The event's JSON arrives on stdin, its facts in QD_* variables. It needs a
# sendmail (from postfix, exim, msmtp, ...); without one it says so on
# stderr and exits 1, which qd records as a failed notification.
set -u
to=${1:?usage: notify-mail.sh ADDRESS}
sendmail=$(command -v sendmail || ls /usr/sbin/sendmail /usr/lib/sendmail 2>/dev/null | head -n1)
if [ -z "$sendmail" ]; then
	echo "notify-mail: no sendmail on this host; install one (postfix, msmtp-mta) or use a webhook" >&2
	exit 1
fi
{
	printf 'To: %s\n' "$to"
	printf 'Subject: qd: %s of task %s (agent %s) on %s\n' "$QD_EVENT" "$QD_TASK_ID" "$QD_AGENT" "$QD_HOST"
	printf 'Content-Type: text/plain; charset=utf-8\n\n'
	printf 'Task %s, run %s, attempt %s of %s, lane %s: %s\n' "$QD_TASK_ID" "$QD_RUN_ID" "$QD_ATTEMPT" "$QD_MAX_ATTEMPTS" "$QD_LANE" "$QD_OUTCOME"
	printf '%s\n\nqd show %s   # the whole story\n\nThe event as JSON:\n' "$QD_SUMMARY" "$QD_TASK_ID"
	cat
} | "$sendmail" -t
