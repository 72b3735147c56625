/*
 * redlock's safety-relevant behaviour, for SPIN.
 *
 * Two holders take turns at one lock. Each holder is a `redlock run`: a supervisor (with its
 * heartbeat), the command it runs, and the keeper, the dead man's switch that kills the
 * command at the kill point whatever the supervisor does. The lock lives on one Redis server
 * (NODES 1) or on a quorum of three independent masters (NODES 3). A discrete clock ticks;
 * keys expire by it. Faults are chosen by the checker: a supervisor frozen or starved for any
 * number of ticks (nothing it does is on time), requests and replies lost, requests run late
 * by a stalled server, a server restarted without its data, an operator's forced release.
 *
 * Properties (asserts):
 *   exclusion  a command starts only when no other holder's command runs, unless one of
 *              the two holders' lease was taken away by an override (a forced release, or a
 *              single server that lost its data): such a holder is "overridden" and excluded;
 *   fences     every fence granted is above every fence granted before (overrides
 *              included), and fences strictly increase in the order commands start (but
 *              for a holder overridden between its acquire and its start);
 *   lease      no command runs past its holder's kill point plus the keeper's lateness,
 *              overridden or not: a holder whose lease is lost stops within it.
 *
 * Switches (-D...), each turning one safety mechanism off; the checker must then find a
 * counterexample:
 *   NO_KEEPER       no dead man's switch: only the supervisor kills;
 *   NO_DRIFT        the lease timeline without the drift allowance;
 *   NO_FLOOR        the kill margin without the scheduling floor;
 *   NO_HEAL         quorum renewals do not re-establish a key on a node that lost it;
 *   NO_FENCE_FLOOR  a fence is the counter plus one, not floored by the server's clock.
 *
 * With -DREPLICA (one server) the server has an asynchronous replica, and a failover may
 * promote it with whatever it had received: what the master had not passed on is lost. A grant
 * and a renewal count only once the replica acknowledged them (`--replicas 1`: WAIT after the
 * script; one not acknowledged in time is given back, or does not move the kill point). A
 * failover is not an override: exclusion must hold through it. Its switch:
 *   NO_WAIT         grants and renewals count at once (redlock without --replicas); the
 *                   checker must find the double run after a failover;
 *   NO_RENEWAL_WAIT grants wait for the replica, renewals count at once: a failover loses a
 *                   renewal, and the key lapses on the new master before the kill point.
 * With -DREPLICA -DMINORITY there are two replicas and, instead of a crash, a partition that
 * leaves the old master, the second replica and holder 0 (while its command runs) on one side;
 * the sentinels' side promotes the first replica, and at the heal the old side follows it. A
 * write counts once one replica acknowledged it (`--replicas 1`): the checker must find the
 * double run (the second replica acknowledges the cut holder's renewals); with -DALL
 * (`--replicas 2`, every replica) it must find none.
 *
 * With -DQUEUE the model is another world instead: the fair queue on one server
 * (src/lock/wait/, scripts/acquire_rest.lua, queue.lua). The waiter H keeps one attempt
 * queued on the server behind a blocking pop of its grant list; a release or a notice runs it
 * at once, else it runs when its block runs out, whether H is there to read the answer or not
 * (frozen, dead with its connection open): that run refreshes H's entry, and may grant H the
 * lock. H acts at any moment, however late, or dies (its host gone, its connection left open;
 * or killed, its waiting attempt dropped with its connection); the waiter N arrives at any
 * moment. Its properties:
 *   bound      a dead waiter holds the queue up for at most the documented bound (2 s) after
 *              the release, whatever path its grant took;
 *   held       a grant nobody confirms (a dead or frozen waiter's) holds the queue up for at
 *              most the provisional lease and one refresh (1.5 s);
 *   life       a refresh leaves an entry to lapse no later than a life after its waiter's last
 *              send (a frozen waiter's entry lives 15 s, not its block more);
 *   lease      no waiter starts its command under a lease counted from an attempt sent before
 *              the grant;
 *   waiters    (-DMAX_WAITERS=N, --max-waiters N) never more than N live entries, a thawed
 *              waiter's included;
 *   exclusion  H's command and N's never run at once.
 * Its switches:
 *   NO_PROVISIONAL  a grant to the head of the queue is the whole lease at once, not the
 *                   provisional one that only the waiter's own confirmation extends;
 *   NO_NOTICE       a lock that comes free leaves the front's entries their long life (the
 *                   one they have while the lock is held), instead of putting them on notice;
 *   NO_LIFE_FROM_SEND   an attempt that runs refreshes its entry to now + life, not to a
 *                   life from its send (never less than Q_LIFE from now);
 *   LAPSED_KEEPS_PLACE  an attempt whose entry lapsed but is still in the queue keeps its
 *                   place (its arrival, and no --max-waiters count), instead of joining anew;
 *   HEAD_ONLY_PROVISIONAL  only a grant to the head of a queue is provisional: a waiter whose
 *                   entry lapsed and finds nobody queued is granted the whole lease, counted
 *                   from its attempt's send.
 *
 * With -DQUEUE and -DREPLACE the world is a holder and two --replace waiters, R1 arriving
 * before R2; a replacer that asks the holder to stop supersedes the earlier replacers still
 * waiting, and makes a provisional grantee it displaces give up. Its properties: exclusion,
 * and last: R1 never takes the lock (a grant, or its confirmation) once R2 has asked. Its
 * switches: NO_SUPERSEDE (an earlier replacer keeps its place ahead of the later one) and
 * NO_GIVE_UP (a provisional grantee a replacer displaces confirms its grant all the same).
 *
 * With -DREPLACE (one server) holder 1 is a replacer (`--replace`): its refused acquire asks
 * the holder to stop (acquire.lua marks the holder record), the holder's renewals are refused
 * from then on (extend.lua), and its heartbeat may hear the request on its stop list at once
 * (heartbeat.rs); either way the holder stops its tree as on a lost lease and releases once it
 * is gone, or, frozen, renews no more and its keeper kills at the kill point. The replacer
 * waits and takes the lock only once it is free. Exclusion, fences and lease as above, with
 * holders frozen at any step, and:
 *   replaced   the asked holder's key is gone once the lease the request found has run out
 *              (the replacer waits no longer: docs/guide.md, --replace).
 * Its switches:
 *   NO_RENEW_REFUSAL    the asked holder's renewals still succeed: one that does not hear the
 *                       request (frozen between, its listen failed) keeps the key past the
 *                       lease the request found;
 *   REPLACE_TAKES_OVER  the replacer takes the lock at once when it asks.
 *
 * With -DSEVERAL the model is another world: several keys, all or none (acquire_all.lua), two
 * locks and two or three waiting contenders asking for them in opposite orders; described
 * where it is defined, below. Its properties: exclusion on each key, and no deadlock. Its
 * switches: NO_ONE_ARRIVAL (each queue its own arrival) and ONE_BY_ONE (the keys taken one at
 * a time, the first held while the second is awaited).
 *
 * The constants and the code they come from are listed in docs/design.md ("The safety model").
 */

#ifndef NODES
#define NODES 1
#endif
#define MAJ (NODES / 2 + 1)
#define H 2

/* Bounds of the search. */
#ifndef TURNS
#define TURNS 2          /* runs per holder */
#endif
#ifndef MAXFAULTS
#define MAXFAULTS 1      /* lost requests or replies */
#endif
#ifndef MAXSTALLS
#define MAXSTALLS 1      /* requests a stalled server runs late */
#endif
#ifndef MAXRESTARTS
#define MAXRESTARTS 1    /* server restarts that lose the data */
#endif
#ifndef MAXFORCES
#define MAXFORCES 1      /* forced releases (release --force) */
#endif
#ifndef MAXFAILOVERS
#define MAXFAILOVERS 1   /* -DREPLICA: failovers to the replica */
#endif

