agent "build" {
  command  = "/bin/sh -c true"
  schedule = "@hourly"
  parallel = "two"
  lanes    = "default"
  env      = ["A", "B"]
}
