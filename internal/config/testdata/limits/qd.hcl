agent "build" {
  command    = ["/bin/sh", "-c", "true"]
  schedule   = "@hourly"
  memory_max = "lots"
  cpu_max    = 0
}

agent "big" {
  command    = ["/bin/sh", "-c", "true"]
  schedule   = "@hourly"
  memory_max = "-1G"
  cpu_max    = 5000
}
