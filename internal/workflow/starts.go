package workflow

import (
	"fmt"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// EventWaitingForSession is the Event of a turn whose session does not exist yet.
const EventWaitingForSession = "WaitingForSession"

// StartFacts are what a Pending run's start waits on, gathered by the shell before it asks its
// quotas and Kueue: those count the run from the moment they admit it, so they come last.
type StartFacts struct {
	Now    time.Time
	Status v1alpha1.AgentRunStatus
	// Config names the run's AgentConfig; ConfigFound says whether it exists.
	Config      string
	ConfigFound bool
	// Invalid says why the config, as the run would pin it, cannot run; empty if it can.
	Invalid string
	// MissingSecret says which Secret an agent needs and cannot have; empty if none.
	MissingSecret string
	// Session is the run's session, for a turn of one.
	Session *SessionFacts
	// Problem says why the run's kind of start cannot be (a replay of a run that does not
	// exist, a branch its parent does not vouch for, a start from a step the earlier run did not
	// take): the run ends ConfigInvalid. Empty if it can.
	Problem string
	// Pinned is set for a run that starts on a revision pinned already, its parent's: a branch
	// run, admitted with its parent. It waits on neither config, Secrets nor admission.
	Pinned bool
	// Admission is the namespace's word on the run, once asked for with Admit; nil until then.
	Admission *Admission
}

// Admission is what the namespace's quotas, then Kueue, said of a run that may otherwise start.
type Admission struct {
	// Admit is set when the run may start: it is counted as running from then on.
	Admit bool
	// Invalid says why the run can never be admitted (a queue no LocalQueue can have): it ends.
	Invalid string
	// Reason, Message and Place say why the run waits Queued, and where in its line.
	Reason, Message string
	Place           int
	// KueueChanged is set when what the run's status says of Kueue changed since it was written.
	KueueChanged bool
	// Written is when the run's place in its quotas' line was last written; zero if never.
	Written time.Time
}

// SecretRetry is how often a run waiting for a Secret looks again: Secrets are not watched.
const SecretRetry = 5 * time.Second

// QueuedRewrite is how often a Queued run's new place in line is written: its place moves with
// every run that starts, and a write per move per queued run would be many.
const QueuedRewrite = 30 * time.Second

// starting is a Pending run's next move: what it waits on (StartGate) written, its quotas and
// Kueue asked, its place in line written when it must be, or its start.
func (f Facts) starting() Action {
	s := f.Start
	switch {
	case s == nil:
		return Action{Kind: Look, Need: NeedStart}
	case s.Problem != "":
		return Action{Kind: Write, Update: Fail(f.Status, v1alpha1.ReasonConfigInvalid, s.Problem, f.Now)}
	case s.Pinned:
		return Action{Kind: Begin}
	}
	g := *s
	g.Now, g.Status = f.Now, f.Status
	switch d, wait := StartGate(g); wait {
	case StartGo:
	case StartWaitsForSecret:
		return Action{Kind: Write, Update: d, After: SecretRetry}
	default:
		return Action{Kind: Write, Update: d}
	}
	a := s.Admission
	switch {
	case a == nil:
		return Action{Kind: Admit}
	case a.Invalid != "":
		return Action{Kind: Write, Update: Fail(f.Status, v1alpha1.ReasonConfigInvalid, a.Invalid, f.Now)}
	case !a.Admit:
		return f.queued(a)
	}
	return Action{Kind: Begin}
}

// queued keeps a run its quotas or Kueue hold Queued. Kueue's word changes only when its
// Workload does, which brings the run back: it is written whenever it changes. A place in a
// quotas' line is written at most every QueuedRewrite, and the run comes back sooner the nearer
// it is to the head of the line.
func (f Facts) queued(a *Admission) Action {
	reason, message := QueuedFor(&f.Status)
	if a.Reason != v1alpha1.ReasonQuotaExceeded {
		if reason == a.Reason && message == a.Message && !a.KueueChanged {
			return Action{Kind: Wait}
		}
		return Action{Kind: Write, Update: Queue(f.Status, a.Reason, a.Message, f.Now)}
	}
	back := time.Second + time.Duration(min(a.Place, 300))*100*time.Millisecond
	if !a.Written.IsZero() && reason == a.Reason && f.Now.Sub(a.Written) < QueuedRewrite {
		return Action{Kind: Wait, After: back}
	}
	return Action{Kind: WriteQueued, Update: Queue(f.Status, a.Reason, a.Message, f.Now), After: back}
}

// SessionFacts are what a turn's start depends on of its session.
type SessionFacts struct {
	// Name is the session's name; Found says whether it exists.
	Name  string
	Found bool
	// EndReason and EndMessage say why the session ended, once it has.
	EndReason, EndMessage string
	// EndedBefore says the session had ended when the turn was created.
	EndedBefore bool
	// Before names the turn before this one that has not ended, if any: this one waits for it.
	Before string
	// Spent says why the session has nothing left for this turn (its turns before it took
	// limits.maxTurns, or used its tokens or cost up); empty while it has.
	Spent string
}

// StartWait is what a Pending run waits on before it may be admitted.
type StartWait int

const (
	// StartGo is nothing: the run goes on to its quotas and Kueue.
	StartGo StartWait = iota
	// StartEnds is a run that cannot start, and ends.
	StartEnds
	// StartWaitsForConfig is a run whose AgentConfig does not exist.
	StartWaitsForConfig
	// StartWaitsForSession is a turn whose session does not exist, or runs an earlier turn.
	StartWaitsForSession
	// StartWaitsForSecret is a run a Secret of whose agents cannot be read. Secrets are not
	// watched.
	StartWaitsForSecret
)

// StartGate decides whether a Pending run may go on to be admitted, and if not, the update that
// keeps it waiting or ends it. The first reason wins: a config that cannot run, a config that
// does not exist, the turn's session (missing, ended, busy with an earlier turn), a Secret.
func StartGate(f StartFacts) (Update, StartWait) {
	switch {
	case f.Invalid != "":
		return Fail(f.Status, v1alpha1.ReasonConfigInvalid, f.Invalid, f.Now), StartEnds
	case !f.ConfigFound:
		return WaitForConfig(f.Status, f.Config, f.Now), StartWaitsForConfig
	}
	if s := f.Session; s != nil {
		if d, wait := sessionGate(f.Status, s, f.Now); wait != StartGo {
			return d, wait
		}
	}
	if f.MissingSecret != "" {
		return WaitForSecret(f.Status, f.MissingSecret, f.Now), StartWaitsForSecret
	}
	return Update{}, StartGo
}

// sessionGate keeps a turn from starting before its session lets it: a turn waits Pending for
// a session that does not exist, fails SessionEnded when created after its session ended or
// when the turns before it used the session's limits up, is cancelled when its session ends
// while it waits, and waits Queued (SessionBusy) for the turn before it, outside any quota's
// line. A turn is checked against the limits when it is next, whatever the session's status
// says yet.
func sessionGate(st v1alpha1.AgentRunStatus, s *SessionFacts, now time.Time) (Update, StartWait) {
	switch {
	case !s.Found:
		return waitPending(st, v1alpha1.ReasonSessionNotFound, EventWaitingForSession,
			fmt.Sprintf("AgentSession %s does not exist in the run's namespace; the turn starts when it is created", s.Name), now), StartWaitsForSession
	case s.EndReason != "" && s.EndedBefore:
		return Fail(st, v1alpha1.ReasonSessionEnded, sessionEnd(s, "before this turn was created"), now), StartEnds
	case s.EndReason != "":
		return Fail(st, v1alpha1.ReasonCancelled, sessionEnd(s, "while this turn waited"), now), StartEnds
	case s.Spent != "":
		return Fail(st, v1alpha1.ReasonSessionEnded, fmt.Sprintf("session %s: %s", s.Name, s.Spent), now), StartEnds
	case s.Before != "":
		return Queue(st, v1alpha1.ReasonSessionBusy,
			fmt.Sprintf("session %s: waits for turn %s to end", s.Name, s.Before), now), StartWaitsForSession
	}
	return Update{}, StartGo
}

func sessionEnd(s *SessionFacts, when string) string {
	msg := fmt.Sprintf("session %s ended (%s) %s", s.Name, s.EndReason, when)
	if s.EndMessage != "" {
		msg += ": " + s.EndMessage
	}
	return msg
}
