package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// A turn of a session (spec.session) is created by whoever speaks in it: they need get on the
// AgentSession besides create on agentruns. The webhook numbers each turn, once, at its create:
// it counts the session's status.numbered up with a write the API server orders
// (resourceVersion), and writes the number on the turn (agents.baton.dev/turn) with the
// session's label (the session's name, or past 63 characters its beginning and a digest);
// turns run in that order. Nobody else sets either on a create or changes them after. A create the API server refuses after the webhook
// leaves a number unused: turns wait only for the turns that exist. A dry run is numbered and
// counts nothing (sideEffects NoneOnDryRun).
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentsessions,verbs=get
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns,verbs=get
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentsessions/status,verbs=get;update

// turnMarks are what the webhook writes on a turn it admits.
type turnMarks struct {
	number    int32
	session   string
	configRef string
}

// turnOf admits the create of a turn, and numbers it; nil marks for any other request.
func (w *Decisions) turnOf(ctx context.Context, req admission.Request, run *v1alpha1.AgentRun) (*turnMarks, *admission.Response) {
	if req.Operation != admissionv1.Create {
		return nil, nil
	}
	if run.Spec.Session == nil {
		_, turn := run.Annotations[v1alpha1.AnnotationTurn]
		_, session := run.Labels[v1alpha1.LabelSession]
		if (turn || session) && req.UserInfo.Username != w.Self {
			r := admission.Denied(fmt.Sprintf("the annotation %s and the label %s are written only by Baton, on a turn of a session (spec.session)",
				v1alpha1.AnnotationTurn, v1alpha1.LabelSession))
			return nil, &r
		}
		return nil, nil
	}
	marks, why, err := w.turn(ctx, req, run)
	switch {
	case err != nil:
		r := admission.Errored(http.StatusInternalServerError, err)
		return nil, &r
	case why != "":
		r := admission.Denied(why)
		return nil, &r
	}
	return marks, nil
}

// turn admits the create of a turn: it says why the creator may not, or numbers the turn.
func (w *Decisions) turn(ctx context.Context, req admission.Request, run *v1alpha1.AgentRun) (*turnMarks, string, error) {
	name := run.Spec.Session.Name
	// The operator creates turns for the A2A callers it authenticated, and checked them.
	allowed := req.UserInfo.Username == w.Self
	if !allowed {
		var err error
		if allowed, err = w.mayGetSession(ctx, req, run.Namespace, name); err != nil {
			return nil, "", err
		}
	}
	if !allowed {
		return nil, fmt.Sprintf("user %q may not get AgentSession %s/%s: taking a turn in a session needs the get verb on it",
			req.UserInfo.Username, run.Namespace, name), nil
	}
	session := &v1alpha1.AgentSession{}
	err := w.Client.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: name}, session)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("AgentSession %s does not exist in namespace %s: create it first (kubectl baton chat --new CONFIG does)",
			name, run.Namespace), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading agentsession %s: %w", name, err)
	}
	config := session.Spec.ConfigRef.Name
	if run.Spec.ConfigRef.Name != "" && run.Spec.ConfigRef.Name != config {
		return nil, fmt.Sprintf("spec.configRef: a turn of AgentSession %s runs its config %s, not %s; leave configRef out or name %s",
			name, config, run.Spec.ConfigRef.Name, config), nil
	}
	n, err := w.number(ctx, session, ptr.Deref(req.DryRun, false))
	if err != nil {
		return nil, "", fmt.Errorf("numbering the turn in agentsession %s: %w", name, err)
	}
	return &turnMarks{number: n, session: name, configRef: config}, "", nil
}

// number takes the session's next turn number. Two turns created at once each get their own:
// the second write conflicts, reads the session again and takes the next.
func (w *Decisions) number(ctx context.Context, session *v1alpha1.AgentSession, dryRun bool) (int32, error) {
	if dryRun {
		return session.Status.Numbered + 1, nil
	}
	var n int32
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := w.Client.Get(ctx, client.ObjectKeyFromObject(session), session); err != nil {
				return err
			}
		}
		first = false
		n = session.Status.Numbered + 1
		session.Status.Numbered = n
		return w.Client.Status().Update(ctx, session)
	})
	return n, err
}

// mark writes the turn's marks on its annotations, its labels and its spec.
func (t *turnMarks) mark(annotations, labels map[string]string) {
	annotations[v1alpha1.AnnotationTurn] = strconv.Itoa(int(t.number))
	labels[v1alpha1.LabelSession] = workflow.LabelValue(t.session)
}
