# qd configuration. Every setting is shown here with its default.
#
# qd looks for its file in this order: $QD_CONFIG, ./qd.hcl,
# $XDG_CONFIG_HOME/qd/qd.hcl (~/.config/qd/qd.hcl), /etc/qd/qd.hcl.
# `qd run --check` validates a file and exits. Every problem is reported at
# once as "file:line: ...", and nothing starts until the file is valid.
#
# Durations have a unit: "500ms", "30s", "5m", "2h", "2d" (days, which
# come first: "1d12h"). A number without a unit (10 or "10") is a number of
# seconds, as on the command line. Zero and negative durations are errors.
# Relative paths are relative to the directory of this file; ~ and ~/ in a
# path (and at the start of a command's program) stand for the home
# directory of the user qd runs as.

# PostgreSQL URL of the queue. --db and $QD_DATABASE_URL override it; with
# neither and no database here, qd uses a private PostgreSQL cluster of its
# own in state_dir/pg, made and started on first use, on a unix socket only
# (docs/database.md; a daemon run as a service starts it again if it dies
# and stops it cleanly when the service stops). Add
# ?schema=NAME to keep the queue in another schema than "qd", and
# pooler=transaction behind a transaction-mode pooler such as PgBouncer
# (docs/database.md, "Behind a pooler"). Prefer a
# password in ~/.pgpass (or $PGPASSFILE) over one in this file; qd never
# prints it. Default: unset, the private cluster.
# database = "postgres://qd@localhost:5432/qd?sslmode=disable"

# Name of this supervisor, recorded as the owner of its runs. Two daemons
# sharing a database need different names: a daemon whose name another
# living daemon holds refuses to start and names it (host, pid, state_dir).
# Default: the host name, so two daemons on one host must set it.
# name = "build-host-1"

# Status socket, for `qd status`. Unix socket paths are limited to 107
# bytes on Linux, 103 on macOS. Default: /run/qd/qd.sock for root; else
# $XDG_RUNTIME_DIR/qd/qd.sock; else /run/qd/qd.sock when run by systemd or
# when that socket is this user's own; else $TMPDIR/qd-UID/qd.sock.
# socket = "/run/qd/qd.sock"

# Run logs, the records of running children, and the private PostgreSQL
# cluster (pg/) when no database is set. Default: $STATE_DIRECTORY
# (set by systemd's StateDirectory=); else /var/lib/qd for root; else
# $XDG_STATE_HOME/qd (~/.local/state/qd).
# state_dir = "/var/lib/qd"

# trace, debug, info, warn or error. Default: "info".
log_level = "info"

# "text" for people, "json" for log collectors. Default: "text".
log_format = "text"

# On SIGTERM or SIGINT, qd stops claiming and sends SIGTERM to every child's
# process group at once; this is how long the children then have to exit
# before SIGKILL. The runs of children that did not exit 0 are abandoned
# without counting the attempt. A second signal skips the wait.
# Default: "30s".
shutdown_grace = "30s"

# Delete finished tasks and their runs this long after they finished.
# Default: unset, keep them forever.
# retention = "720h"

# Whom to tell when something fails: a command, run with the facts as JSON
# on stdin and in QD_* variables (QD_EVENT, QD_TASK_ID, QD_RUN_ID, QD_AGENT,
# QD_LANE, QD_ATTEMPT, QD_OUTCOME, QD_EXIT_CODE, QD_SIGNAL, QD_SUMMARY,
# QD_HOST, QD_NOTIFICATION_ID, QD_TRY), and/or a webhook that gets the same
# JSON in a POST. The default of every agent; an agent's own setting
# replaces it. Each event is recorded in the database (qd.notifications,
# qd show) before it is sent, and told once, however many daemons share
# the queue. A webhook is shown and recorded as its scheme and host and a
# fingerprint: its password, path and query stay in this file.
# examples/notify-mail.sh and examples/notify-desktop.sh are ready to use.
# on_failure = ["/usr/local/bin/qd-notify", "--to", "me@example.com"]
# webhook    = "https://hooks.example.com/qd"
# One try of a target (a command or a webhook) gets this long; each target
# is tried on its own. Default: 30s for a command, 10s for a webhook.
# notify_timeout = "10s"
# A failed try is tried again after this, then twice as long each time,
# up to an hour. Default: "30s".
# notify_backoff = "30s"
# A notification not sent this long after it was recorded is failed for
# good (qd show says so). Default: "24h".
# notify_give_up = "24h"
# Events: "failed" (a task failed for good, its attempts used up),
# "timeout" and "stall" (a run stopped by timeout or stall_timeout),
# "lease_lost" (a run's lease was lost or could not be renewed). Default:
# all four.
# notify_on = ["failed", "timeout", "stall", "lease_lost"]

