package console

import (
	"errors"
	"net/http"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcriptclient"
)

// runTranscript is what a run's pages keep of its transcript. It is read a page at a time and
// keeps the timeline's entries (transcriptapi's, as kubectl baton describe shows them), the
// output of the latest step that did not fail and the record of the tool call the run's gate
// holds, not the records: a long run's page costs the console a page of records.
type runTranscript struct {
	timeline []records.Entry
	output   *string
	held     *records.Record
	// unread says why the transcript was not read, when it was not: the timeline is then what
	// status holds.
	unread string
}

var errEarlierRun = errors.New("the transcript is of an earlier run of this name")

// transcriptOf reads a run's transcript, all of it or one step's (step > 0).
func (s *Server) transcriptOf(r *http.Request, run *v1alpha1.AgentRun, step int32) runTranscript {
	if s.opts.Transcripts == nil {
		return runTranscript{timeline: records.BuildTimeline(run, nil), unread: s.unreached()}
	}
	var pending *v1alpha1.PendingToolCall
	if p := run.Status.PendingApproval; p != nil {
		pending = p.ToolCall
	}
	var out runTranscript
	t := records.NewTimeline(run)
	err := s.opts.Transcripts.Pages(r.Context(), run.Namespace, run.Name, step, func(page transcriptclient.Page) error {
		if page.UID != "" && page.UID != string(run.UID) {
			return errEarlierRun
		}
		for _, rec := range page.Records {
			t.Add(rec)
			switch {
			case rec.Kind == "step":
				if b := rec.StepBody(); b.Error == "" {
					out.output = &b.Output
				}
			case records.Holds(pending, rec):
				out.held = &rec
			}
		}
		return nil
	})
	if err != nil {
		return runTranscript{timeline: records.BuildTimeline(run, nil), unread: err.Error()}
	}
	out.timeline = t.Entries()
	return out
}

// unreached says why the console has no transcripts to read.
func (s *Server) unreached() string {
	if s.opts.TranscriptsErr != nil {
		return "the transcript API was not reached: " + s.opts.TranscriptsErr.Error()
	}
	return "the transcript API was not reached"
}

// judge is what there is to judge at the gate the run waits at: the output of the step before
// it.
func (t runTranscript) judge(run *v1alpha1.AgentRun) string {
	if t.output != nil {
		return *t.output
	}
	if p := run.Status.PendingApproval; p != nil && p.Completes != nil {
		return run.Status.Output
	}
	return run.Status.Input
}

// defaultTail is how many of a run's latest steps its page shows unless asked otherwise
// (?tail=N, 0 for every step), as kubectl baton describe does: a run of 10,000 steps still
// makes a page a browser draws at once.
const defaultTail = 200
