package pacing

import "time"

// A namespace's share of the tokens bucket. A call reserves its ask while in flight; an ask far
// above what it uses (a million-token output cap) would hold the whole bucket and keep every
// other namespace's calls waiting for it to end. So a call reserves at most its namespace's share
// of the bucket, the bucket's size over the namespaces with calls waiting or in flight, and what
// it uses beyond that is debt when it ends, as for any call. A namespace whose calls in flight
// hold its share waits for them, not for the others' (Endpoint.next).

// nsHeld is what one namespace's calls in flight hold.
type nsHeld struct {
	calls, tokens int64
}

// share is each namespace's share of the tokens bucket now, or maxCount when tokens are not
// limited.
func (e *Endpoint) share() int64 {
	if e.tokens.lim == nil {
		return maxCount
	}
	active := int64(len(e.queue.byNS))
	for ns := range e.held {
		if _, waiting := e.queue.byNS[ns]; !waiting {
			active++
		}
	}
	return max(1, e.tokens.burst/max(1, active))
}

// reservation is what an ask of tokens reserves under a share.
func reservation(tokens, share int64) int64 {
	return min(max(tokens, 0), maxCount, share)
}

// heldBy is the tokens the namespace's calls in flight hold.
func (e *Endpoint) heldBy(ns string) int64 {
	if h := e.held[ns]; h != nil {
		return h.tokens
	}
	return 0
}

// earliest is the earlier of two times, zero standing for none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
