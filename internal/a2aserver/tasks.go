package a2aserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/transcriptapi"
)

// team is an exposed team's A2A agent, for one caller's request.
type team struct {
	h      *Handler
	cfg    *v1alpha1.AgentConfig
	caller user.Info
	// req is the caller's request, whose credentials are checked again while a task is
	// followed.
	req *http.Request
}

var _ a2asrv.RequestHandler = (*team)(nil)

// started is a run a message started or replied to; seq, for a reply, is the decision's
// sequence number: until the run has applied it, what the run says is from before the reply.
// created is set for a run the message just created, which the cache may not hold yet.
type started struct {
	run     *v1alpha1.AgentRun
	seq     int64
	created bool
}

// current reports whether what the run says follows the message: it has taken the message in,
// or it ended (a run that ends takes no more decisions).
func (s started) current(run *v1alpha1.AgentRun) bool {
	return run.Status.LastDecision >= s.seq || run.Status.Phase.Terminal()
}

// first is the task as a send answers it at once: for a reply, at work on it, since the run
// still says what it said before the reply.
func (s started) first() *a2a.Task {
	task := TaskOf(s.run)
	if s.seq > 0 && !s.current(s.run) {
		task.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: task.Status.Timestamp}
	}
	return task
}

// noPush refuses a send that asks for push notifications, which are not served.
func noPush(req *a2a.SendMessageRequest) error {
	if req.Config != nil && req.Config.PushConfig != nil {
		return a2a.ErrPushNotificationNotSupported
	}
	return nil
}

// SendMessage starts or replies to a task and, unless the request says returnImmediately,
// waits until the task ends or asks for input, or for the stream lifetime: a send that waits
// longer is answered with the task as it is then.
func (t *team) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if err := noPush(req); err != nil {
		return nil, err
	}
	wait := req.Config == nil || !req.Config.ReturnImmediately
	if wait {
		release, err := t.hold()
		if err != nil {
			return nil, err
		}
		defer release()
	}
	s, err := t.send(ctx, req.Message)
	if err != nil {
		return nil, err
	}
	if !wait {
		return s.first(), nil
	}
	last := s.first()
	for run, err := range t.follow(ctx, s) {
		var ended *lifetimeEnded
		if errors.As(err, &ended) {
			break
		}
		if err != nil {
			return nil, err
		}
		last = TaskOf(run)
		if settled(last.Status.State) {
			break
		}
	}
	return last, nil
}

func (t *team) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := noPush(req); err != nil {
			yield(nil, err)
			return
		}
		release, err := t.hold()
		if err != nil {
			yield(nil, err)
			return
		}
		defer release()
		s, err := t.send(ctx, req.Message)
		if err != nil {
			yield(nil, err)
			return
		}
		t.stream(ctx, s, yield)
	}
}

func (t *team) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		release, err := t.hold()
		if err != nil {
			yield(nil, err)
			return
		}
		defer release()
		run, err := t.task(ctx, req.ID, "get")
		if err != nil {
			yield(nil, err)
			return
		}
		if run.Status.Phase.Terminal() {
			yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, fmt.Sprintf("task %s ended %s: there is nothing to follow; get it instead", run.Name, run.Status.Phase)))
			return
		}
		t.stream(ctx, started{run: run}, yield)
	}
}

func (t *team) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	run, err := t.task(ctx, req.ID, "get")
	if err != nil {
		return nil, err
	}
	return TaskOf(run), nil
}

// CancelTask asks the run to end Cancelled, and answers with the task once it has, or as it
// is after a few seconds.
func (t *team) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	run, err := t.task(ctx, req.ID, "update")
	if err != nil {
		return nil, err
	}
	if run.Status.Phase.Terminal() {
		if run.Status.Phase == v1alpha1.PhaseCancelled {
			return TaskOf(run), nil
		}
		return nil, a2a.NewError(a2a.ErrTaskNotCancelable, fmt.Sprintf("task %s ended %s", run.Name, run.Status.Phase))
	}
	patch := client.MergeFrom(run.DeepCopy())
	if run.Annotations == nil {
		run.Annotations = map[string]string{}
	}
	run.Annotations[v1alpha1.AnnotationCancel] = fmt.Sprintf(defaultCancelledReason, t.caller.GetName())
	if err := t.h.Client.Patch(ctx, run, patch); err != nil {
		return nil, fmt.Errorf("cancelling task %s: %w", run.Name, err)
	}
	wait, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	last := run
	for r, err := range t.follow(wait, started{run: run}) {
		if err != nil {
			break
		}
		last = r
		if r.Status.Phase.Terminal() {
			break
		}
	}
	return TaskOf(last), nil
}

