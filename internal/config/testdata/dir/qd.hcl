agent "missing" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  dir      = "nowhere"
}

agent "file" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  dir      = "afile"
}
