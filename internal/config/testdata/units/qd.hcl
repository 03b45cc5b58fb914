shutdown_grace = 45
retention      = "30d"

agent "nightly" {
  command       = ["/bin/sh", "-c", "true"]
  schedule      = "@every 1d"
  lease         = "1d"
  heartbeat     = "1h"
  timeout       = "1d12h"
  stall_timeout = "90"
  kill_grace    = 2.5
  retry_backoff = "0.5d"
}
