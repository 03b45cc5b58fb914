agent "half" {
  command   = ["/bin/sh", "-c", "true"]
  schedule  = "@hourly"
  lease     = "1m"
  heartbeat = "30s"
}

agent "over" {
  command   = ["/bin/sh", "-c", "true"]
  schedule  = "@hourly"
  heartbeat = "5m"
}

agent "zero" {
  command   = ["/bin/sh", "-c", "true"]
  schedule  = "@hourly"
  heartbeat = "0s"
}

agent "fine" {
  command   = ["/bin/sh", "-c", "true"]
  schedule  = "@hourly"
  lease     = "1m"
  heartbeat = "29s"
}