func (t *team) ListTasks(context.Context, *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return nil, a2a.NewError(a2a.ErrUnsupportedOperation, "listing tasks is not served: list the team's runs with kubectl get agentruns -l "+v1alpha1.LabelA2ATask)
}

func (t *team) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (t *team) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (t *team) CreateTaskPushConfig(context.Context, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (t *team) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return a2a.ErrPushNotificationNotSupported
}

func (t *team) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}

// send starts a run for a message, or replies with it to the task it names.
func (t *team) send(ctx context.Context, msg *a2a.Message) (started, error) {
	if msg == nil || msg.ID == "" || len(msg.ID) > maxIDBytes || len(msg.ContextID) > maxIDBytes {
		return started{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("a message needs a messageId, and IDs of at most %d bytes", maxIDBytes))
	}
	input, err := inputOf(msg)
	if err != nil {
		return started{}, err
	}
	if msg.TaskID != "" {
		return t.reply(ctx, msg, input)
	}
	return t.start(ctx, msg, input)
}

// start starts the team's run for a message: its name comes from the sender and the message's
// ID, so that a message sent again finds the run it started.
func (t *team) start(ctx context.Context, msg *a2a.Message, input string) (started, error) {
	ns := t.cfg.Namespace
	if err := t.allowed(ctx, "create", ""); err != nil {
		return started{}, err
	}
	digest := taskDigest(ns, t.cfg.Name, t.caller.GetName(), msg.ID)
	contextID := msg.ContextID
	if contextID == "" {
		contextID = a2a.NewContextID()
	}
	session, err := t.contextSession(ctx, contextID)
	if err != nil {
		return started{}, err
	}
	run := &v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{Name: taskName(t.cfg.Name, digest), Namespace: ns,
			Labels:      map[string]string{v1alpha1.LabelA2ATask: digest},
			Annotations: map[string]string{v1alpha1.AnnotationA2AContext: contextID, v1alpha1.AnnotationCreatedBy: t.caller.GetName()}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: t.cfg.Name}, Input: input,
			Session: &v1alpha1.SessionReference{Name: session}},
	}
	err = t.h.Client.Create(ctx, run)
	if apierrors.IsAlreadyExists(err) {
		// The message was sent before: its run is the task.
		existing := &v1alpha1.AgentRun{}
		if err := t.h.Reader.Get(ctx, client.ObjectKeyFromObject(run), existing); err != nil {
			return started{}, fmt.Errorf("reading task %s: %w", run.Name, err)
		}
		// The name comes from what the sender sent: a run someone else made under it, of
		// another team or by another creator, is never taken for this message's task.
		if existing.Labels[v1alpha1.LabelA2ATask] != digest || existing.Spec.ConfigRef.Name != t.cfg.Name ||
			existing.Annotations[v1alpha1.AnnotationCreatedBy] != t.caller.GetName() {
			return started{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("an AgentRun named %s, which is not this message's task, is in the way: send the message with another messageId", run.Name))
		}
		return started{run: existing, created: true}, nil
	}
	if err != nil {
		return started{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("starting a run of %s: %v", t.cfg.Name, err))
	}
	return started{run: run, created: true}, nil
}

// reply gives a task that asks for input the message as a person's reply, queued for the
// operator as the sender's decision.
func (t *team) reply(ctx context.Context, msg *a2a.Message, input string) (started, error) {
	if n := len([]rune(input)); n > decisions.MaxValue {
		return started{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("a reply is %d characters, and at most %d", n, decisions.MaxValue))
	}
	run, err := t.task(ctx, msg.TaskID, "update")
	if err != nil {
		return started{}, err
	}
	if msg.ContextID != "" && msg.ContextID != run.Annotations[v1alpha1.AnnotationA2AContext] {
		return started{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("task %s is not in context %s", run.Name, msg.ContextID))
	}
	var seq int64
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := t.h.Reader.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
			return err
		}
		if err := waitsForReply(run); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(run.DeepCopy(), client.MergeFromWithOptimisticLock{})
		d := decisions.Queued{Action: decisions.Reply, Reply: input, By: t.caller.GetName(), Time: metav1.NewTime(t.h.now())}
		queued, err := decisions.Add(maps.Clone(run.Annotations), d, run.Status.LastDecision)
		if err != nil {
			return a2a.NewError(a2a.ErrInvalidParams, err.Error())
		}
		q, _ := decisions.Read(queued)
		seq = q[len(q)-1].Seq
		run.Annotations = queued
		return t.h.Client.Patch(ctx, run, patch)
	})
	if err != nil {
		return started{}, err
	}
	return started{run: run, seq: seq}, nil
}

