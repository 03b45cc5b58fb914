agent "missing" {
  command  = ["./missing.sh"]
  schedule = "@hourly"
}

agent "notexec" {
  command  = ["notexec.sh"]
  schedule = "@hourly"
}

agent "directory" {
  command  = ["./subdir"]
  schedule = "@hourly"
}

agent "badshebang" {
  command  = ["./badshebang.sh"]
  schedule = "@hourly"
}

agent "crlf" {
  command  = ["./crlf.sh"]
  schedule = "@hourly"
}

agent "envshebang" {
  command  = ["./envshebang.sh", "--flag"]
  schedule = "@hourly"
}

agent "relshebang" {
  command  = ["./relshebang.sh"]
  schedule = "@hourly"
}

agent "notonpath" {
  command  = ["qd-no-such-program"]
  schedule = "@hourly"
}

agent "empty" {
  command  = []
  schedule = "@hourly"
}

agent "blank" {
  command  = [""]
  schedule = "@hourly"
}

agent "nul" {
  command  = ["/bin/sh", "-c", "echo a\u0000b"]
  schedule = "@hourly"
}

agent "indir" {
  dir      = "sub2"
  command  = ["./ok.sh"]
  schedule = "@hourly"
}

agent "ok" {
  command  = ["./ok.sh", "arg"]
  schedule = "@hourly"
}

agent "notexec-path" {
  command  = ["./notexec.sh"]
  schedule = "@hourly"
}
