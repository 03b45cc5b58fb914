package daemon

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/supervisor"
)

// Starts held after the daemon ran out of resources back off from
// startHoldMin, doubling with each failure in a row, to startHoldMax.
const (
	startHoldMin = time.Second
	startHoldMax = 30 * time.Second
)

// startHold holds claims back after a child could not be started for want
// of the daemon's own resources (supervisor.ErrNoResources: descriptors,
// memory, processes): the run was given back unstarted, and claiming more
// at once would only give those back too. The first start that works again
// ends it. The zero value holds nothing.
type startHold struct {
	mu sync.Mutex
	holdState
}

type holdState struct {
	failures  int // in a row
	since     time.Time
	until     time.Time
	reason    string
	givenBack int
}

// note records how a start went.
func (h *startHold) note(err error, logger hclog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil && h.failures > 0:
		logger.Info("children start again; claims resume", "held_since", h.since, "given_back", h.givenBack)
		h.holdState = holdState{}
	case errors.Is(err, supervisor.ErrNoResources):
		now := time.Now()
		if h.failures == 0 {
			h.since = now
		}
		h.failures++
		h.givenBack++
		wait := min(startHoldMin<<min(h.failures-1, 5), startHoldMax)
		h.until, h.reason = now.Add(wait), err.Error()
		logger.Warn("cannot start children: the daemon is out of resources; claims held back", "for", wait,
			"failures_in_a_row", h.failures, "error", err)
	}
}

// recovering reports whether the last start failed for want of resources
// and none has worked since.
func (h *startHold) recovering() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failures > 0
}

// held reports whether claims wait.
func (h *startHold) held() bool { return h.heldBecause() != "" }

// heldBecause is why claims wait, "" when they do not.
func (h *startHold) heldBecause() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Now().Before(h.until) {
		return h.reason
	}
	return ""
}

// status is the hold for the status socket, nil when starts never failed
// since the last one that worked.
func (h *startHold) status() *api.StartsHeld {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures == 0 {
		return nil
	}
	return &api.StartsHeld{Since: h.since, Until: h.until, Reason: h.reason, GivenBack: h.givenBack}
}
