// Package pacing decides when each model call against an endpoint may be made, so that the calls
// of every run, from every namespace, stay under the endpoint's shared limits, learn from what
// the server says of them, and share the capacity fairly.
//
// An endpoint (a provider account) has limits of three kinds: requests per minute, tokens per
// minute and calls at once. Requests and tokens are token buckets refilled continuously at a
// sixtieth of the limit per second, holding about ten seconds' worth, so a server that enforces
// its limit over windows shorter than a minute is not overrun by a minute's worth at once. A call
// asks for one request and for the tokens it may use (its prompt's estimated size plus its output
// cap). The tokens are reserved while it is in flight and settled when it ends: tokens it did not
// use go back, tokens it used beyond its reservation are debt that delays the calls after it. A
// call reserves at most its namespace's share of the bucket (the bucket over the namespaces with
// calls waiting or in flight), so an ask far above what a call uses, a million-token output cap,
// cannot hold the bucket and keep the other namespaces waiting; what it uses beyond its share is
// debt like any other.
//
// The server's answers teach the endpoint: a 429 pauses every call until its Retry-After (or the
// reset of the limit it exhausted, or a backoff of 1 s doubling per 429 up to 30 s); the remaining
// requests and tokens it reports lower the local buckets (never raise them); a limit it reports
// below the configured one, or where none is configured, becomes the limit. A pause is not saved
// up: what the buckets would refill during it is spent ahead, so at its end one request may go and
// the rest follow at the limit's rate, not a bucket's worth at once into a server that frees room
// at its own pace from then on.
//
// Waiters stand in one line per namespace and, inside a namespace, in one line per run. Lines are
// served round-robin: namespaces in turn, and in each namespace its runs in turn, first come
// first served within a run. A namespace with one waiting call is served within one round, however
// many calls another has queued. The waiter that is next is not skipped for a smaller one behind
// it, so a large ask is not starved by small ones; only a namespace whose calls in flight hold
// its share of the tokens is passed over while the bucket has no room for its next call. It waits
// for its own calls to end, not for the others'.
//
// Waiting costs no goroutine: a waiter is a small record in its line, and each endpoint keeps one
// timer, set for the earliest time the next waiter could go. A call that ends, a new ask and the
// timer each admit whoever can go now, and the callbacks of those admitted run after the
// endpoint's lock is released.
//
// The package makes no calls of its own: the caller makes the call, reads the answer with
// ReadSignal and hands it back to the Grant.
package pacing
