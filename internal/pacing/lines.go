package pacing

// The waiting asks of an endpoint: a ring of namespace lines, each a ring of run lines, each a ring
// of waiters. Every ring has a cursor (the one served next) and takes O(1) to insert into, to
// remove from and to advance, so cancelling one waiter among thousands costs no search. A waiter
// is one small record linked in place; empty lines are dropped as soon as they are empty.

// waiter is one ask waiting its turn.
type waiter struct {
	ask   Ask
	ready func(*Grant)
	// line is the run line the waiter stands in; nil once it left it (granted, cancelled or
	// released), which is what makes ready's call and cancel exclusive.
	line       *runLine
	prev, next *waiter
}

// runLine holds the waiters of one run, first come first served; head is the ring's cursor.
type runLine struct {
	run        string
	ns         *nsLine
	head       *waiter
	prev, next *runLine
}

// nsLine holds the run lines of one namespace; next is the run served next.
type nsLine struct {
	name       string
	next       *runLine
	waiting    int64
	prev, succ *nsLine
}

// lines holds the namespace lines of an endpoint; next is the namespace served next. The run
// lines of every namespace are in one map, which costs a namespace no map of its own.
type lines struct {
	byNS    map[string]*nsLine
	byRun   map[runKey]*runLine
	next    *nsLine
	waiting int64
}

type runKey struct {
	ns, run string
}

// ring is what the three kinds of node have in common: a place in a circular list.
type ring[N any] interface {
	*N
	links() (prev, next **N)
}

func (w *waiter) links() (prev, next **waiter)   { return &w.prev, &w.next }
func (r *runLine) links() (prev, next **runLine) { return &r.prev, &r.next }
func (n *nsLine) links() (prev, next **nsLine)   { return &n.prev, &n.succ }

// insertBefore puts n just before the cursor, that is last in the round; n becomes the cursor of
// an empty ring.
func insertBefore[N any, P ring[N]](cursor **N, n P) {
	np, nn := n.links()
	if *cursor == nil {
		*np, *nn = (*N)(n), (*N)(n)
		*cursor = (*N)(n)
		return
	}
	c := P(*cursor)
	cp, _ := c.links()
	before := P(*cp)
	_, bn := before.links()
	*np, *nn = (*N)(before), (*N)(c)
	*bn, *cp = (*N)(n), (*N)(n)
}

// unlink takes n out of its ring; a cursor on n moves to the one after it.
func unlink[N any, P ring[N]](cursor **N, n P) {
	np, nn := n.links()
	if *nn == (*N)(n) {
		*cursor = nil
	} else {
		_, pn := P(*np).links()
		sp, _ := P(*nn).links()
		*pn, *sp = *nn, *np
		if *cursor == (*N)(n) {
			*cursor = *nn
		}
	}
	*np, *nn = nil, nil
}

// peek is the waiter served next, or nil.
func (l *lines) peek() *waiter {
	if l.next == nil {
		return nil
	}
	return l.next.next.head
}

// push queues w last in its run's line, or first when front is set (a call that already waited
// its turn, and whose run is then the next served in its namespace).
func (l *lines) push(w *waiter, front bool) {
	if l.byNS == nil {
		l.byNS, l.byRun = map[string]*nsLine{}, map[runKey]*runLine{}
	}
	ns := l.byNS[w.ask.Namespace]
	if ns == nil {
		ns = &nsLine{name: w.ask.Namespace}
		l.byNS[ns.name] = ns
		insertBefore(&l.next, ns)
	}
	key := runKey{ns: w.ask.Namespace, run: w.ask.Run}
	run := l.byRun[key]
	if run == nil {
		run = &runLine{run: w.ask.Run, ns: ns}
		l.byRun[key] = run
		insertBefore(&ns.next, run)
	}
	insertBefore(&run.head, w)
	if front {
		run.head = w
		ns.next = run
	}
	w.line = run
	ns.waiting++
	l.waiting++
}

// take takes w, the head of its run's line, and moves both cursors on: the namespace after w's is
// served next, and w's namespace serves its next run when its turn comes again.
func (l *lines) take(w *waiter) {
	run, ns := w.line, w.line.ns
	l.remove(w)
	if run.head != nil {
		ns.next = run.next
	}
	if ns.waiting > 0 {
		l.next = ns.succ
	}
}

// remove takes w out of its line, dropping lines left empty; cursors on them move to the next.
func (l *lines) remove(w *waiter) {
	run := w.line
	ns := run.ns
	unlink(&run.head, w)
	w.line = nil
	ns.waiting--
	l.waiting--
	if run.head == nil {
		unlink(&ns.next, run)
		delete(l.byRun, runKey{ns: ns.name, run: run.run})
	}
	if ns.waiting == 0 {
		unlink(&l.next, ns)
		delete(l.byNS, ns.name)
	}
}

// drain takes every waiter out, in no particular order.
func (l *lines) drain() []*waiter {
	out := make([]*waiter, 0, l.waiting)
	for w := l.peek(); w != nil; w = l.peek() {
		l.remove(w)
		out = append(out, w)
	}
	return out
}

// byNamespace counts the waiters of each namespace.
func (l *lines) byNamespace() map[string]int64 {
	out := make(map[string]int64, len(l.byNS))
	for name, ns := range l.byNS {
		out[name] = ns.waiting
	}
	return out
}
