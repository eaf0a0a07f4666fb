package a2aserver

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// follow yields the run each time it changes, from the first time it has taken the message in,
// until ctx ends or the caller stops. A run deleted while it is followed (or, just created,
// never seen in the cache within goneAfter) ends the following with TaskNotFound; so does the
// stream lifetime, and the caller's losing the right to follow it (mayGoOn).
func (t *team) follow(ctx context.Context, s started) iter.Seq2[*v1alpha1.AgentRun, error] {
	return func(yield func(*v1alpha1.AgentRun, error) bool) {
		version := ""
		seen, since := !s.created, t.h.now()
		checked := since
		tick := time.NewTicker(t.h.poll())
		defer tick.Stop()
		for {
			if err := t.mayGoOn(ctx, s.run, since, &checked); err != nil {
				yield(nil, err)
				return
			}
			run := &v1alpha1.AgentRun{}
			err := t.h.Client.Get(ctx, client.ObjectKeyFromObject(s.run), run)
			switch {
			case apierrors.IsNotFound(err) && (seen || t.h.now().Sub(since) >= goneAfter):
				yield(nil, a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s was deleted", s.run.Name)))
				return
			case apierrors.IsNotFound(err):
			case err != nil:
				yield(nil, err)
				return
			case run.ResourceVersion != version && s.current(run):
				seen, version = true, run.ResourceVersion
				if !yield(run, nil) {
					return
				}
			default:
				seen = true
			}
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-tick.C:
			}
		}
	}
}

// goneAfter is how long a run just created may be missing from the cache before it is taken
// for deleted.
const goneAfter = 30 * time.Second

// stream yields the task, then its changes, until it ends or asks for input: a status update
// for each change of state or of what it says, and the output as an artifact before it
// completes.
func (t *team) stream(ctx context.Context, s started, yield func(a2a.Event, error) bool) {
	first := s.first()
	if !yield(first, nil) {
		return
	}
	last := first.Status
	for run, err := range t.follow(ctx, s) {
		if err != nil {
			yield(nil, err)
			return
		}
		task := TaskOf(run)
		if task.Status.State == last.State && sameWords(task.Status, last) {
			continue
		}
		last = task.Status
		if task.Status.State == a2a.TaskStateCompleted {
			for _, a := range task.Artifacts {
				if !yield(&a2a.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Artifact: a, LastChunk: true}, nil) {
					return
				}
			}
		}
		if !yield(&a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status, Metadata: task.Metadata}, nil) {
			return
		}
		if settled(task.Status.State) {
			return
		}
	}
}

func sameWords(a, b a2a.TaskStatus) bool {
	if a.Message == nil || b.Message == nil {
		return a.Message == b.Message
	}
	return a.Message.ID == b.Message.ID
}

// mayGoOn says why following run, since then, must end, if it must: it has lasted the stream
// lifetime, or, checked again every Reauthorize since checked, the caller may no longer follow
// it (recheck).
func (t *team) mayGoOn(ctx context.Context, run *v1alpha1.AgentRun, since time.Time, checked *time.Time) error {
	now := t.h.now()
	if lifetime := t.h.streamLifetime(); now.Sub(since) >= lifetime {
		return &lifetimeEnded{task: run.Name, lifetime: lifetime}
	}
	if now.Sub(*checked) < t.h.reauthorize() {
		return nil
	}
	*checked = now
	return t.recheck(ctx, run)
}

// recheck says whether the caller may still follow run, as they might when they asked: the
// credentials of their request still authenticate them, they may still get the AgentConfig, it
// is still served, and the task is still theirs or they may still get its run. Access taken
// away while a task waits for days ends the call that follows it.
func (t *team) recheck(ctx context.Context, run *v1alpha1.AgentRun) error {
	ns, name := t.cfg.Namespace, t.cfg.Name
	u, status, msg := t.h.authorize(t.req, ns, name)
	if status == http.StatusOK && u.GetName() != t.caller.GetName() {
		status, msg = http.StatusUnauthorized, "the credentials now name another user"
	}
	if status == http.StatusOK {
		_, status, msg = t.h.exposed(ctx, ns, name)
	}
	switch status {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return a2a.NewError(a2a.ErrUnauthenticated, "the credentials this call was made with no longer authenticate: "+msg)
	case http.StatusForbidden:
		return a2a.NewError(a2a.ErrUnauthorized, msg)
	case http.StatusNotFound:
		return a2a.NewError(a2a.ErrUnsupportedOperation, msg)
	default:
		return fmt.Errorf("checking again that %s may follow task %s: %s", t.caller.GetName(), run.Name, msg)
	}
	if run.Annotations[v1alpha1.AnnotationCreatedBy] == t.caller.GetName() {
		return nil
	}
	if err := t.allowed(ctx, "get", run.Name); err != nil {
		// Whoever may not read a task is not told that it exists.
		return a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", run.Name))
	}
	return nil
}

// lifetimeEnded ends a call that followed its task for the stream lifetime.
type lifetimeEnded struct {
	task     string
	lifetime time.Duration
}

func (e *lifetimeEnded) Error() string {
	return fmt.Sprintf("task %s has been followed for %s, the longest a stream lasts here: subscribe to it again to go on", e.task, e.lifetime)
}

// Unwrap makes it a server error to A2A clients.
func (e *lifetimeEnded) Unwrap() error { return a2a.ErrServerError }

// hold takes one of the caller's places for a call that follows a task, and gives back what
// releases it; past MaxCallerStreams the call is refused before anything is read or started.
func (t *team) hold() (func(), error) {
	caller := t.caller.GetName()
	if !t.h.holdStream(caller) {
		return nil, a2a.NewError(a2a.ErrServerError, fmt.Sprintf("%s follows %d tasks at once (streams, subscriptions and sends that wait), the most one caller may: "+
			"send with returnImmediately and get the task, or try again when one has ended", caller, orDefault(t.h.MaxCallerStreams, DefaultMaxCallerStreams)))
	}
	return func() { t.h.releaseStream(caller) }, nil
}
