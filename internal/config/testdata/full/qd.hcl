database       = "postgres://qd@db.example:5432/qd?sslmode=disable"
name           = "builder-1"
socket         = "run/qd.sock"
state_dir      = "state"
log_level      = "DEBUG"
log_format     = "json"
shutdown_grace = "45s"
retention      = "720h"

agent "deploy" {
  command       = ["../bin/agent", "--deploy", "fast"]
  dir           = "work"
  env           = { STAGE = "prod", RETRIES = 2 }
  schedule      = "CRON_TZ=Europe/Paris 30 2 * * 1-5"
  lanes         = ["prod", "staging"]
  parallel      = 4
  lease         = "2m"
  heartbeat     = "20s"
  timeout       = "1h30m"
  stall_timeout = "15m"
  kill_grace    = "3s"
  retry_backoff = "1m"
  max_attempts  = 7
}

agent "build" {
  command  = ["/bin/sh", "-c", "make"]
  schedule = "@every 45s"
}

periodic "weekly" {
  schedule     = "0 6 * * 0"
  agent        = "deploy"
  lane         = "staging"
  payload      = "{\"env\": \"staging\", \"n\": [1, 2]}"
  priority     = -3
  catch_up     = "once"
}

periodic "hourly" {
  schedule = "@hourly"
  agent    = "build"
}

lane "prod" {
  max_running = 3
}

lane "staging" {
  paused = true
}