/* The lease, in ticks (lease.rs); one tick is ttl/12. */
#define TTL 12
#define INTERVAL 4       /* Lease::interval: ttl/3 */
#ifdef NO_DRIFT
#define DRIFT 0
#else
#define DRIFT 1          /* lease::drift: ttl/100 + 2 ms */
#endif
#ifdef NO_FLOOR
#define FLOOR 0
#else
#define FLOOR 1          /* lease::SCHED_FLOOR */
#endif
#define MARGIN (DRIFT + FLOOR)   /* lease::margin */
#define KILL_AFTER 1     /* --kill-after: the longest accepted, ttl/3 - drift - margin */

/* The world the lease must survive. */
#define FAST 1           /* a server's clock runs fast: keys expire up to one drift early */
#define LATE 1           /* the keeper kills up to one scheduling floor after its kill point */

/* Lease::timeline, as ages: ticks since the acquire or renewal it counts from was sent. */
#define DEADLINE_AGE (TTL - DRIFT)
#define KILL_AGE (DEADLINE_AGE - MARGIN)
#define TERM_AGE (KILL_AGE - KILL_AFTER)
#define AGE_CAP (KILL_AGE + LATE + 1)   /* older ages are all alike */

/* What a request to one node became. */
#define OK 0             /* ran, and the reply came in time */
#define NOREPLY 1        /* ran, the reply was lost or late (a timeout) */
#define LOST 2           /* never ran (connection broke, or the server restarted) */
#define STALL 3          /* runs later, once a stalled server resumes; a timeout meanwhile */

/* Replies to a renewal. */
#define NONE 0
#define YES 1
#define MISSING 2
#define TAKEN 3
#define STOPPED 4        /* -DREPLACE: the holder was asked to stop; not renewed */

/* Requests a stalled server runs late. */
#define P_ACQ 1          /* acquire, with the caller's undo queued behind it (lock::abandon) */
#define P_EXT 2
#define P_HEAL 3
#define P_REL 4
#define P_ACQ_KEEP 5     /* acquire of a quorum that was taken: the key is left for us */

#if !defined(QUEUE) && !defined(SEVERAL)
#if defined(REPLACE) && NODES > 1
#error "--replace is one server's (several --url are refused)"
#endif
/* Time is kept as ages and countdowns, which the clock moves: no absolute time, so the
   search covers runs of any length. */
byte server_clock = 1;   /* the servers' clocks in "microseconds": they agree, and move on
                            between any two acquires */
#ifdef MINORITY
#define SERVERS (NODES + 1)   /* the old master, cut off, at index OLD */
#else
#define SERVERS NODES
#endif
byte key[SERVERS];       /* the lock key: a token, 0 when absent */
byte left[SERVERS];      /* ticks until it expires */
byte ctr[SERVERS];       /* the fence counter */

bool running[H];         /* the holder's command (its whole tree) runs */
byte cur[H];             /* the token of the holder's current turn, 0 between turns */
bool overridden[H];      /* its key was removed by a forced release or a lost single server */
bool armed[H];           /* the keeper is armed */
bool fired[H];
bool dismissed[H];
byte age[H];             /* age of the holder's current timeline (run.rs, heartbeat.rs): the
                            keeper's kill point is the same timeline's, moved by the same store */
bool ps[H];              /* a confirmed renewal not yet stored (the heartbeat may be frozen) */
byte psage[H];           /* its age */
byte last_fence;         /* the fence of the command started last */
byte last_granted;       /* the fence granted last */

byte faults, stalls, restarts, forces;
bool settled = 1;        /* quorum: the next restart may come (see Faults) */

#ifdef REPLICA
/* The replica of the one server (-DREPLICA): its copy of the lock key, the key's expiry and
   the fence counter, as far as replication has brought them. The key's expiry is absolute
   (Redis replicates PEXPIREAT), so the copy ages with the master's. */
byte rkey;
byte rleft;
byte rctr;
byte failovers;

/* The replica receives everything the master wrote so far (replication is a stream: whatever
   it has is all the master wrote up to some moment). WAIT answers once it has. */
inline replicate() {
  rkey = key[0]; rleft = left[0]; rctr = ctr[0]
#ifdef MINORITY
  ; r2key = key[0]; r2left = left[0]; r2ctr = ctr[0]
#endif
}

#ifdef MINORITY
/* -DMINORITY: two replicas, R1 (the one above) and R2, and a partition instead of a crash.
   The partition cuts the old master, R2 and one holder (`cut`) off the sentinels' side, which
   promotes R1 with what it had; the cut holder's requests go on reaching the old master (at
   index OLD), and R2 replicates from it. At the heal the old master's writes since the cut
   are lost, and R2 (and the old master, now a replica) follow the new master. --replicas 1
   counts a write once one replica acknowledged it; -DALL: both. */
#define OLD NODES
byte r2key;
byte r2left;
byte r2ctr;
bool split;
byte cut;
byte partitions;
#define SIDE(h, i) ((split && (h) == cut) -> OLD : (i))

inline acknowledged_by(h, acked) {
  if
  :: !split -> replicate(); acked = 1
  :: split && h == cut ->
#ifdef ALL
     acked = 0        /* R1 is on the other side */
#else
     r2key = key[OLD]; r2left = left[OLD]; r2ctr = ctr[OLD]; acked = 1
#endif
  :: split && h != cut -> acked = 0   /* the promoted R1 has no replica on its side */
  :: faults < MAXFAULTS -> faults++; acked = 0
  fi
}
#endif

/* --replicas 1: a write counts once the replica acknowledged it (WAIT); or the wait timed out
   and it does not count (`acked` 0). Without it (NO_WAIT), it counts at once. */
#if defined(MINORITY)
#define acknowledged(acked) acknowledged_by(h, acked)
#elif defined(NO_WAIT)
#define acknowledged(acked) acked = 1
#else
inline acknowledged(acked) {
  if
  :: replicate(); acked = 1
  :: faults < MAXFAULTS -> faults++; acked = 0
  fi
}
#endif
#if defined(NO_WAIT) || defined(NO_RENEWAL_WAIT)
#define renewal_acknowledged(acked) acked = 1
#else
#define renewal_acknowledged(acked) acknowledged(acked)
#endif
#endif

#ifndef SIDE
#define SIDE(h, i) (i)
#endif

#ifdef REPLACE
/* --replace (-DREPLACE): holder 1 is a replacer. Its refused acquire asks the holder to stop
   (acquire.lua): the holder record gets 'stop', which its renewals then refuse (extend.lua),
   and the request is pushed to the holder's stop list, which its heartbeat may hear at once
   (heartbeat.rs). */
#define REPLACER(t) (t > TURNS)   /* holder 1's tokens */
byte stop_tok;           /* the token whose holder record says 'stop', 0 when none */
byte asked_left;         /* ticks the asked holder's key had left when the request came: the
                            lease the request found */
#ifdef NO_RENEW_REFUSAL
#define REFUSED(t) false
#else
#define REFUSED(t) (stop_tok == t)
#endif
#ifdef REPLACE_TAKES_OVER
#define TAKES_OVER(n, t) (REPLACER(t) && key[n] != t)
#else
#define TAKES_OVER(n, t) false
#endif
#else
#define REFUSED(t) false
#define TAKES_OVER(n, t) false
#endif

byte pend_op[H * NODES]; /* a request a stalled node runs late, per holder and node */
byte pend_tok[H * NODES];
byte pend_fence[H * NODES];

/* ---- the scripts, as each node runs them (src/scripts/*.lua) ---- */

/* acquire.lua: SET NX PX; fence = max(counter + 1, TIME in microseconds). f: fence, 0 busy */
inline acquire(n, t, f) {
  if
  :: key[n] == 0 || TAKES_OVER(n, t) ->
     f = ctr[n] + 1;
#ifndef NO_FENCE_FLOOR
     if
     :: f < server_clock -> f = server_clock
     :: else
     fi;
#endif
     ctr[n] = f;
     key[n] = t;
     left[n] = TTL - FAST
  :: else ->
     f = 0;
#ifdef REPLACE
     /* --replace: a refused replacer asks the holder to stop, once per holder */
     if
     :: REPLACER(t) && key[n] != t && stop_tok != key[n] ->
        stop_tok = key[n]; asked_left = left[n]
     :: else
     fi
#endif
  fi;
  server_clock++
}

