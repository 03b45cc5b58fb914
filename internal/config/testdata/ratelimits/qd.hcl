limit "llm" {
  rate = "abc"
}
limit "zero" {
  rate = "0/1m"
}
limit "instant" {
  rate  = "5/0s"
  burst = -1
}
agent "x" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  limits   = ["llm", "nosuch"]
}
