shutdown_grace = "-1s"
retention      = "0s"

agent "build" {
  command       = ["/bin/sh", "-c", "true"]
  schedule      = "@hourly"
  lease         = "-5s"
  timeout       = "10 s"
  stall_timeout = "0s"
  kill_grace    = "soon"
  retry_backoff = "1d-2h"
}
