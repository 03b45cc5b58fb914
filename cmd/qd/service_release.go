//go:build !qdtesthooks

package main

// serviceRoot is "": a build without the tag qdtesthooks installs the
// system service where the system looks for it.
func serviceRoot() string { return "" }
