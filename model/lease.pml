/*
 * The lease protocol of qd: two daemons claim tasks in two lanes (limits 1
 * and 2) from one queue (two tasks, both in lane 0; -DTASKS3 adds a third in
 * lane 1), run each claimed task as a child,
 * heartbeat its lease, fence it at the local deadline and settle it. Time is
 * a tick counter; the queue's clock and the daemons' clocks are the same
 * ticks. docs/model.md maps every step to the code it stands for.
 *
 * Broken variants, one -D macro each:
 *   REAP_NO_LOCK       claim reaps, counts and takes without the lane lock
 *                      when the lane has an expired run
 *   COUNT_BEFORE_LOCK  claim counts the lane in a snapshot taken before the
 *                      lane lock is granted (REPEATABLE READ)
 *   ABANDON_NO_PROOF   start-up abandons runs of an instance not proved gone
 *                      (the other daemon's)
 *   HEARTBEAT_UNFENCED heartbeat extends a run that is no longer live
 */

#ifndef MAXT
#define MAXT 5          /* the last tick */
#endif
#define ND 2            /* daemons */
#define NL 2            /* lanes */
#define NT 3            /* tasks */
#define NR 4            /* run rows */
#ifndef MAXRUNS
#define MAXRUNS 3       /* claims at most */
#endif
#ifndef LEASE
#define LEASE 3         /* ticks a claim or heartbeat grants */
#endif
#define MARGIN 1        /* the local deadline comes this much before */
#define MAXATT 2        /* max_attempts */
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXPAUSE
#define MAXPAUSE 1
#endif

/* tasks.state */
#define QUEUED 0
#define TRUNNING 1
#define DONE 2
#define FAILED 3
#define CANCELLED 4
/* runs.state */
#define FREE 0
#define RUNNING 1
#define COMPLETED 2
#define RFAILED 3
#define ABANDONED 4
#define RCANCELLED 5
/* the supervisor's view of a run */
#define NONE 0
#define PENDING 1       /* claim answered, Start not yet called */
#define HELD 2          /* child started */
#define SETTLING 3      /* child gone, settlement not yet answered */
#define SETTLED 4
/* a run's heartbeat */
#define HB_IDLE 0
#define HB_SENT 1
#define HB_OK 2
#define HB_CANCEL 3
#define HB_LOST 4

byte now;

/* the database */
byte tstate[NT]; byte tatt[NT]; bool tcancel[NT]; byte tlane[NT];
byte limit[NL];
byte lanelock[NL];      /* 0, or the holding daemon + 1 */
byte rstate[NR]; byte rtask[NR]; byte rowner[NR]; byte rinst[NR]; byte rexp[NR];
byte nruns;

/* the daemons */
bool up[ND]; bool paused[ND]; byte inst[ND]; bool abandonDue[ND];
byte cphase[ND]; byte cl[ND]; byte ccnt[ND]; byte csent[ND];
byte crashes; byte pauses;

/* the supervisor's handle of each run */
byte known[NR]; byte dl[NR]; byte hbsent[NR]; byte hbst[NR]; byte outc[NR];
bool refund[NR]; bool child[NR];

bool stale;             /* a write the fencing should have refused was applied */

#define ACTIVE(d) (up[d] && !paused[d])
#define LIVE(r) (rstate[r] == RUNNING && rexp[r] > now)
#define EXPIRED(r, l) (rstate[r] == RUNNING && tlane[rtask[r]] == l && rexp[r] <= now)
#define QUEUEDIN(t, l) (tstate[t] == QUEUED && tlane[t] == l)
#define WORK(l) (QUEUEDIN(0, l) || QUEUEDIN(1, l) || QUEUEDIN(2, l) || \
                 EXPIRED(0, l) || EXPIRED(1, l) || EXPIRED(2, l) || EXPIRED(3, l))

/* finish_task.sql: move the task of a run that ended with outcome o */
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

/* reap_lane.sql: abandon the expired runs of lane l */
inline reap_lane(l) {
	d_step {
		i = 0;
		do
		:: i < NR ->
			if
			:: EXPIRED(i, l) -> rstate[i] = ABANDONED; finish_task(rtask[i], ABANDONED, 0)
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		i = 0
	}
}

/* claim.sql's count: the lane's running runs */
inline count(l, n) {
	d_step {
		n = 0; i = 0;
		do
		:: i < NR ->
			if
			:: rstate[i] == RUNNING && tlane[rtask[i]] == l -> n++
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		i = 0
	}
}

/* abandon_owner.sql, as daemon/housekeeping.go abandonEarlier calls it */
inline abandon_owner(d) {
	d_step {
		i = 0;
		do
		:: i < NR ->
			if
			:: rstate[i] == RUNNING && rowner[i] == d && rinst[i] < inst[d] ->
				rstate[i] = ABANDONED; finish_task(rtask[i], ABANDONED, 0)
#ifdef ABANDON_NO_PROOF
			:: rstate[i] == RUNNING && rowner[i] != d ->
				rstate[i] = ABANDONED; finish_task(rtask[i], ABANDONED, 0)
#endif
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		i = 0
	}
}

