agent "build" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
}

periodic "nightly" {
  schedule = "@daily"
  agent    = "build"
}

agent "build" {
  command  = ["/bin/sh", "-c", "false"]
  schedule = "@every 0s"
}

periodic "nightly" {
  schedule = "@weekly"
  agent    = "build"
}
