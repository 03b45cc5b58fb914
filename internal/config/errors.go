package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	File    string
	Line    int // 0 when the problem concerns the file as a whole
	Column  int // 0 when only the line is known
	Message string
}

// String renders the problem as "file:line:col: message", leaving out the
// parts that are not known.
func (p Problem) String() string {
	switch {
	case p.Line == 0:
		return fmt.Sprintf("%s: %s", p.File, p.Message)
	case p.Column == 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, p.Message)
	}
}

// Error lists every problem found in a config file, in line order.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects what is wrong while a file is decoded.
type problems struct {
	file string
	list []Problem
}

// at records a problem at line of the file. ctx names the block ("agent
// \"build\"") and may be empty.
func (ps *problems) at(line int, ctx, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ctx != "" {
		msg = ctx + ": " + msg
	}
	ps.list = append(ps.list, Problem{File: ps.file, Line: line, Message: msg})
}

// diags records HCL's error diagnostics as "file:line:col: summary: detail".
func (ps *problems) diags(ds hcl.Diagnostics) {
	for _, d := range ds {
		if d.Severity != hcl.DiagError {
			continue
		}
		p := Problem{File: ps.file, Message: d.Summary}
		if d.Detail != "" {
			p.Message += ": " + d.Detail
		}
		if d.Subject != nil {
			p.Line, p.Column = d.Subject.Start.Line, d.Subject.Start.Column
		}
		ps.list = append(ps.list, p)
	}
}

// err returns nil when nothing was recorded, else an *Error sorted by line.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return &Error{Problems: ps.list}
}
