/*
 * The lease protocol of qd. Two daemons claim three tasks from one queue in
 * two lanes (lane 0 with limit 1 holds tasks 0 and 1, lane 1 with limit 2
 * holds task 2), run each claimed task as a child, heartbeat its lease,
 * fence it at the local deadline, settle it, and may crash, pause, lose any
 * reply and have their log writes block. docs/model.md maps every step to
 * the code it stands for.
 *
 * Time is not counted. Each run has two flags instead: late (its owner's
 * local deadline has passed) and expired (the database's lease has). Either
 * may be set at any moment, with one rule, which is what the margin buys: a
 * lease expires only after the local deadline has passed and, when the
 * owner's loop is running, after the owner has killed the child. The local
 * deadline is counted from when a claim or heartbeat was sent, the lease
 * from when the database applied it, and the margin lies between, so a
 * heartbeat's reply, which clears late, never promises more than the
 * database granted.
 *
 * Broken variants, one -D macro each:
 *   REAP_NO_LOCK       claim reaps, counts and takes without the lane lock
 *                      when the lane has an expired run
 *   COUNT_BEFORE_LOCK  claim counts the lane in a snapshot taken before the
 *                      lane lock is granted (REPEATABLE READ)
 *   ABANDON_NO_PROOF   start-up abandons runs of an instance not proved gone
 *                      (the other daemon's)
 *   HEARTBEAT_UNFENCED heartbeat extends a run that is no longer live
 *   LOG_BEFORE_KILL    the loop logs before it kills, so a blocked log
 *                      write stops the kill and the heartbeats
 */

#define ND 2            /* daemons */
#define NL 2            /* lanes */
#define NT 3            /* tasks */
#define NR 4            /* run rows */
#ifndef MAXRUNS
#define MAXRUNS 4       /* claims at most */
#endif
#define MAXATT 2        /* max_attempts */
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXPAUSE
#define MAXPAUSE 1
#endif
#ifndef MAXLOGBLOCK
#define MAXLOGBLOCK 1
#endif
#ifndef MAXLOSS
#define MAXLOSS 2       /* lost replies at most */
#endif

/* the lane of task t and the limit of lane l */
#define TLANE(t) ((t) == 2 -> 1 : 0)
#define LIMIT(l) ((l) == 0 -> 1 : 2)

/* tasks.state */
#define QUEUED 0
#define TRUNNING 1
#define DONE 2
#define FAILED 3
#define CANCELLED 4
/* runs.state */
#define FREE 0
#define RUNNING 1
#define ENDED 2         /* completed, failed, abandoned or cancelled: */
                        /* nothing in the protocol tells them apart */
/* the outcomes a run ends with */
#define COMPLETED 2
#define RFAILED 3
#define ABANDONED 4
#define RCANCELLED 5
/* the supervisor's view of a run */
#define NONE 0
#define UNKNOWN 1       /* the claim's reply was lost: the daemon holds its token */
#define PENDING 2       /* claim answered, Start not yet called */
#define HELD 3          /* child started */
#define SETTLING 4      /* child gone, settlement not yet answered */
/* a run's heartbeat */
#define HB_IDLE 0
#define HB_SENT 1
#define HB_OK 2
#define HB_CANCEL 3
#define HB_LOST 4

/* the database */
byte tstate[NT]; byte tatt[NT]; bool tcancel[NT];
byte lanelock[NL];      /* 0, or the holding daemon + 1 */
byte rstate[NR]; byte rtask[NR]; byte rowner[NR]; byte rinst[NR];
byte rout[NR];          /* the outcome an ENDED row ended with */
bool expired[NR];
byte nruns;
byte tlast[NT];         /* the task's latest run + 1; 0 before its first */

/* the daemons */
bool up[ND]; bool paused[ND]; bool logblk[ND]; byte inst[ND]; bool abandonDue[ND];
byte cphase[ND]; byte cl[ND]; byte ccnt[ND];
byte crashes; byte pauses; byte logblocks; byte losses;

/* the supervisor's handle of each run */
byte known[NR]; bool late[NR]; byte hbst[NR]; byte outc[NR];
bool refund[NR]; bool child[NR];

bool stale;             /* a write the fencing should have refused was applied */

