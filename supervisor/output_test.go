package supervisor

import (
	"strings"
	"testing"
)

func TestOutput_LastLine(t *testing.T) {
	long := strings.Repeat("a", lineMax+50)
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"Empty", nil, ""},
		{"OneLine", []string{"hello\n"}, "hello"},
		{"Unfinished", []string{"a\nb"}, "b"},
		{"SkipsBlank", []string{"result\n\n   \n"}, "result"},
		{"CRLF", []string{"done\r\n"}, "done"},
		{"SplitAcrossReads", []string{"hel", "lo wo", "rld\nnext", " one\n"}, "next one"},
		{"LongCut", []string{long + "\n"}, strings.Repeat("a", lineMax) + "…"},
		{"LongThenShort", []string{long, "\nshort\n"}, "short"},
		{"NUL", []string{"a\x00b\n"}, "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Ensure each stream keeps its last non-empty line, bounded,
			// and the other stream's lines do not mix in.
			for _, stdout := range []bool{true, false} {
				o := newOutput(nil)
				for _, c := range tt.chunks {
					o.write([]byte(c), stdout)
				}
				o.write([]byte("other stream\n"), !stdout)
				out, errLine := o.lastLines()
				if !stdout {
					out, errLine = errLine, out
				}
				if out != tt.want || errLine != "other stream" {
					t.Fatalf("stdout %v: last lines %q and %q, want %q and the other stream's", stdout, out, errLine, tt.want)
				}
			}
		})
	}
}

func TestOutput_Tail(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"Short", []string{"ab", "cd"}, "abcd"},
		{"Wraps", []string{strings.Repeat("x", tailSize-1), "yz"}, strings.Repeat("x", tailSize-2) + "yz"},
		{"HugeWrite", []string{"start", strings.Repeat("q", 3*tailSize) + "end"}, strings.Repeat("q", tailSize-3) + "end"},
		{"CutRune", []string{"é" + strings.Repeat("r", tailSize-1)}, strings.Repeat("r", tailSize-1)},
		{"Stderr", []string{"err"}, "err"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Ensure the tail holds the last bytes as valid text.
			o := newOutput(nil)
			for _, c := range tt.chunks {
				o.write([]byte(c), false)
			}
			if got := o.tail(); got != tt.want {
				t.Fatalf("tail = %d bytes %.20q…, want %d bytes %.20q…", len(got), got, len(tt.want), tt.want)
			}
			if out, _ := o.lastLines(); out != "" {
				t.Fatal("stderr reached stdout's last line")
			}
		})
	}
}
