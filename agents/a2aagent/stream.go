package a2aagent

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/baton-dev/baton/agents"
)

// maxArtifacts bounds the artifacts a streamed task may build up.
const maxArtifacts = 64

// stream sends the message as a stream and follows the task until it ends or asks for input,
// telling updates what the agent reports on the way. A stream that breaks off before then
// is followed by reading the task until it does.
func stream(ctx context.Context, client *a2aclient.Client, send *a2a.SendMessageRequest, updates agents.Updates, deps agents.Dependencies) (finalState, error) {
	var task *a2a.Task
	// A reply's stream may start with the task as it was, still asking: until a status update
	// comes, a task asking is that.
	stale := send.Message.TaskID != ""
	for ev, err := range client.SendStreamingMessage(ctx, send) {
		if err != nil {
			if task != nil && ctx.Err() == nil {
				break // read the task below
			}
			return finalState{}, fmt.Errorf("streaming the step's message: %w", err)
		}
		switch e := ev.(type) {
		case *a2a.Message:
			return finalState{message: e}, nil
		case *a2a.Task:
			task = e
			if stale && e.Status.State == a2a.TaskStateInputRequired {
				continue
			}
		case *a2a.TaskStatusUpdateEvent:
			stale = false
			if task == nil {
				task = &a2a.Task{ID: e.TaskID, ContextID: e.ContextID}
			}
			task.Status = e.Status
			if updates != nil && !settled(e.Status.State) && e.Status.Message != nil {
				updates.Report(ctx, string(e.Status.State), texts(e.Status.Message.Parts))
			}
		case *a2a.TaskArtifactUpdateEvent:
			if task == nil {
				task = &a2a.Task{ID: e.TaskID, ContextID: e.ContextID}
			}
			task.Artifacts = addArtifact(task.Artifacts, e)
		}
		if task != nil && settled(task.Status.State) {
			return finalState{task: task}, nil
		}
	}
	if task == nil {
		return finalState{}, fmt.Errorf("the A2A agent's stream ended without a task or a message")
	}
	t, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		return finalState{}, fmt.Errorf("the stream ended before task %s did, and reading it: %w", task.ID, err)
	}
	return waitFor(ctx, client, t, deps)
}

// addArtifact adds an artifact update to a task's artifacts: a chunk to append to one it has,
// or a new one. Past maxArtifacts, new ones are dropped.
func addArtifact(arts []*a2a.Artifact, e *a2a.TaskArtifactUpdateEvent) []*a2a.Artifact {
	if e.Artifact == nil {
		return arts
	}
	for _, a := range arts {
		if a.ID == e.Artifact.ID {
			if e.Append {
				a.Parts = append(a.Parts, e.Artifact.Parts...)
			} else {
				*a = *e.Artifact
			}
			return arts
		}
	}
	if len(arts) >= maxArtifacts {
		return arts
	}
	return append(arts, e.Artifact)
}
