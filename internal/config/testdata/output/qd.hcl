agent "mixed" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  output   = "interleaved"
}
