package a2aserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// An A2A context is a session (docs/a2a.md): the first message of a context opens an
// AgentSession of the team, and every message after it in the same context is a turn of it,
// given the turns before as history. The session belongs to its sender: its name is made from
// the namespace, the team, the sender and the context, so no other sender's message can be a
// turn of it, and a message whose context another sender opened is refused. The operator
// creates the session (the sender needs no permission on sessions); each turn is the sender's,
// with every guard and limit of a run.

// DefaultSessionTTL is how long an A2A session is kept after its last turn ended.
const DefaultSessionTTL = 24 * 60 * 60

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentsessions,verbs=create

// contextSession is the session of the message's context, opened for the sender if it is new;
// a context another sender opened is refused.
func (t *team) contextSession(ctx context.Context, contextID string) (string, error) {
	ns, sender := t.cfg.Namespace, t.caller.GetName()
	mark := contextMark(contextID)
	name := sessionName(t.cfg.Name, ns, sender, contextID)
	opened := &v1alpha1.AgentSessionList{}
	if err := t.h.Client.List(ctx, opened, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelA2AContext: mark}); err != nil {
		return "", fmt.Errorf("looking up the session of context %s: %w", contextID, err)
	}
	for _, s := range opened.Items {
		if s.Name != name && s.Spec.ConfigRef.Name == t.cfg.Name {
			return "", a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("context %s belongs to another sender: send the message without a contextId, or in a context of your own", contextID))
		}
	}
	s := &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{v1alpha1.LabelA2AContext: mark},
			Annotations: map[string]string{v1alpha1.AnnotationA2AContext: contextID, v1alpha1.AnnotationCreatedBy: sender}},
		Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: t.cfg.Name},
			TTLSecondsAfterIdle: ptr.To(int32(t.h.sessionTTL()))},
	}
	if err := t.h.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("opening the session of context %s: %w", contextID, err)
	}
	return name, nil
}

// contextMark is the label value that finds a context's sessions.
func contextMark(contextID string) string {
	sum := sha256.Sum256([]byte(contextID))
	return hex.EncodeToString(sum[:16])
}

// sessionName is the session of a sender's context with a team: named as the team's tasks are
// (taskPrefix, taskDigest), from the context in place of a message.
func sessionName(config, namespace, sender, contextID string) string {
	return taskPrefix(config) + "ctx-" + taskDigest(namespace, config, sender, contextID)[:16]
}
