// Package systemd holds the service files qd ships, qd.service (systemd)
// and com.qd.plist (launchd), and renders them for `qd service install`:
// the files in this directory are the templates, built into qd, so that
// what the repository ships and what the command writes cannot drift
// apart.
//
// Unit renders qd.service. The system service is the file as it is, with
// ExecStart= naming the qd binary and the config; the user service
// (systemctl --user) leaves out the lines between "#[system]" and
// "#[/system]" and takes in each "#[user] " line without that mark.
// Plist renders com.qd.plist as a LaunchAgent (the file as it is) or a
// LaunchDaemon (a UserName key added), with its paths.
//
// It imports nothing of qd: the command that installs, checks and starts
// the service is cmd/qd's.
package systemd
