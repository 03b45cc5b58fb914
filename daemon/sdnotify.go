package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// serviceManager sends sd_notify(3) messages to the service manager whose socket
// $NOTIFY_SOCKET names. When the variable is unset (not run by systemd, or
// by launchd) every method does nothing and returns nil. The zero value is
// ready to use.
//
// NOTIFY_SOCKET stays in the daemon's own environment so that a reload can
// still notify; agents never see it because their environment is built
// from an allowlist.
type serviceManager struct{}

// Enabled reports whether a service manager listens for notifications.
func (serviceManager) Enabled() bool { return socketSet() }

// Ready says start-up, or a reload, is finished. Send it once the config is
// valid and the status socket listens, not once the database answers: a
// database outage at boot must not fail the unit.
func (n serviceManager) Ready() error { return n.send(sd.SdNotifyReady) }

// Stopping says shutdown has begun.
func (n serviceManager) Stopping() error { return n.send(sd.SdNotifyStopping) }

// Reloading says a configuration reload has begun; send Ready when it is
// done, whether it succeeded or not. MONOTONIC_USEC is included, as
// Type=notify-reload requires.
func (n serviceManager) Reloading() error {
	return n.send(sd.SdNotifyReloading + "\n" + sd.SdNotifyMonotonicUsec())
}

// Status sets the free-form status line systemctl status shows. Line
// breaks are replaced by spaces: a newline would start another
// assignment, so a status text could otherwise say READY=1.
func (n serviceManager) Status(text string) error {
	text = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(text)
	return n.send("STATUS=" + text)
}

// Watchdog feeds the watchdog. Call it from the loop that does the
// heartbeating, at half of WatchdogInterval, so that a wedged loop gets
// the daemon restarted while a database outage alone does not.
func (n serviceManager) Watchdog() error { return n.send(sd.SdNotifyWatchdog) }

// ExtendTimeout asks for d more before the service manager gives up on the
// current start, reload or stop; useful while draining children.
func (n serviceManager) ExtendTimeout(d time.Duration) error {
	return n.send("EXTEND_TIMEOUT_USEC=" + strconv.FormatInt(d.Microseconds(), 10))
}

// WatchdogInterval returns the service's WatchdogSec and true when the
// service manager expects watchdog pings from this process
// ($WATCHDOG_USEC set, and $WATCHDOG_PID unset or ours).
func (serviceManager) WatchdogInterval() (time.Duration, bool) {
	d, err := sd.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

func (serviceManager) send(state string) error {
	if _, err := sd.SdNotify(false, state); err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	return nil
}

func socketSet() bool { return os.Getenv("NOTIFY_SOCKET") != "" }
