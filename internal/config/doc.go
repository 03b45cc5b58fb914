// Package config reads qd's HCL configuration file.
//
// Load and Parse decode a file into a Config and validate all of it before
// anything starts: HCL syntax, unknown or duplicate blocks and attributes,
// durations, names, cron schedules, commands, working directories and
// environments. Every problem is collected, not only the first, and each is
// reported as "file:line: ..." naming the agent or periodic block involved.
// The result is an *Error listing the problems.
//
// Relative paths in a file (socket, state_dir, an agent's dir and a command
// program containing a slash) are resolved against the directory of the
// file, and a program is resolved against the agent's dir when it has one.
// After a successful load every path in the Config is absolute, so the
// daemon's working directory no longer matters.
//
// The database URL is never part of an error message: it may hold a
// password.
package config