/* extend.lua: compare-and-pexpire, never shortening. r: YES, MISSING, TAKEN or STOPPED (a
   holder asked to stop is not renewed) */
inline extend(n, t, r) {
  if
  :: key[n] == t && REFUSED(t) -> r = STOPPED
  :: key[n] == t && !REFUSED(t) ->
     if
     :: left[n] < TTL - FAST -> left[n] = TTL - FAST
     :: else
     fi;
     r = YES
  :: key[n] == 0 -> r = MISSING
  :: else -> r = TAKEN
  fi
}

/* heal.lua: write our key back where it is missing, and the fence counter up to ours. */
inline heal(n, t, fn, r) {
  if
  :: key[n] == t -> r = YES
  :: key[n] == 0 ->
     if
     :: ctr[n] < fn -> ctr[n] = fn
     :: else
     fi;
     key[n] = t;
     left[n] = TTL - FAST;
     r = YES
  :: else -> r = TAKEN
  fi
}

/* raise_fence.lua */
inline raise(n, fn) {
  if
  :: ctr[n] < fn -> ctr[n] = fn
  :: else
  fi
}

/* release.lua (and the undo of an acquire): compare-and-delete. */
inline release(n, t) {
  if
  :: key[n] == t -> key[n] = 0
  :: else
  fi
}

/* ---- the network ---- */

inline network(o, h, n) {
  if
  :: o = OK
  :: faults < MAXFAULTS -> faults++; o = NOREPLY
  :: faults < MAXFAULTS -> faults++; o = LOST
  :: stalls < MAXSTALLS && pend_op[h * NODES + n] == 0 -> stalls++; o = STALL
  fi
}

/* a request whose fate is decided at once: lost or run, never run late */
inline network_now(o) {
  if
  :: o = OK
  :: faults < MAXFAULTS -> faults++; o = NOREPLY
  :: faults < MAXFAULTS -> faults++; o = LOST
  fi
}

inline later(h, n, op, t, fn) {
  pend_op[h * NODES + n] = op;
  pend_tok[h * NODES + n] = t;
  pend_fence[h * NODES + n] = fn
}

/* ---- the keeper (keeper.rs) ---- */

/* The keeper has not killed although its kill point passed LATE ticks ago: time cannot go on
   without it (its timer fires; at real-time priority, or as an ordinary process, it runs
   within the scheduling floor). */
#ifdef NO_KEEPER
#define OVERDUE(h) false
#else
#define OVERDUE(h) (armed[h] && !dismissed[h] && !fired[h] && age[h] >= KILL_AGE + LATE)

proctype Keeper(byte h) {
end:
  do
  :: atomic {
       armed[h] && !dismissed[h] && !fired[h] && age[h] >= KILL_AGE ->
       fired[h] = 1;       /* tree.fired: a command spawned from now on does not start */
       running[h] = 0      /* freeze, then SIGKILL to the whole tree */
     }
  od
}
#endif

/* ---- the clock, and Redis expiring keys by it ---- */

/* Only the ages in use grow; the others stay 0, so that states that differ only in an
   unused age are one state. */
inline tick(h) {
  if
  :: cur[h] != 0 && age[h] < AGE_CAP -> age[h]++
  :: else
  fi;
  if
  :: ps[h] && psage[h] < AGE_CAP -> psage[h]++
  :: else
  fi;
  /* lease: no command runs past its kill point plus the keeper's lateness */
  assert(!running[h] || age[h] <= KILL_AGE + LATE)
}

active proctype Clock() {
  byte n;
end:
  do
  :: atomic {
       !OVERDUE(0) && !OVERDUE(1) ->
       tick(0);
       tick(1);
       n = 0;
       do
       :: n < SERVERS ->
          if
          :: key[n] != 0 ->
             left[n]--;
             if
             :: left[n] == 0 -> key[n] = 0
             :: else
             fi
          :: else
          fi;
          n++
       :: else -> break
       od;
       n = 0;
#ifdef REPLACE
       /* replaced: the request only shortens the asked holder's life; its key is gone once
          the lease the request found has run out (the replacer waits no longer) */
       if
       :: stop_tok != 0 && key[0] == stop_tok -> asked_left--; assert(asked_left > 0)
       :: stop_tok != 0 && key[0] != stop_tok -> stop_tok = 0; asked_left = 0
       :: else
       fi;
#endif
#ifdef REPLICA
       if
       :: rkey != 0 ->
          rleft--;
          if
          :: rleft == 0 -> rkey = 0
          :: else
          fi
       :: else
       fi;
#endif
#ifdef MINORITY
       if
       :: r2key != 0 ->
          r2left--;
          if
          :: r2left == 0 -> r2key = 0
          :: else
          fi
       :: else
       fi;
#endif
       skip
     }
  od
}

#ifdef REPLICA
/* ---- asynchronous replication: the replica catches up at any moment, or not ---- */

active proctype Replication() {
end:
  do
#ifdef MINORITY
  :: atomic { !split && (rkey != key[0] || rleft != left[0] || rctr != ctr[0]) ->
       rkey = key[0]; rleft = left[0]; rctr = ctr[0] }
  :: atomic { !split && (r2key != key[0] || r2left != left[0] || r2ctr != ctr[0]) ->
       r2key = key[0]; r2left = left[0]; r2ctr = ctr[0] }
  :: atomic { split && (r2key != key[OLD] || r2left != left[OLD] || r2ctr != ctr[OLD]) ->
       r2key = key[OLD]; r2left = left[OLD]; r2ctr = ctr[OLD] }
#else
  :: atomic { (rkey != key[0] || rleft != left[0] || rctr != ctr[0]) -> replicate() }
#endif
  od
}
#endif

/* ---- a stalled server resuming: it runs what was queued, in any order ---- */

inline run_late(k) {
  atomic {
    pend_op[k] != 0 ->
    if
    :: pend_op[k] == P_ACQ -> acquire(k % NODES, pend_tok[k], f); release(k % NODES, pend_tok[k])
    :: pend_op[k] == P_ACQ_KEEP -> acquire(k % NODES, pend_tok[k], f)
    :: pend_op[k] == P_EXT -> extend(k % NODES, pend_tok[k], r)
    :: pend_op[k] == P_HEAL -> heal(k % NODES, pend_tok[k], pend_fence[k], r)
    :: pend_op[k] == P_REL -> release(k % NODES, pend_tok[k])
    fi;
    pend_op[k] = 0; pend_tok[k] = 0; pend_fence[k] = 0;
    r = 0; f = 0
  }
}

active proctype Stalled() {
  byte r, f;
end:
  do
  :: run_late(0)
  :: run_late(1)
#if NODES > 1
  :: run_late(2)
  :: run_late(3)
  :: run_late(4)
  :: run_late(5)
#endif
  od
}

/* ---- the operator and the servers' restarts ---- */

inline override_holders() {
  /* whoever held a key that was just removed lost its lease by an override */
  i = 0;
  do
  :: i < NODES ->
     if
     :: key[i] != 0 && key[i] == cur[0] -> overridden[0] = 1
     :: key[i] != 0 && key[i] == cur[1] -> overridden[1] = 1
     :: else
     fi;
     i++
  :: else -> break
  od
}

