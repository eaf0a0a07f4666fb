// Package transcript keeps the durable, append-only record of everything a run did, outside
// etcd: each step's messages, full output, tokens and latency, each human decision, and (with
// tools) each tool call. A run's status stays small and carries only what people watch; the
// transcript carries the rest.
//
// This package holds the records' keys and the Store interface; the stores, SQLite (embedded,
// one file, the default) and PostgreSQL (for more than one replica and for scale), are in
// package sqlstore, chosen by a DSN. Both run the same SQL and pass the same conformance suite
// (package storetest).
package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind says what a record is.
type Kind string

const (
	// KindStep is a step's outcome: what the agent was given and what it answered. One per step.
	KindStep Kind = "step"
	// KindDecision is a person's decision or reply, applied to the run.
	KindDecision Kind = "decision"
	// KindToolTurn is a model's answer inside a step that asked for tool calls, with the calls,
	// recorded before any of them is made.
	KindToolTurn Kind = "tool-turn"
	// KindToolStart marks a call of a tool with side effects as sent, before it is: a step
	// that finds it without the call's outcome does not send the call again.
	KindToolStart Kind = "tool-start"
	// KindTool is one tool call's outcome: arguments, result or error, latency.
	KindTool Kind = "tool"
	// KindToolGate is a step held at a tool call that waits for approval.
	KindToolGate Kind = "tool-gate"
	// KindGuardGate is a step held at a guardrail's gate: a tool's result, the step's input or
	// its output waits for a person's review (the output, whole, in the record).
	KindGuardGate Kind = "guard-gate"
	// KindProgress is what a remote agent reported while it worked on a step (an A2A agent's
	// status updates), in order.
	KindProgress Kind = "progress"
	// KindHistory is what a turn of a session was given of the turns before it, and its own
	// input: one per turn, at step 0, written when the turn starts.
	KindHistory Kind = "history"
	// KindSummary is the summary of a session's turns that left the window as a turn started,
	// made before its first step: one per turn at most, at step 0.
	KindSummary Kind = "summary"
)

// Key identifies a record within its run: records are append-only, and a key is stored once.
type Key struct {
	Kind Kind
	// Step is the step's number, from 1; for a decision, the steps the run had taken.
	Step int32
	// Attempt tells apart executions of one step (a step in flight when the operator stopped
	// runs again); 0 for a step's outcome, of which there is only one.
	Attempt int32
	// Call orders records of one step and attempt: a decision's sequence number, a tool call's
	// index.
	Call int32
}

// Record is one entry of a run's transcript.
type Record struct {
	Key
	// Seq is the store's order of records, increasing; 0 until stored.
	Seq int64
	// RunUID, Namespace and Run name the AgentRun.
	RunUID    string
	Namespace string
	Run       string
	// Time is when what it records happened.
	Time time.Time
	// Body is the record's content, JSON.
	Body json.RawMessage
	// Spend is what the model calls that the record follows used: Append books it in the
	// namespace's ledger in the same transaction, if and only if it stores the record (a
	// record stored already was booked with it). It is not stored with the record nor read back.
	Spend []Spend
}

// Spend is what one model call used, as the ledger books it: on the UTC day its cost was
// reserved (the month's is the sum of its days'), in the currency it was priced in ("" when it
// was not priced).
type Spend struct {
	// Day is the UTC day, as 2006-01-02.
	Day      string
	Currency string
	// CostNanos is the cost in billionths of the currency, rounded up.
	CostNanos int64
	Tokens    int64
}

// Booked is what a namespace's calls booked on one UTC day in one currency.
type Booked struct {
	// Day is the UTC day, as 2006-01-02.
	Day       string
	Currency  string
	CostNanos int64
	Tokens    int64
}

// MaxSpend is the most the ledger counts of anything, in tokens or billionths: sums stop there,
// so that a model server that reports absurd usage cannot make them wrap around.
const MaxSpend = 1 << 62

