state_dir = "state"

agent "who" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  user     = "qd-no-such-user"
}

agent "grouponly" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  group    = "root"
}

agent "work" {
  command      = ["/bin/true"]
  schedule     = "@hourly"
  dir          = "ro"
  workdir      = "fresh"
  keep_workdir = "sometimes"
}

agent "work2" {
  command      = ["/bin/true"]
  schedule     = "@hourly"
  workdir      = "new"
  keep_workdir = "failed"
}

agent "paths" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  sandbox {
    read  = ["ro", "/", "missing"]
    write = ["out"]
  }
}

agent "nets" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  sandbox {
    network = "offline"
  }
}

agent "ports" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  sandbox {
    network = ["443", "http"]
  }
}

agent "noports" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  sandbox {
    network = []
  }
}

agent "state" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  sandbox {
    read  = ["."]
    write = ["ro"]
  }
  sandbox {
  }
}

agent "statedir" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  dir      = "state"
  sandbox {
  }
}