active proctype Faults() {
  byte i, n;
end:
  do
  :: atomic {
       /* release --force: the key is deleted on every node, whoever holds it */
       forces < MAXFORCES ->
       forces++;
       override_holders();
       i = 0;
       do
       :: i < NODES -> key[i] = 0; left[i] = 0; i++
       :: else -> break
       od;
       i = 0
     }
  :: atomic {
       /* a restart without persistence: the node forgets its keys and its fence counter,
          and the requests queued on it. A quorum restarts one node at a time, each only
          when the last renewal came after the last restart and the last acquire, reached
          every node and found no other holder's key there (docs/design.md, "Integrity":
          one at a time, each only after a renewal that reached every node). */
       restarts < MAXRESTARTS && (NODES == 1 || settled) ->
       restarts++;
       settled = 0;
       n = 0;
       do
       :: n < NODES - 1 -> n++
       :: break
       od;
       if
       :: NODES == 1 -> override_holders()
       :: else
       fi;
       key[n] = 0;
       left[n] = 0;
       ctr[n] = 0;
       i = 0;
       do
       :: i < H -> pend_op[i * NODES + n] = 0; pend_tok[i * NODES + n] = 0; pend_fence[i * NODES + n] = 0; i++
       :: else -> break
       od;
       i = 0; n = 0
     }
#ifdef REPLICA
  :: atomic {
       /* a failover: the replica becomes the master with what it had received (the old
          master's last writes are lost, and so are the requests queued on it); a new replica
          syncs from it. Not an override: the lease must survive it. */
       failovers < MAXFAILOVERS ->
       failovers++;
       key[0] = rkey; left[0] = rleft; ctr[0] = rctr;
       i = 0;
       do
       :: i < H -> pend_op[i * NODES] = 0; pend_tok[i * NODES] = 0; pend_fence[i * NODES] = 0; i++
       :: else -> break
       od;
       i = 0
     }
#endif
#ifdef MINORITY
  :: atomic {
       /* the partition: the old master, R2 and one holder on one side; the sentinels
          promote R1 with what it had */
       /* while holder 0's command runs: a cut holder that holds nothing is a crash's case */
       !split && partitions < 1 && running[0] ->
       partitions++;
       split = 1;
       cut = 0;         /* holder 0: the holders are alike but for their order */
       key[OLD] = key[0]; left[OLD] = left[0]; ctr[OLD] = ctr[0];
       key[0] = rkey; left[0] = rleft; ctr[0] = rctr
     }
  :: atomic {
       /* the heal: the old master becomes the new one's replica; its writes since the cut
          are lost */
       split -> split = 0; key[OLD] = 0; left[OLD] = 0; ctr[OLD] = 0
     }
#endif
  od
}

/* ---- a holder: redlock run (commands/run/, heartbeat.rs, nodes/majority.rs) ---- */

#define STOP_RUNNING 0
#define STOP_TERM 1      /* SIGTERM sent; SIGKILL to follow */
#define STOP_KILLED 2

proctype Holder(byte h) {
  byte turn, tok, stop, got, yes, refused, answered, i, o, r, fence, f;
  bool hblost;
  byte waitfor;            /* -DREPLACE: the asked holder's token the replacer waits out */
  byte res[NODES];
  byte acq[NODES];

  do
  :: turn == TURNS -> break
  :: turn < TURNS ->
#ifdef REPLACE
     /* a replacer that asked waits until the asked holder's key is gone (released, or
        expired): its attempts meanwhile are refused and change nothing */
     atomic { waitfor == 0 || key[0] != waitfor -> waitfor = 0 }
#endif
     /* ---- acquire (nodes/majority.rs Nodes::acquire): one request to every node ---- */
     atomic {
       tok = h * TURNS + turn + 1;
       cur[h] = tok; overridden[h] = 0;
       armed[h] = 0; fired[h] = 0; dismissed[h] = 0;
       hblost = 0; stop = STOP_RUNNING;
       age[h] = 0; ps[h] = 0; psage[h] = 0;
       got = 0; fence = 0;
       i = 0;
       do
       :: i < NODES ->
          network(o, h, i);
          acq[i] = o;
          if
          :: o == OK ->
             acquire(SIDE(h, i), tok, f);
             if
             :: f > 0 -> got++; if :: f > fence -> fence = f :: else fi
             :: else
             fi;
#ifdef REPLICA
             /* WAIT behind the script: a grant the replica did not acknowledge in time is
                given back (the undo below) */
             if
             :: f > 0 ->
                acknowledged(r);
                if
                :: r == 0 -> got = 0
                :: else
                fi
             :: else
             fi
#endif
          :: o == NOREPLY -> acquire(SIDE(h, i), tok, f)
          :: o == LOST
          :: o == STALL -> later(h, i, P_ACQ, tok, 0)
          fi;
          i++
       :: else -> break
       od;
       /* a quorum: raise every node's counter to the fence (raise_fence.lua); a majority
          must take it */
       if
       :: NODES > 1 && got >= MAJ ->
          r = 0; i = 0;
          do
          :: i < NODES ->
             network_now(o);
             if
             :: o == OK -> raise(i, fence); r++
             :: o == NOREPLY -> raise(i, fence)
             :: o == LOST
             fi;
             i++
          :: else -> break
          od;
          if
          :: r < MAJ -> got = 0
          :: else
          fi
       :: else
       fi;
       if
       :: got >= MAJ ->
          /* every fence granted is above every fence granted before, overrides included */
          assert(fence > last_granted);
          last_granted = fence;
          settled = 0;
          /* a node that took the key late holds it for us (nodes/majority.rs) */
          i = 0;
          do
          :: i < NODES ->
             if
             :: pend_op[h * NODES + i] == P_ACQ -> pend_op[h * NODES + i] = P_ACQ_KEEP
             :: else
             fi;
             i++
          :: else -> break
          od
       :: else ->
          /* not taken: undo what landed, on every node (lock::abandon behind a request that
             timed out; lock::undo on the others, which may be lost too) */
          i = 0;
          do
          :: i < NODES ->
             if
             :: acq[i] == NOREPLY -> release(SIDE(h, i), tok)
             :: else ->
                network_now(o);
                if
                :: o == OK || o == NOREPLY -> release(SIDE(h, i), tok)
                :: o == LOST
                fi
             fi;
             i++
          :: else -> break
          od;
          cur[h] = 0;
#ifdef REPLACE
          if
          :: REPLACER(tok) && stop_tok != 0 && key[0] == stop_tok ->
             waitfor = stop_tok   /* asked: it waits and tries again, in the same turn */
          :: else -> turn++
          fi
#else
          turn++
#endif
       fi;
       i = 0; o = 0; f = 0; r = 0; got = 0;
       acq[0] = 0;
#if NODES > 1
       acq[1] = 0; acq[2] = 0;
#endif
     }
     if
     :: cur[h] == 0 -> goto next_turn   /* busy or failed: next turn */
     :: else
     fi;

     /* ---- run.rs: a grant that came after term_at runs nothing; else arm, spawn ---- */
     atomic {
       if
       :: age[h] >= TERM_AGE ->
          i = 0;
          do
          :: i < NODES -> release(SIDE(h, i), tok); i++
          :: else -> break
          od;
          i = 0;
          cur[h] = 0; turn++;
          goto next_turn
       :: else ->
          armed[h] = 1   /* keeper.arm() before the spawn */
       fi
     }
     atomic {
       if
       :: fired[h] ->
          /* child.rs: the keeper fired before the command could start; it does not */
          skip
       :: else ->
          /* exclusion: nobody else's command runs, unless one of the two was overridden */
          assert(!running[1 - h] || overridden[1 - h] || overridden[h]);
          /* fences grow in the order commands start; a holder overridden between its
             acquire and its start may start after a newer holder (its fence is the older) */
          assert(fence > last_fence || overridden[h]);
          last_fence = fence;
          running[h] = 1
       fi
     }

     /* ---- supervise: the heartbeat, the supervisor, the command ---- */
     do
     :: atomic {
          /* heartbeat: renew an interval after the last confirmed renewal, or retry after a
             failure (at any time: retries come every interval/10, well within a tick), and
             only before term_at (heartbeat.rs) */
          !hblost && !ps[h] && age[h] >= INTERVAL && age[h] < TERM_AGE ->
          psage[h] = 0; yes = 0; refused = 0; answered = 0;
          i = 0;
          do
          :: i < NODES ->
             network(o, h, i);
             res[i] = NONE;
             if
             :: o == OK -> extend(SIDE(h, i), tok, r); res[i] = r; answered++;
#ifdef REPLICA
                /* WAIT behind the script: a renewal the replica did not acknowledge in time
                   does not count */
                if
                :: r == YES ->
                   renewal_acknowledged(r);
                   if
                   :: r == 0 -> res[i] = NONE
                   :: else
                   fi
                :: else
                fi
#endif
             :: o == NOREPLY -> extend(SIDE(h, i), tok, r)
             :: o == LOST
             :: o == STALL -> later(h, i, P_EXT, tok, 0)
             fi;
             if
             :: res[i] == YES -> yes++
             :: else
             fi;
             i++
          :: else -> break
          od;
#ifndef NO_HEAL
          /* a quorum node that lost the key while a majority renewed it is healed */
          if
          :: NODES > 1 && yes >= MAJ ->
             i = 0;
             do
             :: i < NODES ->
                if
                :: res[i] == MISSING ->
                   network(o, h, i);
                   if
                   :: o == OK -> heal(SIDE(h, i), tok, fence, r); res[i] = r
                   :: o == NOREPLY -> heal(SIDE(h, i), tok, fence, r); res[i] = NONE; answered--
                   :: o == LOST -> res[i] = NONE; answered--
                   :: o == STALL -> later(h, i, P_HEAL, tok, fence); res[i] = NONE; answered--
                   fi
                :: else
                fi;
                i++
             :: else -> break
             od
          :: else
          fi;
#endif
          yes = 0; i = 0;
          do
          :: i < NODES ->
             if
             :: res[i] == YES -> yes++
             :: res[i] == MISSING || res[i] == TAKEN || res[i] == STOPPED -> refused++
             :: else
             fi;
             i++
          :: else -> break
          od;
          if
          :: yes >= MAJ ->
             ps[h] = 1;   /* confirmed: stored below, maybe after a freeze */
             /* the restart rule: this renewal reached every node, and no node holds
                another holder's key (a node lacking the key is fine: healing's job) */
             settled = (answered == NODES);
             i = 0;
             do
             :: i < NODES -> if :: res[i] == TAKEN -> settled = 0 :: else fi; i++
             :: else -> break
             od
          :: yes < MAJ && NODES - refused < MAJ -> hblost = 1; settled = 0   /* lost */
          :: else -> settled = 0                                /* failed: retry */
          fi;
          i = 0; o = 0; r = 0; yes = 0; refused = 0; answered = 0;
          res[0] = 0;
#if NODES > 1
          res[1] = 0; res[2] = 0;
#endif
        }
     :: atomic {
          /* heartbeat: store the confirmed timeline, move the keeper's kill point */
          ps[h] ->
          age[h] = psage[h];   /* a newer timeline; the keeper's kill point moves with it */
          ps[h] = 0; psage[h] = 0
        }
#ifdef REPLACE
     :: atomic {
          /* heartbeat: the request on its stop list, heard between renewals (or never: a
             frozen or starved heartbeat, a listen that failed; then a renewal is refused):
             the tree is stopped as on a lost lease */
          !hblost && stop_tok == tok -> hblost = 1
        }
#endif
     :: atomic {
          /* supervisor: lease news, term_at, kill_at (run.rs supervise) */
          stop == STOP_RUNNING && (hblost || age[h] >= TERM_AGE) ->
          if
          :: age[h] >= KILL_AGE ->
             running[h] = 0; stop = STOP_KILLED
          :: else ->
             stop = STOP_TERM
          fi
        }
     :: atomic {
          /* supervisor: SIGKILL once the grace after SIGTERM is over: at kill_at, or,
             after a certain loss, kill_after after SIGTERM (when that comes sooner; the
             model lets it come at any time: the command may have exited on SIGTERM anyway) */
          stop == STOP_TERM && (age[h] >= KILL_AGE || hblost) ->
          running[h] = 0; stop = STOP_KILLED
        }
     :: atomic {
          /* the command ends by itself, or on SIGTERM */
          running[h] -> running[h] = 0
        }
     :: !running[h] -> break   /* the tree is empty */
     od;

     /* ---- dismiss the keeper, stop the heartbeat, release on every node ---- */
     atomic {
       dismissed[h] = 1;
       i = 0;
       do
       :: i < NODES ->
          network(o, h, i);
          if
          :: o == OK || o == NOREPLY -> release(SIDE(h, i), tok)
          :: o == LOST
          :: o == STALL -> later(h, i, P_REL, tok, 0)
          fi;
          i++
       :: else -> break
       od;
       cur[h] = 0; turn++;
       i = 0; o = 0; stop = 0; hblost = 0
     }
next_turn:
     atomic {
       i = 0; o = 0; tok = 0; fence = 0;
       armed[h] = 0; age[h] = 0; ps[h] = 0; psage[h] = 0
     }
  od
}

