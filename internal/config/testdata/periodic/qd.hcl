agent "build" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  lanes    = ["ci", "nightly"]
}

periodic "ghost" {
  schedule = "@daily"
  agent    = "deploy"
}

periodic "badjson" {
  schedule = "@daily"
  agent    = "build"
  lane     = "ci"
  payload  = "{\"a\": 1,}"
}

periodic "catchup" {
  schedule = "@daily"
  agent    = "build"
  lane     = "ci"
  catch_up = "all"
}

periodic "offlane" {
  schedule = "@daily"
  agent    = "build"
  lane     = "other"
}

periodic "defaultlane" {
  schedule = "@daily"
  agent    = "build"
}

periodic "priority" {
  schedule = "@daily"
  agent    = "build"
  lane     = "ci"
  priority = "high"
}
