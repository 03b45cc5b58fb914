agent "build" {
  command  = ["/bin/sh", "-c", "true"]
  schedule = "@hourly"
  env = {
    LD_PRELOAD            = "/tmp/x.so"
    LD_LIBRARY_PATH       = "/tmp"
    DYLD_INSERT_LIBRARIES = "/tmp/x.dylib"
    NOTIFY_SOCKET         = "/run/systemd/notify"
    QD_TASK_ID            = "7"
    "A=B"                 = "c"
    "NUL\u0000KEY"        = "x"
    "9LIVES"              = "x"
    VALUE_NUL             = "a\u0000b"
    GOOD                  = "yes"
    GOOD                  = "again"
  }
}
