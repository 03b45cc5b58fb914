lane "web" {
  max_running = 2
}

agent "hello" {
  command  = ["examples/hello.sh"]
  schedule = "@every 2s"
  lanes    = ["demo", "web"]
}

agent "build" {
  command  = ["build"]
  schedule = "@hourly"
}

periodic "nightly" {
  schedule = "@daily"
  agent    = "build"
  lane     = "reports"
}
