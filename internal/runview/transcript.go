// Package runview is what kubectl baton and its web console show of a run, built one way for
// both: its timeline (every step, decision and tool call, from the transcript's records and the
// run's status), the tool call its gate holds, whole, and the tree of its branches. A run's
// transcript is read a page at a time and only what the views show is kept, however long the
// run.
package runview

import (
	"context"
	"errors"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcriptclient"
)

// DefaultTail is how many of a run's latest steps kubectl baton describe and the console's run
// page show unless asked otherwise (0 shows every step): a run of 10,000 steps still makes a
// page a browser draws at once, and a screen a person reads.
const DefaultTail = 200

// ErrEarlierRun is why a transcript is not read as the run's: it is of an earlier run of the
// same name.
var ErrEarlierRun = errors.New("the transcript is of an earlier run of this name")

// Pager reads a run's records, all of them or one step's (step > 0), a page at a time:
// transcriptclient.Client.
type Pager interface {
	Pages(ctx context.Context, namespace, name string, step int32, each func(transcriptclient.Page) error) error
}

// Transcript is what the views keep of a run's transcript: not its records, so a reader of a
// long run holds a page of them at a time.
type Transcript struct {
	// Timeline is the run's timeline (of one step's records, when only they were read).
	Timeline []Entry
	// Output is the output of the latest step that did not fail; nil when none was read.
	Output *string
	// Held is the record of the tool call the run's gate holds, when it was read.
	Held *records.Record
	// Unread says why the transcript was not read, when it was not: the timeline is then what
	// the run's status holds, its latest steps.
	Unread string
}

// Unread is the views of a run whose transcript was not read, and why: what its status holds.
func Unread(run *v1alpha1.AgentRun, why string) Transcript {
	return Transcript{Timeline: BuildTimeline(run, nil), Unread: why}
}

// ReadTranscript reads the run's transcript with p, all of it or one step's (step > 0), a page
// at a time. A transcript that cannot be read, or is of an earlier run of the name, leaves the
// views of the run's status, saying why.
func ReadTranscript(ctx context.Context, p Pager, run *v1alpha1.AgentRun, step int32) Transcript {
	var pending *v1alpha1.PendingToolCall
	if g := run.Status.PendingApproval; g != nil {
		pending = g.ToolCall
	}
	var out Transcript
	t := NewTimeline(run)
	err := p.Pages(ctx, run.Namespace, run.Name, step, func(page transcriptclient.Page) error {
		if page.UID != "" && page.UID != string(run.UID) {
			return ErrEarlierRun
		}
		for _, rec := range page.Records {
			t.Add(rec)
			switch {
			case rec.Kind == "step":
				if b := rec.StepBody(); b.Error == "" {
					out.Output = &b.Output
				}
			case Holds(pending, rec):
				out.Held = &rec
			}
		}
		return nil
	})
	if err != nil {
		return Unread(run, err.Error())
	}
	out.Timeline = t.Entries()
	return out
}