init {
  atomic {
    run Holder(0);
    run Holder(1);
#ifndef NO_KEEPER
    run Keeper(0);
    run Keeper(1);
#endif
  }
}
#endif

#if defined(QUEUE) && !defined(SEVERAL) && !defined(REPLACE)
/* ---- the fair queue on one server (-DQUEUE) ----
   One tick is lock::QUEUE_REFRESH (0.5 s). A holder releases at any moment, or its key
   expires. The waiter H, queued first, keeps one attempt queued on the server behind a
   blocking pop of its grant list (lock::send_after_grant): the attempt runs when a release or
   a notice pushes to the list, or when its block runs out, whether or not H is there to read
   the answer (src/lock/wait/on_server.rs). H reads each answer and sends its next attempt at
   any moment, however late (a waiter frozen and thawed, starved); or it dies and never acts
   again: its host gone with its connection open (the attempt it left on the server still
   runs), or killed (the attempt goes with the connection). The waiter N arrives at any moment
   (a first attempt, which takes a free lock outright when nobody is queued), is alive, and
   tries at least once a refresh while the lock is free (its attempts while the lock is held
   change nothing but its own entry's life, which it always keeps). */
#define Q_TTL 20          /* --ttl 10s */
#ifdef NO_PROVISIONAL
#define Q_PROV Q_TTL
#else
#define Q_PROV 2          /* lock::PROVISIONAL: 1 s */
#endif
#define Q_LIFE 3          /* lock::QUEUE_ENTRY_LIFE: 1.5 s, at the front of a free lock */
#define Q_FAR_LIFE 30     /* an entry's life elsewhere: 15 s */
#define Q_FAST 1          /* the front's pace at a free lock, lock::QUEUE_REFRESH: its block */
#define Q_FAR 10          /* lock::QUEUE_FAR_REFRESH, 5 s: the longest block */
#define Q_BOUND 4         /* the documented bound after a release: 2 s */
#define Q_HELD (Q_PROV + 1)   /* a grant nobody confirms holds the queue up for 1.5 s */
#ifndef MAX_WAITERS
#define MAX_WAITERS 0     /* --max-waiters N; 0: unbounded */
#endif
#define Q_HOLDER 1
#define Q_H 2
#define Q_N 3

/* The answer to H's last attempt, not yet read. */
#define A_NONE 0
#define A_BUSY 1          /* refused; it stays queued */
#define A_PROV 2          /* granted, provisional: its confirmation makes it the whole lease */
#define A_FULL 3          /* granted the whole lease, counted from the attempt's send */
#define A_FULLQ 4         /* refused and not queued: --max-waiters N live entries are */

/* N's life */
#define N_AWAY 0          /* not arrived yet */
#define N_WAITS 1         /* queued */
#define N_RUNS 2
#define N_GONE 3

byte qkey = Q_HOLDER;     /* who holds the key (0: free) */
byte qleft = Q_TTL;       /* ticks until it expires */
bool q_holds = 1;         /* the holder's command runs, its heartbeat renewing the key */
bool released;            /* the holder released */
bool h_in = 1;            /* H's entry is in the queue (the sorted set), lapsed or not */
byte h_left = Q_FAR_LIFE; /* ticks until it lapses unless refreshed; 0: lapsed, skipped by
                             live_head, which removes it */
bool h_first = 1;         /* H's arrival is before N's (when both are queued) */
bool h_pending = 1;       /* H's attempt waits on the server behind its grant list */
byte h_sa;                /* ticks since that attempt was sent */
byte h_block = Q_FAR;     /* how long it waits on the server for a push */
byte h_answer;            /* what H has to read */
byte h_next = Q_FAR;      /* the block of H's next attempt, from its last refusal */
bool h_early;             /* H's grant is the whole lease, counted from an attempt sent before
                             the grant */
bool h_holdup;            /* the key went to H, which has not confirmed it, and N has not
                             taken the lock since */