// waitsForReply says why a task cannot take a reply, if it cannot.
func waitsForReply(run *v1alpha1.AgentRun) error {
	switch st := &run.Status; {
	case st.Phase == v1alpha1.PhaseAwaitingInput:
		return nil
	case st.Phase.Terminal():
		return a2a.NewError(a2a.ErrUnsupportedOperation, fmt.Sprintf("task %s ended %s: send a new message, in the same context, to start another", run.Name, st.Phase))
	case st.Phase == v1alpha1.PhaseAwaitingApproval:
		return a2a.NewError(a2a.ErrUnsupportedOperation, statusOf(run).Message.Parts[0].Text())
	default:
		return a2a.NewError(a2a.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s and asks for no input", run.Name, st.Phase))
	}
}

// task is the run a task ID names, if it is one of the team's A2A tasks and the caller sent
// it or may do verb on it.
func (t *team) task(ctx context.Context, id a2a.TaskID, verb string) (*v1alpha1.AgentRun, error) {
	run := &v1alpha1.AgentRun{}
	notFound := a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", id))
	if len(id) > maxIDBytes || !strings.HasPrefix(string(id), taskPrefix(t.cfg.Name)) {
		return nil, notFound
	}
	key := client.ObjectKey{Namespace: t.cfg.Namespace, Name: string(id)}
	err := t.h.Client.Get(ctx, key, run)
	if apierrors.IsNotFound(err) {
		// A task just started may not be in the cache yet.
		err = t.h.Reader.Get(ctx, key, run)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound
		}
		return nil, err
	}
	if run.Labels[v1alpha1.LabelA2ATask] == "" || run.Spec.ConfigRef.Name != t.cfg.Name {
		return nil, notFound
	}
	if run.Annotations[v1alpha1.AnnotationCreatedBy] == t.caller.GetName() {
		return run, nil
	}
	if err := t.allowed(ctx, verb, run.Name); err != nil {
		if verb == "get" || t.allowed(ctx, "get", run.Name) != nil {
			// Whoever may not read a task is not told that it exists.
			return nil, notFound
		}
		return nil, err
	}
	return run, nil
}

// allowed says whether the caller may do verb on agentruns of the team's namespace.
func (t *team) allowed(ctx context.Context, verb, name string) error {
	status, msg := t.h.Auth.Allowed(ctx, t.caller, transcriptapi.Access{Verb: verb, Resource: "agentruns", Namespace: t.cfg.Namespace, Name: name})
	switch status {
	case http.StatusOK:
		return nil
	case http.StatusForbidden:
		return a2a.NewError(a2a.ErrUnauthorized, msg)
	default:
		return fmt.Errorf("%s", msg)
	}
}

// inputOf is a message's text parts, joined, and its data parts as JSON: the run's input.
func inputOf(msg *a2a.Message) (string, error) {
	var parts []string
	for _, p := range msg.Parts {
		switch {
		case p.Text() != "":
			parts = append(parts, p.Text())
		case p.Data() != nil:
			b, err := json.Marshal(p.Data())
			if err != nil {
				return "", a2a.NewError(a2a.ErrInvalidParams, "a data part cannot be read: "+err.Error())
			}
			parts = append(parts, string(b))
		default:
			return "", a2a.NewError(a2a.ErrUnsupportedContentType, "a team takes text and data parts; send files as URLs in text")
		}
	}
	input := strings.Join(parts, "\n")
	if strings.TrimSpace(input) == "" {
		return "", a2a.NewError(a2a.ErrInvalidParams, "the message says nothing: give the team its task in a text part")
	}
	if len(input) > maxInput {
		return "", a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("the message is %d bytes, and a run's input at most %d", len(input), maxInput))
	}
	return input, nil
}

// maxInput is what an AgentRun's spec.input holds (and a reply's, decisions.MaxValue, is less).
const maxInput = 32768

// taskDigest names a task from the message that starts it: the same sender's same message to
// the same team is the same task.
func taskDigest(namespace, config, sender, messageID string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{namespace, config, sender, messageID}, "\x00")))
	return hex.EncodeToString(sum[:])[:32]
}

// taskName is the run's name: the config's, cut, and the digest's start.
func taskName(config, digest string) string {
	return taskPrefix(config) + digest[:12]
}

// taskPrefix is how the names of a team's tasks begin.
func taskPrefix(config string) string {
	return strings.TrimRight(config[:min(len(config), 40)], "-.") + "-a2a-"
}
