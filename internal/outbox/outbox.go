// Package outbox is where notifications wait until their sinks take them: one entry per event
// and sink, kept per namespace apart from runs' transcripts (deleting a run loses no pending
// event), written before the event is sent, and kept a while after (so that an event derived
// again, after a restart, is not sent again). The transcript store's database holds it
// (internal/transcript/sqlstore).
package outbox

import (
	"context"
	"time"
)

// Entry is one event for one sink.
type Entry struct {
	// Seq orders entries as they were written; 0 until stored.
	Seq int64
	// Namespace, Config and Sink say where the event goes: the sink of the config's spec.notify.
	Namespace, Config, Sink string
	// RunUID is the run the event is of: entries of one run and sink are delivered in order.
	RunUID string
	// EventID is the event's, the same on every delivery; an event is stored once per sink.
	EventID string
	// Body is the event (notify.Event, JSON).
	Body []byte
	// Written is when the entry was first stored; NextTry when it is due.
	Written, NextTry time.Time
	// Attempts counts the deliveries that failed.
	Attempts int
	// LastError says why the last delivery failed.
	LastError string
}

// Keep is how long a delivered or given-up entry is kept, so that it is not put again.
const Keep = 48 * time.Hour

// Counts are what a sink was sent, as the outbox keeps it.
type Counts struct {
	Sent, Retrying, GivenUp int64
}

// Store keeps the outbox.
type Store interface {
	// Put stores the entries whose event is not stored yet for their sink, and says how many it
	// stored.
	Put(ctx context.Context, entries ...Entry) (int, error)
	// Due lists up to limit entries not yet delivered or given up whose NextTry has come, each
	// the oldest pending entry of its run and sink, oldest first.
	Due(ctx context.Context, now time.Time, limit int) ([]Entry, error)
	// Delivered marks an entry delivered, or given up.
	Delivered(ctx context.Context, seq int64, at time.Time, givenUp bool) error
	// Failed records a delivery that failed and is to be tried again at next.
	Failed(ctx context.Context, seq int64, attempts int, next time.Time, lastError string) error
	// Counts counts the entries of each sink (by namespace, config and sink) the outbox holds:
	// delivered and given up within Keep, and pending after a failed delivery.
	Counts(ctx context.Context) (map[[3]string]Counts, error)
	// Purge drops the entries delivered or given up before the time given.
	Purge(ctx context.Context, before time.Time) error
}