bool h_dead;              /* H will never act again */
bool h_running, h_ran, h_gone;
byte n_state;
bool n_idle;              /* a tick of a free lock went by since N's last attempt */
byte waited;              /* ticks since the release, while N waits */
byte held_up;             /* ticks N waited since the key went to H unconfirmed */

#define H_LIVE (h_in && h_left > 0)
#define HEAD_IS_H (h_in && (h_first || n_state != N_WAITS))
#define HEAD_IS_N (n_state == N_WAITS && !(h_in && h_first))
#define LIVE_COUNT (H_LIVE + (n_state == N_WAITS))

/* queue.lua live_head: a lapsed entry is removed */
inline q_live_head() {
  if
  :: h_in && h_left == 0 -> h_in = 0
  :: else
  fi
}

/* queue.lua notice: the lock is free, and the front (both waiters) is put on notice: an entry
   that would live longer is cut to Q_LIFE, and its waiter pushed; with `woken` (a release)
   the head is pushed anyway. A push runs H's attempt waiting on the server, right after the
   script (the caller runs it, on `h_pushed`); a push to a list nobody pops only makes H's
   next attempt come sooner, which the model leaves out. N's entry is kept by N. */
bool h_pushed;
inline q_notice(woken) {
#ifndef NO_NOTICE
  if
  :: h_in && h_left > Q_LIFE -> h_left = Q_LIFE; h_pushed = h_pending
  :: else
  fi;
#endif
  if
  :: woken && HEAD_IS_H -> h_pushed = h_pending
  :: else
  fi
}

/* acquire_rest.lua, for H's attempt that waited on the server: it is not H's first (which
   joined the queue), and it was sent h_sa ticks ago with a block of h_block. */
inline q_attempt_h() {
  h_pending = 0;
#ifndef LAPSED_KEEPS_PLACE
  /* a lapsed entry is not a place: it is taken out, and the attempt joins anew */
  q_live_head();
#endif
  if
  :: qkey == 0 && HEAD_IS_N -> q_notice(false); h_pushed = 0   /* H's own push: no attempt left */
  :: else
  fi;
  if
  :: qkey == 0 && !HEAD_IS_N ->
     /* H heads the queue, or nobody is queued: granted, and out of the queue */
     qkey = Q_H;
#ifdef HEAD_ONLY_PROVISIONAL
     /* provisional only for the head of a queue: nobody queued, the whole lease */
     if
     :: h_in -> qleft = Q_PROV; h_answer = A_PROV
     :: else -> qleft = Q_TTL; h_answer = A_FULL; h_early = (h_sa > 0)
     fi;
#else
     /* every grant to an attempt that is not a waiter's first is provisional */
     qleft = Q_PROV; h_answer = A_PROV;
#endif
     h_in = 0;
     h_holdup = 1; held_up = 0
  :: else ->
     if
     :: MAX_WAITERS > 0 && !h_in && LIVE_COUNT >= MAX_WAITERS ->
        /* --max-waiters: a waiter not queued joins only while fewer live entries are */
        h_answer = A_FULLQ
     :: else ->
        if
        :: !h_in -> h_in = 1; h_first = (n_state != N_WAITS)   /* joins at the back */
        :: else
        fi;
        /* its entry lives Q_LIFE at the front of a free lock, Q_FAR_LIFE elsewhere, counted
           from the attempt's send (queue.lua lapse_at: sent + life, never less than Q_LIFE
           from now, which a living waiter's next attempt beats) */
        if
        :: qkey == 0 ->
           h_left = Q_LIFE;
           /* life: the entry lapses no later than the longest life after its waiter's last
              send (--max-waiters' 15 s) */
           assert(h_left + h_sa <= Q_FAR_LIFE);
           h_next = Q_FAST
        :: else ->
#ifdef NO_LIFE_FROM_SEND
           h_left = Q_FAR_LIFE;
#else
           if
           :: Q_FAR_LIFE > h_sa + Q_LIFE -> h_left = Q_FAR_LIFE - h_sa
           :: else -> h_left = Q_LIFE
           fi;
#endif
           assert(h_left + h_sa <= Q_FAR_LIFE);
           /* on_server.rs block_after: at the front of a held lock, until it expires */
           if :: qleft < Q_FAR -> h_next = qleft :: else -> h_next = Q_FAR fi
        fi;
        h_answer = A_BUSY
     fi
  fi;
  h_sa = 0
}

/* release.lua wake: the live head and the front behind it are put on notice (woken) */
inline q_wake() {
  q_live_head();
  q_notice(true);
  if
  :: h_pushed -> h_pushed = 0; q_attempt_h()
  :: else
  fi
}

active proctype QClock() {
end:
  do
  :: atomic {
       /* N is never more than a refresh late at a free lock; an attempt whose block ran out
          runs before time goes on */
       !(n_state == N_WAITS && qkey == 0 && n_idle) && !(h_pending && h_sa >= h_block) ->
       if
       /* a command runs under a lease its heartbeat renews (the two-holder model checks that
          it never outlives it) */
       :: (qkey == Q_HOLDER && !q_holds) || (qkey == Q_H && !h_running) ->
          qleft--;
          if
          :: qleft == 0 -> qkey = 0
          :: else
          fi
       :: else
       fi;
       if
       :: h_in && h_left > 0 -> h_left--
       :: else
       fi;
       if
       :: h_pending -> h_sa++
       :: else
       fi;
       if
       :: n_state == N_WAITS && qkey == 0 -> n_idle = 1
       :: else
       fi;
       if
       :: released && n_state == N_WAITS ->
          if
          :: waited <= Q_BOUND -> waited++   /* longer is all alike */
          :: else
          fi;
          /* bound: a dead waiter holds the queue up for at most the bound after a release */
          assert(!h_dead || waited <= Q_BOUND)
       :: else
       fi;
       if
       :: h_holdup && n_state == N_WAITS ->
          held_up++;
          /* held: a grant nobody confirms holds the queue up for the provisional lease and
             one refresh at most */
          assert(held_up <= Q_HELD)
       :: else
       fi
     }
  od
}

active proctype QHolder() {
  if
  :: atomic {
       /* release.lua: delete, then wake the live head (its attempt waiting behind its grant
          list runs at once, in the same pass) */
       q_holds -> q_holds = 0;
       qkey = 0; released = 1;
       q_wake()
     }
  :: atomic {
       /* dies: its key expires a TTL after its last renewal, and nobody is woken */
       q_holds -> q_holds = 0
     }
  fi
}

/* starts a command under a lease counted from when `early` says */
inline q_start(early) {
  /* exclusion */
  assert(n_state != N_RUNS && !h_running);
  /* lease: no command starts under a lease counted from an attempt sent before the grant */
  assert(!early)
}

active proctype QHead() {
end:
  do
  :: atomic {
       /* dies, or freezes for good, before it confirmed a grant (a holder that dies after is
          the two-holder model's: its keeper stops its command at the kill point) */
       !h_dead && !h_ran && !h_gone -> h_dead = 1
     }
  :: atomic {
       /* killed: its connection closes, and the server drops the attempt it kept waiting */
       !h_dead && !h_ran && !h_gone -> h_dead = 1; h_pending = 0; h_sa = 0
     }
  :: atomic {
       /* refused: its next attempt goes to wait on the server */
       !h_dead && h_answer == A_BUSY ->
       h_answer = A_NONE; h_pending = 1; h_block = h_next
     }
  :: atomic {
       /* provisional: its confirmation (extend.lua) makes it the whole lease, counted from the
          confirmation, if the key is still its own; else it waits again, at the back */
       !h_dead && h_answer == A_PROV ->
       h_answer = A_NONE;
       if
       :: qkey == Q_H ->
          qleft = Q_TTL; h_holdup = 0; held_up = 0;
          q_start(false);
          h_running = 1; h_ran = 1
       :: else -> h_pending = 1; h_block = h_next
       fi
     }
  :: atomic {
       /* the whole lease, from its attempt's send: it runs, unless that lease has run out */
       !h_dead && h_answer == A_FULL ->
       h_answer = A_NONE;
       if
       :: qkey == Q_H ->
          h_holdup = 0; held_up = 0;
          q_start(h_early);
          h_running = 1; h_ran = 1
       :: else -> h_gone = 1
       fi
     }
  :: atomic {
       /* the queue is full: busy at once */
       !h_dead && h_answer == A_FULLQ -> h_answer = A_NONE; h_gone = 1
     }
  :: atomic {
       /* its command ends: released */
       h_running -> h_running = 0; h_gone = 1; qkey = 0; q_wake()
     }
  :: atomic {
       /* an attempt whose block ran out runs, whether H is there to read it or not */
       h_pending && h_sa >= h_block -> q_attempt_h()
     }
  od
}