// Query selects records of one run.
type Query struct {
	RunUID string
	// After keeps records whose Seq is larger: a reader's resume point.
	After int64
	// Before, when set, keeps records whose Seq is smaller: a reader of the newest records
	// pages back from there.
	Before int64
	// Step, when set, keeps one step's records.
	Step *int32
	// Kinds, when set, keeps records of these kinds.
	Kinds []Kind
	// Limit bounds the records returned (0: no bound).
	Limit int
	// Newest returns the last Limit records instead of the first, still oldest first.
	Newest bool
	// MaxBytes, when set, bounds the bodies returned: records are returned until their bodies
	// reach it, and at least one. A reader pages through a run with After, holding one page.
	MaxBytes int
}

// RunRef names a run the store holds records of.
type RunRef struct {
	RunUID    string
	Namespace string
	Run       string
	// Last is the time of its newest record.
	Last time.Time
}

// Store is a transcript store. It is safe for concurrent use.
type Store interface {
	// Append stores the records whose keys are not stored yet, atomically and in order, and
	// returns each key's stored record: the one given, with the spend it booked, or the one
	// already there, with none. Two writers of one key thus agree on what it holds.
	Append(ctx context.Context, records ...Record) ([]Record, error)
	// Get returns the record of a key of a run.
	Get(ctx context.Context, runUID string, key Key) (Record, bool, error)
	// List returns a run's records in order.
	List(ctx context.Context, q Query) ([]Record, error)
	// Runs lists the runs the store holds records of, in a namespace ("" for all).
	Runs(ctx context.Context, namespace string) ([]RunRef, error)
	// Delete removes every record of the runs. What the runs' records booked in the ledger
	// stays: spend is the namespace's, whatever becomes of its runs.
	Delete(ctx context.Context, runUIDs ...string) error
	// Spent is what the namespace's calls booked on each day of a UTC month (2006-01), by day
	// and currency.
	Spent(ctx context.Context, namespace, month string) ([]Booked, error)
	// Book books spend of the namespace that no record carries (its step was given up), in a
	// transaction of its own.
	Book(ctx context.Context, namespace string, spend ...Spend) error
	// NamespaceBytes is what the records of the namespace's runs take together, in bytes as
	// stored.
	NamespaceBytes(ctx context.Context, namespace string) (int64, error)
	// Close releases the store.
	Close() error
}

// Body encodes a record's body as the store keeps it: JSON with <, > and & as they are, so that
// an answer of HTML takes its own length, not six bytes a character (textbound.StoredLen counts
// the same way).
func Body(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Bodies are Baton's own types, which always encode.
		panic(fmt.Sprintf("encoding a transcript record: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// ErrBadRecord is returned for a record that cannot be stored as it is.
var ErrBadRecord = errors.New("bad transcript record")

// MaxBody bounds a record's body. Outputs are bounded at the provider boundary well below it.
const MaxBody = 8 << 20

// CheckRecord says why a record cannot be stored as it is, if it cannot: every store refuses
// such a record with ErrBadRecord.
func CheckRecord(r Record) error {
	switch {
	case r.RunUID == "":
		return fmt.Errorf("%w: no run UID", ErrBadRecord)
	case r.Kind == "":
		return fmt.Errorf("%w: no kind", ErrBadRecord)
	case len(r.Body) > MaxBody:
		return fmt.Errorf("%w: body of %d bytes, more than %d", ErrBadRecord, len(r.Body), MaxBody)
	case len(r.Body) > 0 && !json.Valid(r.Body):
		return fmt.Errorf("%w: body is not JSON", ErrBadRecord)
	}
	for _, sp := range r.Spend {
		if _, err := time.Parse(time.DateOnly, sp.Day); err != nil || sp.CostNanos < 0 || sp.Tokens < 0 || len(sp.Currency) > 3 {
			return fmt.Errorf("%w: a spend of %+v cannot be booked", ErrBadRecord, sp)
		}
	}
	return nil
}
