agent "zero" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@every 0s"
}

agent "negative" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@every -5m"
}

agent "subsecond" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@every 500ms"
}

agent "fraction" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@every 1500ms"
}

agent "february" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "0 0 30 2 *"
}

agent "tz-panic" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "TZ=0"
}

agent "mars" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "CRON_TZ=Mars/Base 0 9 * * *"
}

agent "six" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "0 * * * * *"
}

agent "empty" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = ""
}

agent "minute" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "61 * * * *"
}

agent "good" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "CRON_TZ=Europe/Paris 0 0 29 2 *"
}