# One block per agent: a program qd runs for each task of that agent it
# claims. The name (the block's label) is what `qd enqueue --agent` names and
# must match ^[a-z0-9][a-z0-9._-]{0,62}$.
agent "hello" {
  # Required. The program and its arguments, never run through a shell. A
  # bare name is looked up in $PATH; a relative path is relative to `dir`
  # when it is set, else to this file's directory. It must exist and be
  # executable, and a script's #! interpreter must exist too. The
  # repository's examples/hello.sh does what this line does; the line runs
  # wherever this file is copied.
  command = ["/bin/sh", "-c", "payload=$(cat); echo \"task $QD_TASK_ID, attempt $QD_ATTEMPT: $payload\"; echo said hello"]

  # Working directory of the child. It must exist. Default: qd's own.
  # dir = "/srv/hello"

  # Added to the child's environment, which otherwise holds only PATH, HOME,
  # USER, LANG, TZ and the like, and the QD_ variables of the run. qd's
  # database URL never reaches agents. LD_PRELOAD, LD_LIBRARY_PATH, DYLD_*,
  # NOTIFY_SOCKET and QD_* may not be set here. Each KEY=VALUE is at most
  # 131071 bytes, and the command and env at most 1 MiB in all, as the
  # kernel starts programs. Default: {}.
  env = {
    GREETING = "hello"
  }

  # Required, unless timetable is set. When to look for work: five cron
  # fields (minute hour day-of-month month day-of-week, in local time), a
  # descriptor (@hourly, @daily, @weekly, @monthly, @yearly) or "@every 30s"
  # (any duration of whole seconds, at least 1s), with an optional
  # "CRON_TZ=Area/City " prefix. On each tick qd claims tasks of this agent
  # until `parallel` children run or none is left; a tick with no task
  # queued does nothing. So this is when qd looks for the agent's work, not
  # a timetable of runs. A schedule that never fires (30 February) is an
  # error.
  schedule = "@every 10s"

  # Run the agent on a timetable, in one line: a task for it at each tick
  # (same syntax as schedule), as a periodic block of the agent's name
  # would enqueue it with its defaults (in the agent's first lane, payload
  # {}, overlap "skip"). Without schedule, the agent wakes on the same
  # timetable. For another payload or lane, use a periodic block (below).
  # Default: unset.
  # timetable = "0 3 * * *"

  # Lanes this agent takes tasks from. Default: [] (any lane).
  lanes = ["default"]

  # Children of this agent running at once, 1 to 100000. Default: 1.
  parallel = 1

  # How long a claimed task belongs to this daemon without a heartbeat. A
  # daemon that cannot reach the database kills its child before the lease
  # runs out, so the task is never run twice at once. At least "1s".
  # Default: "5m".
  lease = "5m"

  # How often qd extends the lease while the child runs. Must be less than
  # half the lease, and at least "100ms". Default: a third of the lease.
  heartbeat = "100s"

  # Kill a child that runs longer than this (SIGTERM to its process group,
  # SIGKILL after kill_grace); the run is abandoned. Default: unset, none.
  timeout = "1h"

  # Kill a child that writes no output for this long; `qd heartbeat
  # $QD_RUN_ID` also counts as progress. Default: unset, none.
  # stall_timeout = "10m"

  # "separate": stdout and stderr each have a pipe, so `qd logs --stderr`
  # and a failure's summary can tell them apart; the kernel keeps no order
  # between two pipes, and lines written back to back to both may be logged
  # the other way round. "merged": one pipe for both, as on a terminal: the
  # log keeps the order they were written in, and all of it is stdout.
  # Default: "separate".
  # output = "merged"

  # Between SIGTERM and SIGKILL, on timeout, stall or cancel. On shutdown
  # the children have shutdown_grace instead. Default: "10s".
  kill_grace = "10s"

  # Delay before the retry of a failed attempt, doubled after each further
  # failure (capped at 1h, with jitter). Default: "10s".
  retry_backoff = "10s"

  # Attempts for the tasks this agent's periodic blocks enqueue.
  # `qd enqueue` sets its own. Default: 3.
  max_attempts = 3

  # A child told "try later" (a 429) exits 75 (EX_TEMPFAIL), after
  # `qd defer 30s` to say when: its task is queued again then, or after
  # retry_backoff without `qd defer`, and the attempt is not counted. A
  # task deferred this many times fails its next deferral instead, as a
  # failed exit would. Default: 100.
  # max_deferrals = 100

  # Rate limits (limit blocks below) each run takes one unit of at its
  # claim, in the claim's transaction: across every daemon and `qd claim`
  # script, no window of a limit's period starts more runs than its rate
  # plus burst (docs/limits.md). A run spends more with `qd spend NAME N`.
  # Default: none.
  # limits = ["llm-api"]

  # The budget block (below) its runs spend from: a run reports what it
  # spent with `qd usage 0.12`, and once the period's total reaches the
  # budget's max no run of its agents starts until the next period (runs
  # in flight finish). Default: none.
  # budget = "llm-daily"

  # Bounds on each run's cgroup: memory (bytes, or with K, M, G or T,
  # powers of 1024; memory.max) and CPUs (cpu.max; 0.5 is half of one).
  # Only where qd gives runs cgroups and the controller is enabled for
  # them (see `qd status` and docs/service.md): elsewhere qd refuses to
  # start, naming the agent. `qd run --check` checks this host (run by a
  # user who cannot create cgroups, it only warns: the daemon's service may
  # delegate it one).
  # Default: unset, no bound.
  # memory_max = "2G"
  # cpu_max    = 1.5

  # Who its runs run as, for a daemon that is root: the child gets that
  # user's uid, gid, supplementary groups and HOME (group, when set,
  # replaces the primary group). The user must exist; a daemon that is
  # not root may name only its own user. Default: the daemon's user.
  # user  = "nobody"
  # group = "nogroup"

  # "fresh": each run works in a new empty directory,
  # state_dir/work/RUN_ID ($QD_WORKDIR), owned by its user and removed when
  # it ends, unless keep_workdir is "failed" (kept when the run did not
  # complete; qd show names it) or "always". Not with dir. Default: unset,
  # the working directory is dir's.
  # workdir      = "fresh"
  # keep_workdir = "failed"

  # Keep each run, and all it starts, in a box (docs/sandbox.md): it reads
  # only the system directories (/usr, /bin, /sbin, /lib*, /etc), its
  # program, qd and read; writes only its workdir, write and a private
  # /tmp; sees nothing else of the host (not state_dir, not other runs, not
  # homes), gains no privilege, and reaches the daemon through $QD_SOCKET.
  # network: "host" (default), "none" (a loopback of its own only), or the
  # TCP ports it may connect to. Paths must exist. Linux only: refused
  # where the kernel lacks what it needs (Landlock, namespaces).
  # sandbox {
  #   read    = ["/srv/repos"]
  #   write   = ["/srv/repos/out"]
  #   network = ["443", "5432"]
  # }
}

