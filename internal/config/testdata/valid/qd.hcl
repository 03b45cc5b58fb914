# The smallest useful file: every other setting takes its default.
agent "build" {
  command  = ["sh", "-c", "echo built"]
  schedule = "*/5 * * * *"
}

periodic "nightly" {
  schedule = "@daily"
  agent    = "build"
}