/* supervisor/loop.go fence: kill a child whose local deadline has passed */
inline fence(r) {
	child[r] = 0; outc[r] = ABANDONED; known[r] = SETTLING
}

/* claim.sql's take and COMMIT: the lowest queued task of the lane, if the
 * count leaves room; the answer may be lost after the commit */
inline take(d) {
	d_step {
		t = 0;
		do
		:: t < NT && !QUEUEDIN(t, cl[d]) -> t++
		:: else -> break
		od
	};
	if
	:: t < NT && ccnt[d] < limit[cl[d]] && nruns < MAXRUNS ->
		r = nruns; nruns++;
		rstate[r] = RUNNING; rtask[r] = t; rowner[r] = d; rinst[r] = inst[d];
		rexp[r] = now + LEASE;
		tstate[t] = TRUNNING; tatt[t]++;
		if
		:: known[r] = PENDING; dl[r] = csent[d] + LEASE - MARGIN; hbsent[r] = csent[d]
		:: skip /* the COMMIT reply is lost: the run is left to expire */
		fi
	:: else -> skip
	fi;
	if
	:: lanelock[cl[d]] == d + 1 -> lanelock[cl[d]] = 0
	:: else -> skip
	fi;
	cphase[d] = 0; cl[d] = 0; ccnt[d] = 0; csent[d] = 0; t = 0; r = 0
}

/* the scheduler's claims and the daemon's life: start-up abandon, pause,
 * crash, restart */
