agent "Build" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
}

agent "../etc" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  lanes    = ["ok", "a b", "Ü", "lane\n"]
}

periodic "every hour" {
  schedule = "@hourly"
  agent    = "Build"
  lane     = "../x"
}