agent "progress" {
  # Works STEPS seconds, a line a second (examples/progress.sh also proves
  # progress with qd heartbeat).
  command  = ["/bin/sh", "-c", "i=0; while [ $i -lt $STEPS ]; do i=$((i+1)); echo \"step $i of $STEPS\"; sleep 1; done"]
  schedule = "CRON_TZ=UTC */5 * * * *"
  lanes    = ["reports", "nightly"]
  parallel = 2
  lease    = "1m"
  env = {
    STEPS = "3"
  }
  stall_timeout = "30s"

  # This agent's own notifications, replacing the top-level ones (each of
  # on_failure, webhook and notify_on separately).
  # on_failure = ["/bin/sh", "-c", "cat >> /tmp/qd-failures.jsonl"]
  # webhook    = "https://hooks.example.com/qd/progress"
  # notify_on  = ["failed"]
}

# Enqueue a task on a schedule, exactly once per tick even when several
# daemons share the database: this is what runs an agent on a timetable.
# The daemon that enqueued the task claims it at once when it runs the
# agent; a daemon elsewhere, at the agent's next tick. The last tick is kept
# in the database.
periodic "hourly-hello" {
  # Required. Same forms as an agent's schedule.
  schedule = "@hourly"

  # Required. An agent, usually one defined in this file; one that is not is
  # a warning (its tasks wait for a daemon elsewhere that runs it).
  agent = "hello"

  # Lane of the task; one of the agent's lanes when it names them.
  # Default: "default".
  lane = "default"

  # JSON text given to the agent on stdin, at most 1 MiB, without \u0000
  # (which PostgreSQL cannot store). Default: "{}".
  payload = "{\"greeting\": \"hourly\"}"

  # Among eligible tasks, lower numbers run first (as with
  # `qd enqueue --priority`); negatives are allowed, within 32 bits
  # (-2147483648 to 2147483647). Default: 0.
  priority = 0

  # Ticks missed while no daemon ran: "skip" logs them and enqueues nothing
  # (the default); "once" enqueues one task for all of them, like systemd's
  # Persistent=true.
  catch_up = "skip"

  # A tick while a task this block enqueued is still queued or running (its
  # lane paused, claims held, its agent slow): "skip" enqueues nothing, the
  # task that waits is the tick's (the default: no pile-up); "queue"
  # enqueues another all the same.
  overlap = "skip"

  # Attempts of each task. Default: the agent's max_attempts.
  # max_attempts = 3
}

