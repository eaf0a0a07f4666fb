// Package webhook is Baton's admission webhook for AgentRuns: it records who created each run
// and who made each decision people annotate, checks that an approver may approve and that a
// run that reads another (spec.from, spec.replay) is created by someone who may get it, and
// queues decisions for the operator; and it tells the operator whether it is installed (Trust), so that
// what it records is trusted only while it is.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
)

// Path is where the API server sends AgentRun creates and updates.
const Path = "/mutate-agents-baton-dev-v1alpha1-agentrun"

// The webhook is called for every create, which it stamps with its creator, and otherwise only
// for writes that carry a decision, touch the decision queue, change the creator, or change the
// marks of a branch run (the agents.baton.dev/parent label, a controller reference to an
// AgentRun: branches.go) or of a turn (its number, its session label: sessions.go)
// (matchConditions), so other updates of AgentRuns never depend on it
// being up. Those it is called for are refused while it is down (failurePolicy Fail), never
// let through unattributed: no run is created without a recorded creator, no decision is taken
// without knowing who made it, and no run is made to look like a branch by anyone.
// In the condition, '/' stands for a label that is not there: no label value has one.
// +kubebuilder:webhook:path=/mutate-agents-baton-dev-v1alpha1-agentrun,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=agents.baton.dev,resources=agentruns,verbs=create;update,versions=v1alpha1,name=decisions.agents.baton.dev,admissionReviewVersions=v1,reinvocationPolicy=Never,patch=`{"matchConditions":[{"name":"create-decision-queue-creator-or-branch-marks","expression":"request.operation == 'CREATE' || (has(object.metadata.annotations) && object.metadata.annotations.exists(k, k in ['agents.baton.dev/approve','agents.baton.dev/reject','agents.baton.dev/reply','agents.baton.dev/revise','agents.baton.dev/feedback'])) || ((has(object.metadata.annotations) && 'agents.baton.dev/decisions' in object.metadata.annotations ? object.metadata.annotations['agents.baton.dev/decisions'] : '') != (oldObject != null && has(oldObject.metadata.annotations) && 'agents.baton.dev/decisions' in oldObject.metadata.annotations ? oldObject.metadata.annotations['agents.baton.dev/decisions'] : '')) || ((has(object.metadata.annotations) && 'agents.baton.dev/created-by' in object.metadata.annotations ? object.metadata.annotations['agents.baton.dev/created-by'] : '') != (oldObject != null && has(oldObject.metadata.annotations) && 'agents.baton.dev/created-by' in oldObject.metadata.annotations ? oldObject.metadata.annotations['agents.baton.dev/created-by'] : '')) || ((has(object.metadata.annotations) && 'agents.baton.dev/turn' in object.metadata.annotations ? object.metadata.annotations['agents.baton.dev/turn'] : '') != (oldObject != null && has(oldObject.metadata.annotations) && 'agents.baton.dev/turn' in oldObject.metadata.annotations ? oldObject.metadata.annotations['agents.baton.dev/turn'] : '')) || (oldObject != null && (has(object.metadata.labels) && 'agents.baton.dev/session' in object.metadata.labels ? object.metadata.labels['agents.baton.dev/session'] : '/') != (has(oldObject.metadata.labels) && 'agents.baton.dev/session' in oldObject.metadata.labels ? oldObject.metadata.labels['agents.baton.dev/session'] : '/')) || (oldObject != null && ((has(object.metadata.labels) && 'agents.baton.dev/parent' in object.metadata.labels ? object.metadata.labels['agents.baton.dev/parent'] : '/') != (has(oldObject.metadata.labels) && 'agents.baton.dev/parent' in oldObject.metadata.labels ? oldObject.metadata.labels['agents.baton.dev/parent'] : '/') || (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences.filter(r, r.kind == 'AgentRun' && has(r.controller) && r.controller) : []) != (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences.filter(r, r.kind == 'AgentRun' && has(r.controller) && r.controller) : [])))"}]}`
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// Decisions admits the decisions people annotate on AgentRuns. For an approve, reject or
// reply annotation it records who asked (the request's Kubernetes user), checks with a
// SubjectAccessReview that an approver may approve, and moves the decision into the run's
// queue of decisions, where the operator applies it once, in order, whenever it runs. A person
// who may not approve is refused by the API server, with the permission that is missing.
//
// It also records who created each run (the created-by annotation), for gates that need an
// approver other than the run's creator, and refuses anyone but the operator who changes it.
type Decisions struct {
	// Client creates SubjectAccessReviews.
	Client client.Client
	// Self is the operator's own user: the only one that may change the queue directly.
	Self  string
	Clock clock.PassiveClock

	decoder admission.Decoder
}