active proctype QNext() {
end:
  do
  :: atomic {
       /* arrives: its first attempt; a free lock nobody is queued for is taken outright, with
          the whole lease counted from this attempt's send */
       n_state == N_AWAY ->
       if
       :: qkey == 0 -> q_live_head()
       :: else
       fi;
       if
       :: qkey == 0 && !h_in -> q_start(false); n_state = N_RUNS; qkey = Q_N
       :: else ->
          if
          :: qkey == 0 ->
             q_notice(false);
             if
             :: h_pushed -> h_pushed = 0; q_attempt_h()
             :: else
             fi
          :: else
          fi;
          if
          :: MAX_WAITERS > 0 && LIVE_COUNT >= MAX_WAITERS -> n_state = N_GONE   /* full */
          :: else -> n_state = N_WAITS; n_idle = 0; h_first = h_in
          fi
       fi
     }
  :: atomic {
       /* tries again at a free lock: it takes it when it heads the queue (it confirms at
          once: the whole lease), else it puts the head on notice */
       n_state == N_WAITS && qkey == 0 ->
       n_idle = 0;
       if
       :: HEAD_IS_H -> q_live_head()
       :: else
       fi;
       if
       :: HEAD_IS_H ->
          q_notice(false);
          if
          :: h_pushed -> h_pushed = 0; q_attempt_h()
          :: else
          fi
       :: else ->
          q_start(false);
          n_state = N_RUNS; qkey = Q_N;
          h_holdup = 0; held_up = 0; waited = 0; released = 0
       fi
     }
  :: atomic { n_state == N_RUNS -> n_state = N_GONE; qkey = 0; q_wake() }
  od
}

#if MAX_WAITERS > 0
/* waiters: never more than --max-waiters live entries, a thawed waiter's included */
active proctype QBounded() {
  assert(LIVE_COUNT <= MAX_WAITERS)
}
#endif
#endif

#if defined(QUEUE) && defined(REPLACE)
/* ---- replacers in the queue (-DQUEUE -DREPLACE) ----
   One server; a holder, and two --replace runs, R1 and R2, R2's first attempt after R1's.
   Time is left out: every step comes at any moment, however late (a holder that releases or
   whose key expires, a waiter's attempt that runs at a push or when its block runs out, a
   provisional grant nobody confirmed that lapses, a command that ends). A replacer's refused
   attempt that finds a holder it may displace asks it to stop (acquire_rest.lua) and queues
   ahead of plain waiters (there are none here). A replacer whose first attempt finds the lock
   free and nobody queued takes it outright and runs; a later attempt's grant is provisional,
   and its confirmation makes it the lease. */
#define R_HOLDER 3        /* the holder's key; a replacer's is its index + 1 */
#define RS_AWAY 0
#define RS_WAITS 1        /* arrived: queued, or granted and not confirmed */
#define RS_RUNS 2
#define RS_GONE 3
#define RA_NONE 0
#define RA_BUSY 1
#define RA_PROV 2
#define RA_REPLACED 3     /* superseded by a later replacer: it leaves without running */

byte rkey = R_HOLDER;     /* who holds the key: 0 free */
bool rprov;               /* the key is a provisional grant not confirmed */
bool rin[2];              /* the replacer is queued */
bool r1_first;            /* R1 is ahead of R2 (both queued) */
bool rpend[2];            /* its attempt waits on the server */
byte rans[2];             /* the answer it has to read */
byte rst[2];
bool sup[2];              /* told to give up: superseded while waiting, or a provisional
                             grantee displaced */
bool asked2;              /* R2 asked a holder to stop */

#define RHEAD (rin[0] && (r1_first || !rin[1]) -> 1 : (rin[1] -> 2 : 0))

/* acquire_rest.lua for replacer i */
inline r_attempt(i, first) {
  if
  :: sup[i] -> rans[i] = RA_REPLACED; rin[i] = 0
  :: !sup[i] && rkey == 0 && (RHEAD == 0 || RHEAD == i + 1) ->
     /* last: R1 takes the lock only before R2 asked */
     assert(i != 0 || !asked2);
     rkey = i + 1; rin[i] = 0;
     if
     :: first -> rst[i] = RS_RUNS   /* outright: the whole lease, and it runs */
     :: else -> rprov = 1; rans[i] = RA_PROV
     fi
  :: !sup[i] && !(rkey == 0 && (RHEAD == 0 || RHEAD == i + 1)) ->
     if
     :: !rin[i] -> rin[i] = 1; r1_first = (i == 0 && !rin[1]) || (i == 1 && rin[0])
     :: else
     fi;
     if
     :: rkey != 0 && rkey != i + 1 ->
        /* it asks the holder to stop */
        if
        :: i == 1 -> asked2 = 1
        :: else
        fi;
#ifndef NO_SUPERSEDE
        /* and supersedes every earlier replacer still waiting: out of the queue, told */
        if
        :: i == 1 && rst[0] == RS_WAITS && rkey != 1 -> sup[0] = 1; rin[0] = 0
        :: else
        fi;
#endif
#ifndef NO_GIVE_UP
        /* a provisional grantee it displaces gives up: its confirmation is refused */
        if
        :: rprov -> sup[rkey - 1] = 1
        :: else
        fi;
#endif
        skip
     :: else
     fi;
     rans[i] = RA_BUSY
  fi
}

proctype Replacer(byte i) {
end:
  do
  :: atomic {
       /* arrives: its first attempt */
       rst[i] == RS_AWAY && (i == 0 || rst[0] != RS_AWAY) ->
       rst[i] = RS_WAITS; r_attempt(i, true);
       assert(rst[1 - i] != RS_RUNS || rst[i] != RS_RUNS)
     }
  :: atomic { rans[i] == RA_BUSY -> rans[i] = RA_NONE; rpend[i] = 1 }
  :: atomic { rpend[i] -> rpend[i] = 0; r_attempt(i, false) }
  :: atomic {
       /* its confirmation (extend.lua): refused to a grantee told to give up, which
          releases; a grant that lapsed meanwhile is waited for again */
       rans[i] == RA_PROV ->
       rans[i] = RA_NONE;
       if
       :: rkey == i + 1 && !sup[i] ->
          assert(i != 0 || !asked2);
          rprov = 0;
          /* exclusion */
          assert(rst[1 - i] != RS_RUNS);
          rst[i] = RS_RUNS
       :: sup[i] ->
          if
          :: rkey == i + 1 -> rkey = 0; rprov = 0
          :: else
          fi;
          rst[i] = RS_GONE
       :: else -> rpend[i] = 1
       fi
     }
  :: atomic { rans[i] == RA_REPLACED -> rans[i] = RA_NONE; rst[i] = RS_GONE }
  :: atomic { rst[i] == RS_RUNS -> rst[i] = RS_GONE; rkey = 0 }
  od
}

active proctype RWorld() {
end:
  do
  :: atomic { rkey == R_HOLDER -> rkey = 0 }     /* the holder releases, or its key expires */
  :: atomic { rprov -> rkey = 0; rprov = 0 }     /* a grant nobody confirmed lapses */
  od
}

init {
  atomic {
    run Replacer(0);
    run Replacer(1)
  }
}
#endif

