agent "build" {
  command      = ["/bin/sh", "-c", "true"]
  schedule     = "@hourly"
  parallel     = 0
  max_attempts = 0
}

agent "deploy" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  parallel = -1
}

periodic "nightly" {
  schedule     = "@daily"
  agent        = "deploy"
  max_attempts = -2
}
