budget "neg" {
  max    = -1
  period = "1d"
}
budget "odd" {
  max      = 5
  period   = "2d"
  timezone = "Mars/Olympus"
}
agent "x" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  budget   = "nosuch"
}