proctype daemon(byte d) {
	byte i, t, r;
end:
	do
	/* claim, begun on a lane with work (claim.sql's candidates) */
	:: atomic { ACTIVE(d) && cphase[d] == 0 && nruns < MAXRUNS && WORK(0) ->
		cl[d] = 0; csent[d] = now; cphase[d] = 1;
#ifdef COUNT_BEFORE_LOCK
		count(0, ccnt[d])
#endif
	}
	:: atomic { ACTIVE(d) && cphase[d] == 0 && nruns < MAXRUNS && WORK(1) ->
		cl[d] = 1; csent[d] = now; cphase[d] = 1;
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
	/* start-up: abandon_owner for the earlier incarnations */
	:: atomic { ACTIVE(d) && abandonDue[d] -> abandon_owner(d); abandonDue[d] = 0 }
	/* the daemon stops (SIGSTOP, a long GC, a starved host) */
	:: atomic { ACTIVE(d) && pauses < MAXPAUSE -> pauses++; paused[d] = 1 }
	/* and goes on: the loop's first pass fences what is past its deadline */
	:: atomic { paused[d] ->
		paused[d] = 0;
		d_step {
			r = 0;
			do
			:: r < NR ->
				if
				:: rowner[r] == d && known[r] == HELD && child[r] && now >= dl[r] -> fence(r)
				:: else -> skip
				fi;
				r++
			:: else -> break
			od;
			r = 0
		} }
	/* crash: the children die with it (parent-death signal), its
	 * transaction rolls back and its lane lock is freed */
	:: atomic { up[d] && crashes < MAXCRASH ->
		crashes++; up[d] = 0; paused[d] = 0;
		d_step {
			r = 0;
			do
			:: r < NR ->
				if
				:: rowner[r] == d && known[r] != NONE ->
					child[r] = 0; known[r] = NONE; hbst[r] = HB_IDLE; dl[r] = 0;
					hbsent[r] = 0; outc[r] = 0; refund[r] = 0
				:: else -> skip
				fi;
				r++
			:: else -> break
			od;
			r = 0
		};
		if
		:: lanelock[0] == d + 1 -> lanelock[0] = 0
		:: else -> skip
		fi;
		if
		:: lanelock[1] == d + 1 -> lanelock[1] = 0
		:: else -> skip
		fi;
		cphase[d] = 0; cl[d] = 0; ccnt[d] = 0; csent[d] = 0 }
	/* restart: a new incarnation, which has the state directory's lock */
	:: atomic { !up[d] -> up[d] = 1; inst[d]++; abandonDue[d] = 1 }
	od
}

/* the supervisor's handle of run r: Start, the child, heartbeat, fence,
 * settle */
proctype handle(byte r) {
	byte i;
end:
	do
	/* supervisor/start.go Start: refuse a claim answered past its deadline */
	:: atomic { known[r] == PENDING && ACTIVE(rowner[r]) ->
		if
		:: now < dl[r] -> child[r] = 1; known[r] = HELD
		:: else -> outc[r] = ABANDONED; refund[r] = 1; known[r] = SETTLING
		fi }
	/* the child exits by itself */
	:: atomic { known[r] == HELD && child[r] ->
		child[r] = 0; known[r] = SETTLING;
		if
		:: outc[r] = COMPLETED
		:: outc[r] = RFAILED
		fi }
	/* supervisor/loop.go send: a heartbeat, due a tick before the local
	 * deadline, sent at hbsent */
	:: atomic { known[r] == HELD && child[r] && ACTIVE(rowner[r]) && hbst[r] == HB_IDLE &&
	            hbsent[r] < now && now + 1 >= dl[r] ->
		hbst[r] = HB_SENT; hbsent[r] = now }
	/* heartbeat.sql, when the request reaches the database */
	:: atomic { hbst[r] == HB_SENT ->
		if
		:: LIVE(r) ->
			rexp[r] = now + LEASE;
			if
			:: tcancel[rtask[r]] -> hbst[r] = HB_CANCEL
			:: else -> hbst[r] = HB_OK
			fi
		:: else ->
#ifdef HEARTBEAT_UNFENCED
			stale = 1; rexp[r] = now + LEASE; hbst[r] = HB_OK
#else
			hbst[r] = HB_LOST
#endif
		fi;
		if
		:: ACTIVE(rowner[r]) -> skip
		:: hbst[r] = HB_IDLE /* the reply is lost; a later pass retries */
		fi;
		/* supervisor/loop.go applyBeats and acked, when the reply comes */
		if
		:: hbst[r] == HB_OK || hbst[r] == HB_CANCEL ->
			dl[r] = hbsent[r] + LEASE - MARGIN;
			if
			:: hbst[r] == HB_CANCEL && known[r] == HELD && child[r] ->
				child[r] = 0; outc[r] = RCANCELLED; known[r] = SETTLING
			:: else -> skip
			fi
		:: hbst[r] == HB_LOST && known[r] == HELD && child[r] -> fence(r)
		:: else -> skip
		fi;
		hbst[r] = HB_IDLE }
	/* supervisor/loop.go check and fence: the local deadline */
	:: atomic { known[r] == HELD && child[r] && ACTIVE(rowner[r]) && now >= dl[r] -> fence(r) }
	/* settle.sql and finish_task.sql; a lost reply is settled again */
	:: atomic { known[r] == SETTLING && ACTIVE(rowner[r]) ->
		if
		:: LIVE(r) -> d_step { rstate[r] = outc[r]; finish_task(rtask[r], outc[r], refund[r]) }
		:: else -> skip /* 'same' or 'lost': nothing changes */
		fi;
		if
		:: known[r] = SETTLED; outc[r] = 0; refund[r] = 0
		:: skip /* the reply is lost */
		fi }
	od
}

/* qd cancel: a queued task is cancelled, a running one marked */
proctype canceller() {
	byte t;
	if
	:: t = 0
	:: t = 1
	fi;
end:
	atomic { tstate[t] == QUEUED || tstate[t] == TRUNNING ->
		if
		:: tstate[t] == QUEUED -> tstate[t] = CANCELLED
		:: else -> tcancel[t] = 1
		fi }
}

/* A tick passes only once every active daemon has fenced the children past
 * their local deadline: the loop's pass is taken to be shorter than a tick. */
#define OVERDUE(r) (known[r] == HELD && child[r] && ACTIVE(rowner[r]) && now >= dl[r])
proctype clock() {
end:
	do
	:: atomic { now < MAXT && !OVERDUE(0) && !OVERDUE(1) && !OVERDUE(2) && !OVERDUE(3) -> now++ }
	od
}

/* The properties, checked in every reachable state. */
#define LIVEOF(t, r) (LIVE(r) && rtask[r] == t)
#define LIVETASK(t) (LIVEOF(t, 0) + LIVEOF(t, 1) + LIVEOF(t, 2) + LIVEOF(t, 3))
#define LIVEIN(l, r) (LIVE(r) && tlane[rtask[r]] == l)
#define LIVELANE(l) (LIVEIN(l, 0) + LIVEIN(l, 1) + LIVEIN(l, 2) + LIVEIN(l, 3))
#define CHILDOF(t, r) (child[r] && rtask[r] == t)
#define CHILDREN(t) (CHILDOF(t, 0) + CHILDOF(t, 1) + CHILDOF(t, 2) + CHILDOF(t, 3))
#define FENCED(r) (!child[r] || LIVE(r) || paused[rowner[r]])
#define RUNOF(t, r) (rstate[r] == RUNNING && rtask[r] == t)
#define HELDTASK(t) ((tstate[t] == TRUNNING) == (RUNOF(t, 0) || RUNOF(t, 1) || RUNOF(t, 2) || RUNOF(t, 3)))

#define EXCLUSIVE (LIVETASK(0) <= 1 && LIVETASK(1) <= 1 && LIVETASK(2) <= 1 && \
	((CHILDREN(0) <= 1 && CHILDREN(1) <= 1 && CHILDREN(2) <= 1) || paused[0] || paused[1]))
#define LANEBOUND (LIVELANE(0) <= limit[0] && LIVELANE(1) <= limit[1])
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
		tlane[0] = 0; tlane[1] = 0; tlane[2] = 1;
		limit[0] = 1; limit[1] = 2;
		up[0] = 1; up[1] = 1; inst[0] = 1; inst[1] = 1;
#ifndef TASKS3
		tstate[2] = DONE; /* two tasks, both in lane 0, unless -DTASKS3 */
#endif
		run monitor();
		run clock();
		run canceller();
		run daemon(0); run daemon(1);
		run handle(0); run handle(1); run handle(2); run handle(3)
	}
}
