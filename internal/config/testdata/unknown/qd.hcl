log_levl = "debug"

agent "build" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  paralel  = 2
  retry {
  }
}

agnet "deploy" {
}
