package supervisor

// stopReason says why the supervisor ended a child, if it did.
type stopReason int

const (
	stopNone stopReason = iota
	stopTimeout
	stopStall
	stopCancel
	stopShutdown
	stopFenced    // no heartbeat got through before the local deadline
	stopLeaseLost // a heartbeat said the lease is gone
)

// A child can be asked to stop for more than one reason: a timeout, then a
// shutdown, then a lost lease. It keeps the first reason it was given unless
// a later one has a higher rank:
//
//	rank  reasons                           replaces  because
//	0     none                              -
//	1     timeout, stall, cancel, shutdown  rank 0    the first says why the child was stopped
//	2     fenced                            rank 0-1  the lease can no longer be shown to hold:
//	                                                  the run is abandoned for that, whatever
//	                                                  else was asked
//	3     lease lost                        rank 0-2  the task may be another's: nothing may
//	                                                  be settled
//
// From rank 2 on the lease is given up (leaseGone): the child gets no more
// heartbeats, and no timeout or stall is looked for, since it is being
// killed. The settlement of each reason is in settlement.
const (
	rankNone = iota
	rankAsked
	rankFenced
	rankLost
)

// stopReasons gives each reason its name (as status shows it) and rank.
var stopReasons = [...]struct {
	name string
	rank int
}{
	stopNone:      {"", rankNone},
	stopTimeout:   {"timeout", rankAsked},
	stopStall:     {"stall", rankAsked},
	stopCancel:    {"cancel", rankAsked},
	stopShutdown:  {"shutdown", rankAsked},
	stopFenced:    {"fenced", rankFenced},
	stopLeaseLost: {"lease lost", rankLost},
}

func (r stopReason) String() string { return stopReasons[r].name }

// replaces reports whether r takes the place of old, which a child was
// already stopped for: only when it outranks it.
func (r stopReason) replaces(old stopReason) bool {
	return stopReasons[r].rank > stopReasons[old].rank
}

// leaseGone reports whether r gives up the child's lease: it is killed for
// the lease, and needs no heartbeat.
func (r stopReason) leaseGone() bool { return stopReasons[r].rank >= rankFenced }
