package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// runHelp serves `qd help` and `qd help COMMAND`.
func runHelp(w io.Writer, args []string) error {
	if len(args) == 0 {
		writeOverview(w)
		return nil
	}
	name := strings.Join(args, " ")
	if c := lookup(name); c != nil {
		writeCommandHelp(w, c)
		return nil
	}
	if group := subcommands(name); len(group) > 0 {
		for _, n := range group {
			writeCommandHelp(w, lookup(n))
			fmt.Fprintln(w)
		}
		return nil
	}
	return unknownCommand(name)
}

// writeOverview lists every command with its summary.
func writeOverview(w io.Writer) {
	fmt.Fprint(w, "qd runs agent programs from a PostgreSQL-backed queue.\n\nUsage: qd COMMAND [flags] [args]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help\tshow help for qd or one command\n")
	tw.Flush()
	fmt.Fprint(w, "\nRun 'qd help COMMAND' or 'qd COMMAND --help' for its flags.\n")
	fmt.Fprint(w, "Exit codes: 0 ok, 1 error, 2 usage, 3 nothing to claim, 4 lease lost.\n")
}

// writeCommandHelp prints the usage of c and every flag with its default.
func writeCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: qd %s %s\n\n%s\n", c.name, c.usage, c.summary)
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	fs := newFlagSet(c, &Env{})
	c.setup(fs)
	var lines []string
	fs.VisitAll(func(f *flag.Flag) { lines = append(lines, flagLine(f)) })
	if len(lines) == 0 {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	tw.Flush()
}

// flagLine renders one flag as "  --name VALUE\tusage (default X)".
func flagLine(f *flag.Flag) string {
	arg, usage := flag.UnquoteUsage(f)
	if arg == "value" {
		arg = strings.ToUpper(f.Name)
	}
	head := "  --" + f.Name
	if arg != "" {
		head += " " + arg
	}
	def := f.DefValue
	switch {
	case strings.Contains(usage, "(default") || strings.Contains(usage, "(required)"):
		return head + "\t" + usage
	case def == "" || def == "[]":
		def = "none"
	case arg == "TEXT" || arg == "NAME" || arg == "KEY":
		def = fmt.Sprintf("%q", def)
	}
	return fmt.Sprintf("%s\t%s (default %s)", head, usage, def)
}
