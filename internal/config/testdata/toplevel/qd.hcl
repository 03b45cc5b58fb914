name       = "host\tone"
log_level  = "loud"
log_format = "xml"
socket     = "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock"
state_dir  = "~/state"

agent "build" {
  command  = ["/bin/sh"]
  schedule = "@hourly"
  dir      = ""
}