#ifdef SEVERAL
/* ---- several keys, all or none (-DSEVERAL) ----
   Two locks, A and B, on one server, and SC contenders for TURNS runs each, all with --wait:
   contender 0 asks for A and B, contender 1 for B and A, contender 2 (SC 3) for B alone (a
   taker that finds B free while its queue's head waits for A must not take it). One attempt
   is one acquire_all.lua: every lock is read first; the set is taken only if every key is free
   and the contender heads every queue that has a head, and it then leaves every queue;
   otherwise nothing is taken and the contender joins every queue with one arrival: the
   earliest it already has in any of them (kept when it rejoins a queue whose entry lapsed),
   else the server's clock. A
   waiter's attempt waits on the server and runs again when a release wakes it, and a refused
   attempt changes nothing once the waiter stands in every queue: so a waiter that cannot take
   the set and is queued everywhere takes no step, and a state in which nobody can take a step
   while a contender has runs left is a deadlock. An entry may lapse at any moment (a waiter
   frozen or starved past its entry's life), up to MAXLAPSES times; the waiter rejoins at its
   next attempt. A command ends at any moment and releases every key (or its leases lapse: the
   same here). Its properties:
     exclusion  no two commands that share a key run at once (each key's users), and a
                command runs only while its contender holds every key it asked for;
     progress   the search stops only with every contender's runs done: no deadlock.
   Its switches:
     NO_ONE_ARRIVAL  a waiter's entries keep their own arrivals: one rejoined after a lapse
                     gets the server's clock of the moment, while its other entries keep older
                     ones (ZADD NX per queue, as one key does);
     ONE_BY_ONE      the keys are taken one at a time in the asked order, holding the first
                     while waiting for the second (without a queue). */
#ifndef SC
#define SC 3              /* contenders */
#endif
#ifndef MAXLAPSES
#define MAXLAPSES 2       /* queue entries that lapse */
#endif
#define SK 2              /* locks: A 0, B 1 */

byte owner[SK];           /* who holds each lock: contender + 1, 0 free */
byte arr[SK * SC];        /* each lock's queue: the contender's arrival, 0 when not queued */
byte head[SK];            /* who heads each queue: contender + 1, 0 empty (from arr) */
byte server_time = 1;     /* the server's clock, for arrivals */
byte users[SK];           /* commands running under each key */
bool swaiting[SC];        /* the contender was refused and waits for the set */
bool sdone[SC];           /* the contender's runs are all done */
byte lapses;

/* queue order: by arrival (one contender, one arrival per queue) */
inline heads() {
  k = 0;
  do
  :: k < SK ->
     head[k] = 0; j = 0;
     do
     :: j < SC ->
        if
        :: arr[k * SC + j] != 0 && (head[k] == 0 || arr[k * SC + j] < arr[k * SC + head[k] - 1]) ->
           head[k] = j + 1
        :: else
        fi;
        j++
     :: else -> break
     od;
     k++
  :: else -> break
  od;
  k = 0; j = 0
}

#define WANTS(c, k) (c < 2 || k == 1)     /* the keys contender c asks for */
#define FIRST(c) (c > 0)                  /* the key it names first: B for 1 and 2 */

/* acquire_all.lua would take the set: every key free, and the contender heads every queue
   that has a head */
#define FREE_FOR(c, k) (!WANTS(c, k) || (owner[k] == 0 && (head[k] == 0 || head[k] == c + 1)))
#define GRANTABLE(c) (FREE_FOR(c, 0) && FREE_FOR(c, 1))
#define QUEUED(c) ((!WANTS(c, 0) || arr[c] != 0) && (!WANTS(c, 1) || arr[SC + c] != 0))
/* a waiter that stands in every queue and cannot take the set takes no step until something
   changes; when every contender is such a waiter or done, nothing ever will */
#define STUCK(c) (sdone[c] || (swaiting[c] && QUEUED(c) && !GRANTABLE(c)))
#if SC == 2
#define DEADLOCK (!(sdone[0] && sdone[1]) && STUCK(0) && STUCK(1))
#elif SC == 3
#define DEADLOCK (!(sdone[0] && sdone[1] && sdone[2]) && STUCK(0) && STUCK(1) && STUCK(2))
#else
#error "SC is 2 or 3"
#endif

/* acquire_all.lua, taken: every key, and the contender leaves every queue */
inline take_all(c) {
  k = 0;
  do
  :: k < SK -> if :: WANTS(c, k) -> owner[k] = c + 1; arr[k * SC + c] = 0 :: else fi; k++
  :: else -> break
  od;
  swaiting[c] = 0;
  heads()
}

/* acquire_all.lua, refused: the contender joins every queue, with one arrival */
inline join_all(c) {
#ifdef NO_ONE_ARRIVAL
  /* each queue its own: an entry kept keeps its arrival, a new one gets the clock's */
  k = 0;
  do
  :: k < SK ->
     if
     :: WANTS(c, k) && arr[k * SC + c] == 0 -> arr[k * SC + c] = server_time
     :: else
     fi;
     k++
  :: else -> break
  od;
#else
  /* the earliest it already has in any queue, else the server's clock */
  a = 0; k = 0;
  do
  :: k < SK ->
     if
     :: arr[k * SC + c] != 0 && (a == 0 || arr[k * SC + c] < a) -> a = arr[k * SC + c]
     :: else
     fi;
     k++
  :: else -> break
  od;
  if
  :: a == 0 -> a = server_time
  :: else
  fi;
  k = 0;
  do
  :: k < SK -> if :: WANTS(c, k) -> arr[k * SC + c] = a :: else fi; k++
  :: else -> break
  od;
  a = 0;
#endif
  server_time++;
  swaiting[c] = 1;
  heads()
}

proctype Contender(byte c) {
  byte turn, k, j, a;
  bool held;
  do
  :: turn == TURNS -> break
  :: turn < TURNS ->
#ifdef ONE_BY_ONE
     /* one key at a time, in the asked order, the first held while the second is awaited */
     atomic { owner[FIRST(c)] == 0 -> owner[FIRST(c)] = c + 1 }
     atomic { !WANTS(c, 1 - FIRST(c)) || owner[1 - FIRST(c)] == 0 ->
              if :: WANTS(c, 1 - FIRST(c)) -> owner[1 - FIRST(c)] = c + 1 :: else fi }
#else
     /* the first attempt: taken, or refused and queued */
     atomic {
       if
       :: GRANTABLE(c) -> take_all(c); held = 1
       :: else -> join_all(c)
       fi
     }
     do
     :: held -> break
     :: atomic {
          /* woken by a release: its attempt waiting on the server runs again */
          !held && GRANTABLE(c) -> take_all(c); held = 1
        }
     :: atomic {
          /* an entry lapsed: its next attempt is refused and rejoins */
          !held && !GRANTABLE(c) && !QUEUED(c) -> join_all(c)
        }
     od;
#endif
     atomic {
       /* exclusion: it holds every key it asked for, and no other command runs under one */
       k = 0;
       do
       :: k < SK ->
          if
          :: WANTS(c, k) -> assert(owner[k] == c + 1 && users[k] == 0); users[k]++
          :: else
          fi;
          k++
       :: else -> break
       od;
       k = 0
     }
     /* the command ends (or its leases lapse): every key is released */
     atomic {
       k = 0;
       do
       :: k < SK -> if :: WANTS(c, k) -> users[k]--; owner[k] = 0 :: else fi; k++
       :: else -> break
       od;
       k = 0; held = 0; turn++
     }
  od;
  sdone[c] = 1
}

/* a waiter's entry in one queue lapses: it was not refreshed in time */
#define LAPSE(i) :: atomic { lapses < MAXLAPSES && arr[i] != 0 -> arr[i] = 0; lapses++; heads() }
active proctype Lapse() {
  byte k, j;
end:
  do
  LAPSE(0)
  LAPSE(1)
  LAPSE(2)
  LAPSE(3)
#if SC > 2
  LAPSE(4)
  LAPSE(5)
#endif
  od
}

/* progress: no state in which the waiters left are all stuck; and the search stops (nobody
   can take a step) only once every contender is done */
active proctype Stuck() {
  assert(!DEADLOCK)
}

active proctype Watch() {
#if SC == 2
  timeout -> assert(sdone[0] && sdone[1])
#else
  timeout -> assert(sdone[0] && sdone[1] && sdone[2])
#endif
}

init {
  byte c;
  atomic {
    do
    :: c < SC -> run Contender(c); c++
    :: else -> break
    od;
    c = 0
  }
}
#endif