#define ACTIVE(d) (up[d] && !paused[d])
/* the daemon's loop makes its passes: kills, heartbeats */
#ifdef LOG_BEFORE_KILL
#define LOOPS(d) (ACTIVE(d) && !logblk[d])
#else
#define LOOPS(d) ACTIVE(d)
#endif
#define LIVE(r) (rstate[r] == RUNNING && !expired[r])
#define EXPIRED(r, l) (rstate[r] == RUNNING && TLANE(rtask[r]) == l && expired[r])
#define QUEUEDIN(t, l) (tstate[t] == QUEUED && TLANE(t) == l)
#define WORK(l) (QUEUEDIN(0, l) || QUEUEDIN(1, l) || QUEUEDIN(2, l) || \
                 EXPIRED(0, l) || EXPIRED(1, l) || EXPIRED(2, l) || EXPIRED(3, l))
#define LOSE (losses < MAXLOSS)

/* finish_tasks.sql: move the task of a run that ended with outcome o */
inline finish_task(t, o, refunded) {
	if
	:: tstate[t] == TRUNNING ->
		if
		:: refunded && o == ABANDONED && tatt[t] > 0 -> tatt[t]--
		:: else -> skip
		fi;
		if
		:: o == COMPLETED -> tstate[t] = DONE
		:: o != COMPLETED && (o == RCANCELLED || tcancel[t]) -> tstate[t] = CANCELLED
		:: o != COMPLETED && o != RCANCELLED && !tcancel[t] && tatt[t] < MAXATT -> tstate[t] = QUEUED
		:: o != COMPLETED && o != RCANCELLED && !tcancel[t] && tatt[t] >= MAXATT -> tstate[t] = FAILED
		fi
	:: else -> skip
	fi
}

/* a run row ends; once its daemon has let go of it too, nothing about it
 * matters any more, and it is cleared so that equal futures are one state */
inline end_row(r, o, refunded) {
	rstate[r] = ENDED; rout[r] = o; expired[r] = 0; finish_task(rtask[r], o, refunded);
	tidy(r)
}
inline tidy(r) {
	if
	:: rstate[r] == ENDED && known[r] == NONE -> rtask[r] = 0; rowner[r] = 0; rinst[r] = 0; rout[r] = 0
	:: else -> skip
	fi
}

/* settle.sql's late completion: a completion that arrives after its run's
 * lease ran out is taken when no other run of the task was claimed since,
 * whether the run is still marked running or was reaped (abandoned, its
 * task queued again or failed): nothing can have overlapped it. Once
 * another run exists it is refused, as a lost lease. */
#ifdef LATE_ANY
#define LATE_OK(r) (rstate[r] == RUNNING || rout[r] == ABANDONED)
#else
#define LATE_OK(r) (tlast[rtask[r]] == r + 1 && \
	(rstate[r] == RUNNING || (rout[r] == ABANDONED && (tstate[rtask[r]] == QUEUED || tstate[rtask[r]] == FAILED))))
#endif
inline late_complete(r) {
	if
	:: rstate[r] == RUNNING -> end_row(r, COMPLETED, 0)
	:: else -> rout[r] = COMPLETED; tstate[rtask[r]] = DONE
	fi
}

