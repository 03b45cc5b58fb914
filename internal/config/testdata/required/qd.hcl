agent "build" {
  lanes = ["default"]
}

periodic "nightly" {
  lane = "default"
}
