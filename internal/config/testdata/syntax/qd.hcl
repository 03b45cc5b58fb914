agent "build" {
  command  = ["/bin/sh", "-c", "true"
  schedule = "@hourly"
}