// NewDecisions builds the webhook; it asks the API server who the operator is.
func NewDecisions(ctx context.Context, c client.Client, decoder admission.Decoder, clk clock.PassiveClock) (*Decisions, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("asking the API server who the operator is: %w", err)
	}
	return &Decisions{Client: c, Self: review.Status.UserInfo.Username, Clock: clk, decoder: decoder}, nil
}

// Handle admits one AgentRun create or update.
func (w *Decisions) Handle(ctx context.Context, req admission.Request) admission.Response {
	run := &v1alpha1.AgentRun{}
	if err := w.decoder.Decode(req, run); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	old := &v1alpha1.AgentRun{}
	if len(req.OldObject.Raw) > 0 {
		if err := w.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if why := w.branchMarks(req.AdmissionRequest, run, old); why != "" {
		return admission.Denied(why)
	}
	user := req.UserInfo.Username
	annotations, refused := w.attribute(ctx, req, run, old)
	if refused != nil {
		return *refused
	}
	marks, refused := w.turnOf(ctx, req, run)
	if refused != nil {
		return *refused
	}
	if user == w.Self {
		return withAnnotations(req, run, annotations, marks)
	}
	if run.Annotations[v1alpha1.AnnotationDecisions] != old.Annotations[v1alpha1.AnnotationDecisions] {
		return admission.Denied(fmt.Sprintf("the annotation %s is written only by Baton; decide with %s, %s or %s",
			v1alpha1.AnnotationDecisions, v1alpha1.AnnotationApprove, v1alpha1.AnnotationReject, v1alpha1.AnnotationReply))
	}
	// revise and feedback belong to the decision made in the same request, never to one made
	// later by someone else.
	var leftover []string
	for _, k := range []string{v1alpha1.AnnotationRevise, v1alpha1.AnnotationFeedback} {
		if v, ok := annotations[k]; ok && old.Annotations != nil && old.Annotations[k] == v {
			delete(annotations, k)
			leftover = append(leftover, k)
		}
	}
	d, ok := decisions.Take(annotations, user, metav1.NewTime(w.Clock.Now()))
	if !ok {
		for _, k := range []string{v1alpha1.AnnotationRevise, v1alpha1.AnnotationFeedback} {
			if _, set := annotations[k]; set {
				return admission.Denied(fmt.Sprintf("%s goes with %s, %s or %s in the same kubectl annotate", k,
					v1alpha1.AnnotationApprove, v1alpha1.AnnotationReject, v1alpha1.AnnotationReply))
			}
		}
		return withAnnotations(req, run, annotations, marks)
	}
	for _, k := range leftover {
		delete(annotations, k)
	}
	if old.Status.Phase.Terminal() {
		return admission.Denied(fmt.Sprintf("AgentRun %s ended %s (%s); decisions no longer apply to it",
			run.Name, old.Status.Phase, old.Status.TerminationReason))
	}
	if refused := w.mayDecide(ctx, req, run, d.Action); refused != nil {
		return *refused
	}
	queued, err := decisions.Add(annotations, d, old.Status.LastDecision)
	if err != nil {
		return admission.Denied(err.Error())
	}
	return withAnnotations(req, run, queued, marks)
}

// attribute is the run's annotations with who created it: stamped on a create, whatever the
// request says (but the operator creates runs for the callers it authenticated, an A2A message,
// and names them), and never changed after. A create of a run that reads another (spec.from,
// spec.replay) by someone who may not get that run is refused. refused is the answer that
// refuses the request, if one does.
func (w *Decisions) attribute(ctx context.Context, req admission.Request, run, old *v1alpha1.AgentRun) (annotations map[string]string, refused *admission.Response) {
	refuse := func(r admission.Response) (map[string]string, *admission.Response) { return nil, &r }
	user := req.UserInfo.Username
	annotations = maps.Clone(run.Annotations)
	if req.Operation != admissionv1.Create {
		if user != w.Self && changed(old.Annotations, run.Annotations, v1alpha1.AnnotationCreatedBy) {
			return refuse(admission.Denied(fmt.Sprintf("the annotation %s is written only by Baton, when the run is created: it records who created the run, and nobody may set, change or remove it",
				v1alpha1.AnnotationCreatedBy)))
		}
		if user != w.Self && (changed(old.Annotations, run.Annotations, v1alpha1.AnnotationTurn) || changed(old.Labels, run.Labels, v1alpha1.LabelSession)) {
			return refuse(admission.Denied(fmt.Sprintf("the annotation %s and the label %s are written only by Baton, when a turn is created: they put the turn in its place in its session",
				v1alpha1.AnnotationTurn, v1alpha1.LabelSession)))
		}
		return annotations, nil
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	if user != w.Self || annotations[v1alpha1.AnnotationCreatedBy] == "" {
		annotations[v1alpha1.AnnotationCreatedBy] = user
	}
	if user == w.Self {
		return annotations, nil
	}
	for _, check := range []func(context.Context) (string, error){
		func(ctx context.Context) (string, error) { return w.mayRead(ctx, req, run) },
		func(ctx context.Context) (string, error) { return w.priorityClass(ctx, run) },
	} {
		why, err := check(ctx)
		switch {
		case err != nil:
			return refuse(admission.Errored(http.StatusInternalServerError, err))
		case why != "":
			return refuse(admission.Denied(why))
		}
	}
	return annotations, nil
}

// changed reports whether the annotation was set, changed or removed between old and updated.
func changed(old, updated map[string]string, key string) bool {
	was, had := old[key]
	is, has := updated[key]
	return had != has || was != is
}

// withAnnotations admits the object with these annotations, and a turn with its marks; nothing
// else of it changed.
func withAnnotations(req admission.Request, run *v1alpha1.AgentRun, annotations map[string]string, marks *turnMarks) admission.Response {
	if maps.Equal(run.Annotations, annotations) && marks == nil {
		return admission.Allowed("")
	}
	obj := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(req.Object.Raw))
	// Numbers stay as they were written.
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	if marks != nil {
		if annotations == nil {
			annotations = map[string]string{}
		}
		labels := maps.Clone(run.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		marks.mark(annotations, labels)
		meta["labels"] = labels
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		spec["configRef"] = map[string]any{"name": marks.configRef}
	}
	if len(annotations) == 0 {
		delete(meta, "annotations")
	} else {
		meta["annotations"] = annotations
	}
	patched, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, patched)
}

// mayApprove asks the API server whether the requesting user may approve this run.
func (w *Decisions) mayApprove(ctx context.Context, req admission.Request, run *v1alpha1.AgentRun) (bool, error) {
	allowed, err := w.may(ctx, req, run.Namespace, v1alpha1.ApproveVerb, run.Name)
	if err != nil {
		return false, fmt.Errorf("checking the approve permission: %w", err)
	}
	return allowed, nil
}

// mayRead says why the requesting user may not create a run that reads another run of the
// namespace (spec.from continues it, spec.replay replays it), if they may not: a run's records
// and ends are for those who may get it, as the transcript API holds them.
func (w *Decisions) mayRead(ctx context.Context, req admission.Request, run *v1alpha1.AgentRun) (string, error) {
	var field, other string
	switch {
	case run.Spec.From != nil:
		field, other = "spec.from", run.Spec.From.Run
	case run.Spec.Replay != nil:
		field, other = "spec.replay", run.Spec.Replay.Run
	default:
		return "", nil
	}
	allowed, err := w.may(ctx, req, run.Namespace, "get", other)
	if err != nil {
		return "", fmt.Errorf("checking the get permission on agentrun %s: %w", other, err)
	}
	if !allowed {
		return fmt.Sprintf("user %q may not get AgentRun %s/%s, which %s names: a run that reads another run's transcript needs the get verb on it",
			req.UserInfo.Username, run.Namespace, other, field), nil
	}
	return w.mayReadTurn(ctx, req, run.Namespace, other, field)
}

// mayDecide refuses a decision its maker may not make: approving and rejecting need the approve
// verb on the run, a reply to a turn get on its session.
func (w *Decisions) mayDecide(ctx context.Context, req admission.Request, run *v1alpha1.AgentRun, action string) *admission.Response {
	if action == decisions.Reply {
		if run.Spec.Session == nil {
			return nil
		}
		return w.mayReplyToTurn(ctx, req, run)
	}
	allowed, err := w.mayApprove(ctx, req, run)
	var res admission.Response
	switch {
	case err != nil:
		res = admission.Errored(http.StatusInternalServerError, err)
	case !allowed:
		res = admission.Denied(fmt.Sprintf("user %q may not %s gates of AgentRun %s/%s: it needs the %q verb on agentruns.agents.baton.dev in namespace %s (the ClusterRole baton-approver grants it)",
			req.UserInfo.Username, action, run.Namespace, run.Name, v1alpha1.ApproveVerb, run.Namespace))
	default:
		return nil
	}
	return &res
}

// mayReplyToTurn refuses a reply to a turn by someone who may not get its session: a reply is
// the next line of the conversation, and needs what taking a turn does.
func (w *Decisions) mayReplyToTurn(ctx context.Context, req admission.Request, run *v1alpha1.AgentRun) *admission.Response {
	session := run.Spec.Session.Name
	allowed, err := w.mayGetSession(ctx, req, run.Namespace, session)
	var res admission.Response
	switch {
	case err != nil:
		res = admission.Errored(http.StatusInternalServerError, err)
	case !allowed:
		res = admission.Denied(fmt.Sprintf("user %q may not get AgentSession %s/%s: replying to its turn %s needs the get verb on it, as taking a turn does",
			req.UserInfo.Username, run.Namespace, session, run.Name))
	default:
		return nil
	}
	return &res
}

// mayReadTurn says why the requesting user may not read the named run, if it is a turn of a
// session they may not get: a turn's transcript holds its session's history.
func (w *Decisions) mayReadTurn(ctx context.Context, req admission.Request, namespace, name, field string) (string, error) {
	other := &v1alpha1.AgentRun{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, other); err != nil || other.Spec.Session == nil {
		// A run that does not exist is refused by the operator, naming it.
		return "", client.IgnoreNotFound(err)
	}
	session := other.Spec.Session.Name
	allowed, err := w.mayGetSession(ctx, req, namespace, session)
	if err != nil {
		return "", err
	}
	if allowed {
		return "", nil
	}
	return fmt.Sprintf("user %q may not get AgentSession %s/%s, whose turn %s %s names: a turn's transcript holds its session's history",
		req.UserInfo.Username, namespace, session, name, field), nil
}

// mayGetSession asks the API server whether the requesting user may get the named AgentSession:
// what taking a turn, replying to one and reading one need.
func (w *Decisions) mayGetSession(ctx context.Context, req admission.Request, namespace, name string) (bool, error) {
	allowed, err := w.mayOn(ctx, req, namespace, "get", "agentsessions", name)
	if err != nil {
		return false, fmt.Errorf("checking the get permission on agentsession %s: %w", name, err)
	}
	return allowed, nil
}

// may asks the API server whether the requesting user may do verb on the named AgentRun.
func (w *Decisions) may(ctx context.Context, req admission.Request, namespace, verb, name string) (bool, error) {
	return w.mayOn(ctx, req, namespace, verb, "agentruns", name)
}

// mayOn asks the API server whether the requesting user may do verb on the named object of
// one of Baton's resources.
func (w *Decisions) mayOn(ctx context.Context, req admission.Request, namespace, verb, resource, name string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   req.UserInfo.Username,
		Groups: req.UserInfo.Groups,
		UID:    req.UserInfo.UID,
		Extra:  extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace,
			Verb:      verb,
			Group:     v1alpha1.GroupVersion.Group,
			Resource:  resource,
			Name:      name,
		},
	}}
	if err := w.Client.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
