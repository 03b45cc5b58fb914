package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// completeHelper is the hidden command the scripts of `qd completion` run
// on each TAB: `qd __complete WORD...` gets the words after "qd" up to the
// cursor, the last one being the word typed so far ("" for a new one), and
// prints one candidate per line, as "word\tdescription" when it has one. A
// line ":files" alone asks the shell for file names instead. It is not in
// the command table, so that help does not list it and its words are not
// parsed as flags.
const completeHelper = "__complete"

// filesDirective is the line that asks the shell to complete file names.
const filesDirective = ":files"

// candidate is one completion and what it is.
type candidate struct{ word, desc string }

func (c candidate) String() string {
	if c.desc == "" {
		return c.word
	}
	return c.word + "\t" + c.desc
}

// runComplete serves `qd __complete`. It never fails: a config that cannot
// be read or a database that does not answer only means fewer candidates.
func runComplete(ctx context.Context, env *Env, words []string) error {
	if len(words) == 0 {
		words = []string{""}
	}
	before, cur := words[:len(words)-1], words[len(words)-1]
	env.readOnly = true // a tab never starts the private cluster
	c := &completer{ctx: ctx, env: env}
	c.useGlobalFlags(before)
	for _, cand := range c.complete(before, cur) {
		fmt.Fprintln(env.Stdout, cand)
	}
	return nil
}

// completer finds the candidates for the word at the cursor.
type completer struct {
	ctx context.Context
	env *Env
}

// useGlobalFlags makes the agents and lanes offered those of the config and
// database the line names with --config and --db.
func (c *completer) useGlobalFlags(words []string) {
	for i, w := range words {
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !strings.HasPrefix(w, "-") || (name != "config" && name != "db") {
			continue
		}
		if !hasValue && i+1 < len(words) {
			value = words[i+1]
		}
		if name == "config" {
			c.env.ConfigPath = value
		} else {
			c.env.DatabaseURL = value
		}
	}
}

// complete returns the candidates for cur, the words before it being
// before.
func (c *completer) complete(before []string, cur string) []candidate {
	switch {
	case len(before) == 0:
		return matching(cur, topWords())
	case before[0] == "help":
		return helpWords(before[1:], cur)
	case len(before) == 1 && len(subcommands(before[0])) > 0:
		return matching(cur, subWords(before[0]))
	}
	cmd, rest, err := findCommand(before)
	if err != nil {
		return nil
	}
	return c.forCommand(cmd, rest, cur)
}

// topWords are the first words of every command: "lane" stands for its
// subcommands.
func topWords() []candidate {
	var out []candidate
	seen := map[string]bool{}
	for _, cmd := range commands {
		first, _, group := strings.Cut(cmd.name, " ")
		if seen[first] {
			continue
		}
		seen[first] = true
		desc := cmd.summary
		if group {
			desc = strings.Join(subcommands(first), ", ")
		}
		out = append(out, candidate{first, desc})
	}
	return append(out, candidate{"help", "show help for qd or one command"})
}

// subWords are the second words of the commands of group.
func subWords(group string) []candidate {
	var out []candidate
	for _, name := range subcommands(group) {
		_, sub, _ := strings.Cut(name, " ")
		out = append(out, candidate{sub, lookup(name).summary})
	}
	return out
}

// helpWords completes `qd help COMMAND`.
func helpWords(args []string, cur string) []candidate {
	switch {
	case len(args) == 0:
		return matching(cur, topWords())
	case len(args) == 1 && len(subcommands(args[0])) > 0:
		return matching(cur, subWords(args[0]))
	}
	return nil
}

// forCommand completes a flag of cmd, a flag's value or an argument; rest
// holds the words between the command's name and cur.
func (c *completer) forCommand(cmd *command, rest []string, cur string) []candidate {
	fs := newFlagSet(cmd, &Env{})
	cmd.setup(fs)
	dashdash := false
	for _, w := range rest {
		dashdash = dashdash || w == "--"
	}
	if name, value, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "-") && !dashdash {
		return withPrefix(name+"=", c.flagValues(cmd, strings.TrimLeft(name, "-"), value))
	}
	if f := awaitingValue(fs, rest); f != nil {
		return c.flagValues(cmd, f.Name, cur)
	}
	if strings.HasPrefix(cur, "-") && !dashdash {
		return matching(cur, flagWords(fs))
	}
	return c.argument(cmd, countArgs(fs, rest), cur)
}

// flagWords are the flags of fs as typed, "--name", with their usage.
func flagWords(fs *flag.FlagSet) []candidate {
	var out []candidate
	fs.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		out = append(out, candidate{"--" + f.Name, usage})
	})
	return append(out, candidate{"--help", "show the command's help"})
}

// awaitingValue returns the flag the last word of rest names when that flag
// takes a value not given yet, else nil.
func awaitingValue(fs *flag.FlagSet, rest []string) *flag.Flag {
	if len(rest) == 0 {
		return nil
	}
	last := rest[len(rest)-1]
	if !strings.HasPrefix(last, "-") || last == "--" || strings.Contains(last, "=") {
		return nil
	}
	f := fs.Lookup(strings.TrimLeft(last, "-"))
	if f == nil || isBoolFlag(f) {
		return nil
	}
	return f
}

// countArgs counts the positional arguments in rest.
func countArgs(fs *flag.FlagSet, rest []string) int {
	n := 0
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		if w == "--" {
			return n + len(rest) - i - 1
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			n++
			continue
		}
		if f := fs.Lookup(strings.TrimLeft(w, "-")); f != nil && !isBoolFlag(f) && !strings.Contains(w, "=") {
			i++ // its value
		}
	}
	return n
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagValues completes the value of the flag name of cmd.
func (c *completer) flagValues(cmd *command, name, cur string) []candidate {
	switch name {
	case "agent":
		return matching(cur, c.agents())
	case "lane":
		return matching(cur, c.lanes())
	case "state":
		return matching(cur, states(cmd))
	case "config", "socket":
		return []candidate{{word: filesDirective}}
	}
	return nil
}

// argument completes the positional argument of cmd at index n.
func (c *completer) argument(cmd *command, n int, cur string) []candidate {
	if n > 0 {
		return nil
	}
	switch cmd.name {
	case "run-now", "agent pause", "agent resume":
		return matching(cur, c.agents())
	case "lane set":
		return matching(cur, c.lanes())
	case "completion":
		return matching(cur, shellWords())
	}
	return nil
}

// matching keeps the candidates that begin with prefix.
func matching(prefix string, cands []candidate) []candidate {
	var out []candidate
	for _, c := range cands {
		if strings.HasPrefix(c.word, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// withPrefix puts prefix ("--lane=") before each candidate but the files
// directive, which the scripts handle.
func withPrefix(prefix string, cands []candidate) []candidate {
	for i := range cands {
		if cands[i].word != filesDirective {
			cands[i].word = prefix + cands[i].word
		}
	}
	return cands
}
