package main

import (
	"bytes"
	"io"
	"os"
	"syscall"
	"testing"
)

// Ensure only a terminal counts as one: not /dev/null (a character device
// too), a pipe, a file or a buffer, so that each of those gets JSON.
func TestIsTerminal(t *testing.T) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, out := range map[string]io.Writer{"/dev/null": devNull, "pipe": w, "file": file, "buffer": &bytes.Buffer{}} {
		if isTerminal(out) {
			t.Errorf("%s: isTerminal = true, want false", name)
		}
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Error("a pseudo-terminal: isTerminal = false, want true")
	}
}
