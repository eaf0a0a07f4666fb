package a2aserver

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// follow yields the run each time it changes, from the first time it has taken the message in,
// until ctx ends or the caller stops. A run deleted while it is followed (or, just created,
// never seen in the cache within goneAfter) ends the following with TaskNotFound.
func (t *team) follow(ctx context.Context, s started) iter.Seq2[*v1alpha1.AgentRun, error] {
	return func(yield func(*v1alpha1.AgentRun, error) bool) {
		version := ""
		seen, since := !s.created, t.h.now()
		tick := time.NewTicker(t.h.poll())
		defer tick.Stop()
		for {
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
