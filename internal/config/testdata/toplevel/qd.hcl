name       = "host\tone"
log_level  = "loud"
log_format = "xml"
socket     = "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock"
state_dir  = "~qd/state"

agent "build" {
  command  = ["/bin/sh"]
  schedule = "@hourly"
  dir      = ""
}
