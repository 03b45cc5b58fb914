package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/qd-run/qd/internal/box"
)

// commands is the table Main dispatches on. A command lives in its own file
// as a *command variable and is listed here once. Names of two words ("lane
// set") are reached as `qd lane set`.
var commands = []*command{
	migrateCommand,
	enqueueCommand,
	runNowCommand,
	claimCommand,
	heartbeatCommand,
	completeCommand,
	failCommand,
	abandonCommand,
	laneSetCommand,
	laneListCommand,
	agentPauseCommand,
	agentResumeCommand,
	agentListCommand,
	limitSetCommand,
	limitListCommand,
	spendCommand,
	deferCommand,
	usageCommand,
	budgetSetCommand,
	budgetListCommand,
	tasksCommand,
	runsCommand,
	showCommand,
	resultCommand,
	resultsCommand,
	logsCommand,
	cancelCommand,
	retryCommand,
	pruneCommand,
	dbStartCommand,
	dbStatusCommand,
	dbStopCommand,
	daemonCommand,
	statusCommand,
	serviceInstallCommand,
	serviceStatusCommand,
	serviceUninstallCommand,
	uiCommand,
	versionCommand,
	completionCommand,
}

// command is one subcommand of qd.
type command struct {
	name    string // "enqueue", or "lane set"
	summary string // one line for `qd help`
	usage   string // arguments after the name, e.g. "RUN [flags]"
	help    string // optional paragraphs shown by `qd help NAME`
	// db adds --db and --config; json adds --json.
	db, json bool
	// reads marks a command that only reads the queue: it never starts the
	// private cluster, and on a terminal it names the queue it reads.
	reads bool
	// setup registers the command's flags and returns the function that runs
	// it once they are parsed.
	setup func(fs *flag.FlagSet) runFunc
}

// runFunc runs a command with its parsed flags and positional arguments.
type runFunc func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error

// daemonSignals receives the daemon's signals from the first instant of a
// `qd run` process, so that a signal sent during start-up is neither lost
// nor fatal (SIGHUP would otherwise kill it): the daemon handles it once it
// is up.
var daemonSignals chan os.Signal

func main() {
	if len(os.Args) > 1 && os.Args[1] == box.Arg {
		box.Main(os.Args[2:]) // the shim of a boxed run; never returns
	}
	if len(os.Args) > 1 && os.Args[1] == "run" {
		daemonSignals = make(chan os.Signal, 8)
		signal.Notify(daemonSignals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs qd with args (without the program name) and returns the exit
// code. Errors are printed here, once, as "qd: message".
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stdout, stderr = safeOutput(stdout), safeOutput(stderr)
	env := newEnv(stdin, stdout, stderr, os.Getenv)
	defer env.Close()
	err := dispatch(ctx, env, args)
	code := exitCode(err)
	if err != nil && !errors.Is(err, errQuiet) {
		fmt.Fprintf(stderr, "qd: %s\n", err)
	}
	return code
}

func dispatch(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 {
		writeOverview(env.Stderr)
		return usageErrorf("no command given")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return runHelp(env.Stdout, args[1:])
	case "--version", "-version", "-V":
		args = append([]string{"version"}, args[1:]...)
	case completeHelper:
		return runComplete(ctx, env, args[1:])
	}
	if strings.HasPrefix(args[0], "-") {
		return unknownFlag(args[0])
	}
	cmd, rest, err := findCommand(args)
	if err != nil {
		return err
	}
	return execCommand(ctx, env, cmd, rest)
}

// findCommand resolves the command named at the start of args and returns
// the arguments after its name.
func findCommand(args []string) (*command, []string, error) {
	if len(args) > 1 {
		if c := lookup(args[0] + " " + args[1]); c != nil {
			return c, args[2:], nil
		}
	}
	if c := lookup(args[0]); c != nil {
		return c, args[1:], nil
	}
	if group := subcommands(args[0]); len(group) > 0 {
		if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			return nil, nil, unknownCommand(args[0] + " " + args[1])
		}
		return nil, nil, usageErrorf("%s needs a subcommand: %s", args[0], strings.Join(group, ", "))
	}
	return nil, nil, unknownCommand(args[0])
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// subcommands lists the commands named "group X".
func subcommands(group string) []string {
	var names []string
	for _, c := range commands {
		if g, _, ok := strings.Cut(c.name, " "); ok && g == group {
			names = append(names, c.name)
		}
	}
	return names
}

func unknownCommand(name string) error {
	names := make([]string, 0, len(commands)+1)
	for _, c := range commands {
		names = append(names, c.name)
	}
	names = append(names, "help")
	if s := suggest(name, names); s != "" {
		return usageErrorf("unknown command %q; did you mean %q? (see qd help)", name, s)
	}
	return usageErrorf("unknown command %q (see qd help)", name)
}

// unknownFlag refuses a flag given before any command, such as --verbose,
// and points at the command it likely meant.
func unknownFlag(arg string) error {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	if s := suggest(name, names); s != "" && name != "" {
		return usageErrorf("unknown flag %q; did you mean %q? (see qd help)", arg, "qd "+s)
	}
	return usageErrorf("unknown flag %q: a command comes first, its flags after it (see qd help)", arg)
}

// flagHint ends the flag package's "flag provided but not defined" with the
// flag of cmd that was likely meant, as unknownCommand does for commands.
func flagHint(fs *flag.FlagSet, cmd *command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := suggestFlag(name, names); s != "" {
		return fmt.Sprintf("; did you mean --%s? (see qd help %s)", s, cmd.name)
	}
	return fmt.Sprintf(" (see qd help %s)", cmd.name)
}

// execCommand parses the flags of cmd from args and runs it.
func execCommand(ctx context.Context, env *Env, cmd *command, args []string) error {
	fs := newFlagSet(cmd, env)
	run := cmd.setup(fs)
	env.readOnly, env.nameQueue = cmd.reads, cmd.reads
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(env.Stdout, cmd)
		return nil
	}
	if err != nil {
		return usageErrorf("%s: %s%s", cmd.name, dashdash(err.Error()), flagHint(fs, cmd, err))
	}
	return run(ctx, env, fs, pos)
}

// dashdash rewrites the flag package's "-name" in its messages as "--name",
// the spelling qd documents.
func dashdash(msg string) string {
	return flagName.ReplaceAllString(msg, "$1--$2")
}

var flagName = regexp.MustCompile(`(flag |: |for )-([a-z])`)

func newFlagSet(cmd *command, env *Env) *flag.FlagSet {
	fs := flag.NewFlagSet("qd "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if cmd.db {
		fs.StringVar(&env.DatabaseURL, "db", "", "database `URL` (default: $QD_DATABASE_URL, then the config file, then the private cluster in state_dir/pg)")
		fs.StringVar(&env.ConfigPath, "config", "", "config `FILE` (default: $QD_CONFIG, ./qd.hcl, ~/.config/qd/qd.hcl, /etc/qd/qd.hcl)")
	}
	if cmd.json {
		fs.BoolVar(&env.JSON, "json", false, "print JSON (the default when stdout is not a terminal)")
	}
	return fs
}
