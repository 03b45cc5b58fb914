package systemd

import (
	_ "embed"
	"encoding/xml"
	"strings"
)

// UnitFile and PlistFile are the files as shipped.
var (
	//go:embed qd.service
	UnitFile string
	//go:embed com.qd.plist
	PlistFile string
)

// Shipped paths, which a rendering replaces.
const (
	DefaultQD          = "/usr/local/bin/qd"
	DefaultConfig      = "/etc/qd/qd.hcl"           // the unit's
	DefaultPlistConfig = "/usr/local/etc/qd/qd.hcl" // the plist's
	DefaultLog         = "/usr/local/var/log/qd/qd.log"
	defaultPath        = "/usr/local/bin:/usr/bin:/bin"
)

// UnitParams says which unit to render.
type UnitParams struct {
	User   bool   // the user service; else the system service
	QD     string // absolute path of the qd binary
	Config string // absolute path of the config file
	Path   string // the user service's PATH, for its agents
}

// Unit renders qd.service; with the shipped paths the system service is
// the file byte for byte.
func Unit(p UnitParams) string {
	var b strings.Builder
	system := false
	for _, line := range strings.SplitAfter(UnitFile, "\n") {
		mark := strings.TrimSpace(line)
		switch {
		case mark == "#[system]" || mark == "#[/system]":
			system = mark == "#[system]"
			if p.User {
				continue
			}
		case system && p.User:
			continue
		case strings.HasPrefix(line, "#[user] ") && p.User:
			line = strings.TrimPrefix(line, "#[user] ")
		}
		switch {
		case strings.HasPrefix(line, "ExecStart="):
			line = "ExecStart=" + quoteWord(p.QD) + " run --config " + argWord(p.Config) + "\n"
		case p.User && strings.HasPrefix(line, "Environment=PATH="):
			path := p.Path
			if path == "" {
				path = defaultPath
			}
			line = "Environment=" + quoteWord("PATH="+path) + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

// argWord writes s as an argument of a unit's command line: quoteWord's,
// with $ doubled ($X would be a variable). The program's path is not
// expanded, and takes quoteWord alone.
func argWord(s string) string {
	return quoteWord(strings.ReplaceAll(s, "$", "$$"))
}

// quoteWord writes s as one word of a unit's value: % doubled, and in
// double quotes, with \ and " escaped, when it holds a blank, a quote, a
// backslash or a semicolon.
func quoteWord(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// PlistParams says which launchd job to render.
type PlistParams struct {
	Daemon   bool   // a LaunchDaemon; else a LaunchAgent
	UserName string // the user a LaunchDaemon runs as
	QD       string // absolute path of the qd binary
	Config   string // absolute path of the config file
	Log      string // where stdout and stderr go
}

// Plist renders com.qd.plist; with the shipped paths a LaunchAgent is the
// file byte for byte.
func Plist(p PlistParams) string {
	s := strings.NewReplacer(
		"<string>"+DefaultQD+"</string>", "<string>"+xmlText(p.QD)+"</string>",
		"<string>"+DefaultPlistConfig+"</string>", "<string>"+xmlText(p.Config)+"</string>",
		"<string>"+DefaultLog+"</string>", "<string>"+xmlText(p.Log)+"</string>",
	).Replace(PlistFile)
	if p.Daemon {
		label := "\t<string>com.qd</string>\n"
		s = strings.Replace(s, label, label+"\n\t<key>UserName</key>\n\t<string>"+xmlText(p.UserName)+"</string>\n", 1)
	}
	return s
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