/* reap_lane.sql: abandon the expired runs of lane l */
inline reap_lane(l) {
	i = 0;
	do
	:: i < NR ->
		if
		:: EXPIRED(i, l) -> end_row(i, ABANDONED, 0)
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* claim.sql's count: the lane's running runs */
inline count(l, n) {
	n = 0; i = 0;
	do
	:: i < NR ->
		if
		:: rstate[i] == RUNNING && TLANE(rtask[i]) == l -> n++
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* abandon_owner.sql, as daemon/housekeeping.go abandonEarlier calls it */
inline abandon_owner(d) {
	i = 0;
	do
	:: i < NR ->
		if
		:: rstate[i] == RUNNING && rowner[i] == d && rinst[i] < inst[d] ->
			end_row(i, ABANDONED, 0)
#ifdef ABANDON_NO_PROOF
		:: rstate[i] == RUNNING && rowner[i] != d ->
			end_row(i, ABANDONED, 0)
#endif
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* supervisor/loop.go fence: kill a child whose local deadline has passed */
inline fence(r) {
	child[r] = 0; outc[r] = ABANDONED; known[r] = SETTLING; late[r] = 0
}

/* forget everything the daemon knew of run r */
inline forget(r) {
	child[r] = 0; known[r] = NONE; hbst[r] = HB_IDLE; late[r] = 0;
	outc[r] = 0; refund[r] = 0; tidy(r)
}

/* claim.sql's take and COMMIT: the lowest queued task of the lane, if the
 * count leaves room, recorded with the claim's token; the reply may be lost
 * after the commit */
inline take(d) {
	t = 0;
	do
	:: t < NT && !QUEUEDIN(t, cl[d]) -> t++
	:: else -> break
	od;
	if
	:: t < NT && ccnt[d] < LIMIT(cl[d]) && nruns < MAXRUNS ->
		r = nruns; nruns++;
		rstate[r] = RUNNING; rtask[r] = t; rowner[r] = d; rinst[r] = inst[d];
		expired[r] = 0; tlast[t] = r + 1;
		tstate[t] = TRUNNING; tatt[t]++;
		if
		:: known[r] = PENDING
		:: LOSE -> losses++; known[r] = UNKNOWN
		fi
	:: else -> skip
	fi;
	if
	:: lanelock[cl[d]] == d + 1 -> lanelock[cl[d]] = 0
	:: else -> skip
	fi;
	cphase[d] = 0; cl[d] = 0; ccnt[d] = 0; t = 0; r = 0
}

/* the scheduler's claims and the daemon's life: start-up abandon, pause,
 * blocked log writes, crash, restart */
proctype daemon(byte d) {
	byte i, t, r;
end:
	do
#if defined(REAP_NO_LOCK) || defined(COUNT_BEFORE_LOCK)
	/* claim, begun on a lane with work (claim.sql's candidates) */
	:: atomic { ACTIVE(d) && cphase[d] == 0 && nruns < MAXRUNS && WORK(0) ->
		cl[d] = 0; cphase[d] = 1;
#ifdef COUNT_BEFORE_LOCK
		count(0, ccnt[d])
#endif
	}
	:: atomic { ACTIVE(d) && cphase[d] == 0 && nruns < MAXRUNS && WORK(1) ->
		cl[d] = 1; cphase[d] = 1;
#ifdef COUNT_BEFORE_LOCK
		count(1, ccnt[d])
#endif
	}
	/* claim: pg_advisory_xact_lock on the lane */
	:: atomic { ACTIVE(d) && cphase[d] == 1 && lanelock[cl[d]] == 0 ->
		lanelock[cl[d]] = d + 1; cphase[d] = 2 }
#ifdef REAP_NO_LOCK
	:: atomic { ACTIVE(d) && cphase[d] == 1 &&
	            (EXPIRED(0, cl[d]) || EXPIRED(1, cl[d]) || EXPIRED(2, cl[d]) || EXPIRED(3, cl[d])) ->
		reap_lane(cl[d]); count(cl[d], ccnt[d]); cphase[d] = 3 }
#endif
	/* claim: reap_lane, then count in a statement after the lock */
	:: atomic { ACTIVE(d) && cphase[d] == 2 ->
		reap_lane(cl[d]);
#ifndef COUNT_BEFORE_LOCK
		count(cl[d], ccnt[d]);
#endif
		cphase[d] = 3 }
	/* claim: take and commit */
	:: atomic { ACTIVE(d) && cphase[d] == 3 -> take(d) }
#else
	/* claim.sql in one step: under the lane's lock nothing else claims
	 * from the lane, and what others do meanwhile (end runs, let leases
	 * expire) only makes the count err high; a crash rolls it all back */
	:: atomic { ACTIVE(d) && nruns < MAXRUNS && WORK(0) ->
		cl[d] = 0; reap_lane(0); count(0, ccnt[d]); take(d) }
	:: atomic { ACTIVE(d) && nruns < MAXRUNS && WORK(1) ->
		cl[d] = 1; reap_lane(1); count(1, ccnt[d]); take(d) }
#endif
	/* start-up: abandon_owner for the earlier incarnations */
	:: atomic { ACTIVE(d) && abandonDue[d] -> abandon_owner(d); abandonDue[d] = 0 }
	/* the daemon stops (SIGSTOP, a long GC, a starved host) */
	:: atomic { ACTIVE(d) && pauses < MAXPAUSE -> pauses++; paused[d] = 1 }
	/* and goes on: the loop's first pass fences what is past its deadline */
	:: atomic { paused[d] ->
		paused[d] = 0;
		r = 0;
		do
		:: r < NR ->
			if
			:: rowner[r] == d && known[r] == HELD && child[r] && late[r] -> fence(r)
			:: else -> skip
			fi;
			r++
		:: else -> break
		od;
		r = 0 }
	/* the daemon's log writes block (a full pipe, a stuck journald), and
	 * later flow again */
	:: atomic { up[d] && !logblk[d] && logblocks < MAXLOGBLOCK -> logblocks++; logblk[d] = 1 }
	:: atomic { logblk[d] ->
		logblk[d] = 0;
#ifdef LOG_BEFORE_KILL
		/* the pass that was blocked goes on and kills */
		r = 0;
		do
		:: r < NR ->
			if
			:: rowner[r] == d && known[r] == HELD && child[r] && late[r] -> fence(r)
			:: else -> skip
			fi;
			r++
		:: else -> break
		od;
		r = 0
#else
		skip
#endif
	}
	/* crash: the children die with it (parent-death signal), its
	 * transaction rolls back and its lane lock is freed */
	:: atomic { up[d] && crashes < MAXCRASH ->
		crashes++; up[d] = 0; paused[d] = 0; logblk[d] = 0;
		r = 0;
		do
		:: r < NR ->
			if
			:: rowner[r] == d && known[r] != NONE -> forget(r)
			:: else -> skip
			fi;
			r++
		:: else -> break
		od;
		r = 0;
		if
		:: lanelock[0] == d + 1 -> lanelock[0] = 0
		:: else -> skip
		fi;
		if
		:: lanelock[1] == d + 1 -> lanelock[1] = 0
		:: else -> skip
		fi;
		cphase[d] = 0; cl[d] = 0; ccnt[d] = 0 }
	/* restart: a new incarnation, which has the state directory's lock */
	:: atomic { !up[d] -> up[d] = 1; inst[d]++; abandonDue[d] = 1 }
	od
}

/* the supervisor's handle of run r: the retried claim, Start, the child,
 * heartbeat, fence, settle; and time passing for it */
proctype handle(byte r) {
end:
	do
	/* pg/claim.go: a claim whose reply was lost is asked again with its
	 * token; claim.sql returns the runs that token made while they are
	 * live, else nothing */
	:: atomic { known[r] == UNKNOWN && ACTIVE(rowner[r]) ->
		if
		:: LIVE(r) ->
			known[r] = PENDING
		:: else -> known[r] = NONE; tidy(r)
		fi }
	/* or the daemon could not learn the outcome before the deadline: it
	 * gives back what the token made, refunded, once it can */
	:: atomic { known[r] == UNKNOWN && ACTIVE(rowner[r]) && late[r] ->
		outc[r] = ABANDONED; refund[r] = 1; known[r] = SETTLING; late[r] = 0 }
	/* supervisor/start.go Start: refuse a claim answered past its deadline */
	:: atomic { known[r] == PENDING && ACTIVE(rowner[r]) ->
		if
		:: !late[r] -> child[r] = 1; known[r] = HELD
		:: else -> outc[r] = ABANDONED; refund[r] = 1; known[r] = SETTLING; late[r] = 0
		fi }
	/* the child exits by itself */
	:: atomic { known[r] == HELD && child[r] ->
		child[r] = 0; known[r] = SETTLING; late[r] = 0;
		if
		:: outc[r] = COMPLETED
		:: outc[r] = RFAILED
		fi }
#ifdef HEARTBEAT_UNFENCED
	/* supervisor/loop.go send: a heartbeat */
	:: atomic { known[r] == HELD && child[r] && LOOPS(rowner[r]) && hbst[r] == HB_IDLE ->
		hbst[r] = HB_SENT }
	/* heartbeat.sql, applied to a run that is no longer live too */
	:: atomic { hbst[r] == HB_SENT ->
		if
		:: LIVE(r) -> late[r] = 0
		:: else -> stale = 1; expired[r] = 0
		fi;
		hbst[r] = HB_IDLE }
#else
	/* a heartbeat: supervisor/loop.go send, heartbeat.sql, then applyBeats
	 * and acked with the reply. In this model a heartbeat changes nothing
	 * in the database (a lease's expiry waits for its local deadline), so
	 * one whose reply is lost, or reaches a paused daemon, is one never
	 * sent, and the round trip is one step. */
	:: atomic { known[r] == HELD && child[r] && LOOPS(rowner[r]) && (late[r] || tcancel[rtask[r]]) ->
		if
		:: LIVE(r) && tcancel[rtask[r]] ->
			child[r] = 0; outc[r] = RCANCELLED; known[r] = SETTLING; late[r] = 0
		:: LIVE(r) && !tcancel[rtask[r]] -> late[r] = 0
		:: !LIVE(r) -> fence(r)
		fi }
#endif
	/* supervisor/loop.go check and fence: the local deadline */
	:: atomic { known[r] == HELD && child[r] && LOOPS(rowner[r]) && late[r] -> fence(r) }
	/* settle.sql and finish_tasks.sql; a lost reply is settled again */
	:: atomic { known[r] == SETTLING && ACTIVE(rowner[r]) ->
		if
		:: LIVE(r) -> end_row(r, outc[r], refund[r])
		:: !LIVE(r) && outc[r] == COMPLETED && rout[r] != COMPLETED && LATE_OK(r) -> late_complete(r)
		:: else -> skip /* 'same' or 'lost': nothing changes */
		fi;
		if
		:: known[r] = NONE; outc[r] = 0; refund[r] = 0; tidy(r)
		:: LOSE -> losses++ /* the reply is lost */
		fi }
	/* time passes: the owner's local deadline for the run */
	:: atomic { (known[r] == UNKNOWN || known[r] == PENDING || known[r] == HELD) &&
	            !late[r] -> late[r] = 1 }
	/* time passes: the lease expires in the database, only once the local
	 * deadline has passed and a looping owner has killed the child */
	:: atomic { rstate[r] == RUNNING && !expired[r] &&
	            (known[r] == NONE || known[r] == SETTLING || late[r] &&
	             (!LOOPS(rowner[r]) || !(known[r] == HELD && child[r]))) -> expired[r] = 1 }
	od
}

/* qd cancel: a queued task is cancelled, a running one marked */
proctype canceller() {
	byte t;
	if
	:: t = 0
	:: t = 2
	fi;
end:
	atomic { tstate[t] == QUEUED || tstate[t] == TRUNNING ->
		if
		:: tstate[t] == QUEUED -> tstate[t] = CANCELLED
		:: else -> tcancel[t] = 1
		fi }
}

/* The properties, checked in every reachable state. */
#define LIVEOF(t, r) (LIVE(r) && rtask[r] == t)
#define LIVETASK(t) (LIVEOF(t, 0) + LIVEOF(t, 1) + LIVEOF(t, 2) + LIVEOF(t, 3))
#define LIVEIN(l, r) (LIVE(r) && TLANE(rtask[r]) == l)
#define LIVELANE(l) (LIVEIN(l, 0) + LIVEIN(l, 1) + LIVEIN(l, 2) + LIVEIN(l, 3))
#define CHILDOF(t, r) (child[r] && rtask[r] == t)
#define CHILDREN(t) (CHILDOF(t, 0) + CHILDOF(t, 1) + CHILDOF(t, 2) + CHILDOF(t, 3))
#define FENCED(r) (!child[r] || LIVE(r) || paused[rowner[r]])
#define RUNOF(t, r) (rstate[r] == RUNNING && rtask[r] == t)
#define HELDTASK(t) ((tstate[t] == TRUNNING) == (RUNOF(t, 0) || RUNOF(t, 1) || RUNOF(t, 2) || RUNOF(t, 3)))

#define EXCLUSIVE (LIVETASK(0) <= 1 && LIVETASK(1) <= 1 && LIVETASK(2) <= 1 && \
	((CHILDREN(0) <= 1 && CHILDREN(1) <= 1 && CHILDREN(2) <= 1) || paused[0] || paused[1]))
#define LANEBOUND (LIVELANE(0) <= LIMIT(0) && LIVELANE(1) <= LIMIT(1))
#define FENCING (!stale)
#define SELFFENCE (FENCED(0) && FENCED(1) && FENCED(2) && FENCED(3))
#define NOTLOST (HELDTASK(0) && HELDTASK(1) && HELDTASK(2))
proctype monitor() {
end:
	atomic { !(EXCLUSIVE && LANEBOUND && FENCING && SELFFENCE && NOTLOST) ->
		assert(EXCLUSIVE); assert(LANEBOUND); assert(FENCING);
		assert(SELFFENCE); assert(NOTLOST) }
}

init {
	atomic {
		up[0] = 1; up[1] = 1; inst[0] = 1; inst[1] = 1;
		run monitor();
		run canceller();
		run daemon(0); run daemon(1);
		run handle(0); run handle(1); run handle(2); run handle(3)
	}
}