# A lane's settings, applied at start and on every reload (SIGHUP). A lane
# named here gets these settings whatever `qd lane set` said before; a lane
# not named here is left as it is. Lanes need no block: one is created with
# limit 1 when its first task is enqueued.
lane "default" {
  # Live runs the lane allows at once, across every daemon. Default: leave
  # the lane's limit as it is (1 for a new lane).
  max_running = 1

  # true stops claims from the lane (its queue is kept); false resumes it.
  # Default: leave as it is.
  # paused = false
}

# A rate limit shared by every daemon and `qd claim --limit` script of the
# queue (docs/limits.md), written to the queue at start and on every reload,
# as lane blocks are; `qd limit set` changes it live. Agents name it in
# their limits.
# limit "llm-api" {
#   # At most this many units in any window of the period: UNITS/PERIOD.
#   rate = "60/1m"
#
#   # Units that may be taken beyond the steady rate, at once after a quiet
#   # spell. Default: 0.
#   burst = 10
# }

# A budget: what the runs of the agents that name it may spend in each
# calendar period, in the unit they report (dollars, tokens, anything),
# across every daemon (docs/limits.md). Written to the queue at start and
# on every reload; `qd budget set` changes it live.
# budget "llm-daily" {
#   # The most the period's runs may report (qd usage) before no more start.
#   max = 5.00
#
#   # 1h, 1d, 1w (from Monday) or 1mo: calendar periods in timezone.
#   period = "1d"
#
#   # Default: "UTC".
#   timezone = "UTC"
# }

# The web dashboard (docs/ui.md), served by the daemon itself; `qd ui` serves
# the same pages as a command of its own. No block: no dashboard. Changes
# take effect at restart.
# ui {
#   # host:port to listen on. An address beyond loopback needs a token.
#   # Default: "127.0.0.1:7780".
#   listen = "127.0.0.1:7780"
#
#   # true hides and refuses every action (enqueue, cancel, retry, pause).
#   # Default: false.
#   read_only = false
#
#   # Asked of every request: as the password of basic auth (any user name),
#   # as "Authorization: Bearer TOKEN", or once as ?token= (kept in a
#   # cookie). Default: none, which only a loopback listen allows; then the
#   # page answers only the daemon's own user and root (the kernel says who
#   # made each connection) and whoever holds the token the daemon keeps in
#   # state_dir/ui-token (mode 0600, made at the first start; its log names
#   # the file).
#   token = "long-random-string"
#
#   # Names the Host header may carry besides the listen address, IP
#   # addresses and localhost, as when a proxy or DNS name fronts the
#   # dashboard. Any other name is refused (DNS rebinding). Default: none.
#   allowed_hosts = ["qd.example.com"]
# }
