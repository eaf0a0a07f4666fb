// Package records owns the format of a run's transcript records (docs/transcript.md documents
// it for readers): the bodies the operator writes for steps, people's decisions and tool calls;
// how a body is read back into what the workflow core applies; a run's export. The operator,
// the transcript API, kubectl baton and the web console share it, so the format is defined
// once; what readers show of the records (a run's timeline, the call a gate holds) is
// internal/runview's.
package records

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/internal/transcript"
)

// RunID names a run in its records.
type RunID struct {
	UID, Namespace, Name string
}

// Key is the run's namespace and name.
func (r RunID) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
}

// Record is a record of the run with key, at time at, with body.
func (r RunID) Record(key transcript.Key, at time.Time, body json.RawMessage) transcript.Record {
	return transcript.Record{Key: key, RunUID: r.UID, Namespace: r.Namespace, Run: r.Name, Time: at.UTC(), Body: body}
}

// ReadPage bounds the bodies one read of a run's transcript holds: whoever reads a whole run (a
// run started from it, the tool calls counted after a restart, a reader of the API) reads a
// page at a time, however long the run.
const ReadPage = 4 << 20

// Each calls each with the records q selects, in order, reading a page at a time, until each
// says to stop.
func Each(ctx context.Context, store transcript.Store, q transcript.Query, each func(transcript.Record) (bool, error)) error {
	q.Limit, q.MaxBytes = 1000, ReadPage
	for {
		recs, err := store.List(ctx, q)
		if err != nil {
			return err
		}
		for i := range recs {
			more, err := each(recs[i])
			if err != nil || !more {
				return err
			}
			recs[i].Body = nil // what was read goes as it is used
		}
		if len(recs) == 0 {
			return nil
		}
		q.After = recs[len(recs)-1].Seq
	}
}

// bodyAs reads a body as T; what does not fit is left zero.
func bodyAs[T any](body json.RawMessage) T {
	var b T
	_ = json.Unmarshal(body, &b)
	return b
}
