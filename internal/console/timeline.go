package console

import (
	"net/http"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
)

// transcriptOf reads what a run's pages show of its transcript, all of it or one step's
// (step > 0), a page at a time: its timeline, the output of its latest step that did not fail
// and the record of the tool call its gate holds, not the records, so a long run's page costs
// the console a page of records.
func (s *Server) transcriptOf(r *http.Request, run *v1alpha1.AgentRun, step int32) runview.Transcript {
	if s.opts.Transcripts == nil {
		return runview.Unread(run, s.unreached())
	}
	return runview.ReadTranscript(r.Context(), s.opts.Transcripts, run, step)
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
func judge(t runview.Transcript, run *v1alpha1.AgentRun) string {
	if t.Output != nil {
		return *t.Output
	}
	if p := run.Status.PendingApproval; p != nil && p.Completes != nil {
		return run.Status.Output
	}
	return run.Status.Input
}
