package webhook

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Who decided and who created a run are known only where the admission webhook writes them: it
// alone may then. Without it, anyone who may patch a run could write either. So the operator
// trusts them only while it has seen that the webhook is installed: a dry-run create of a run
// comes back with its creator recorded (the webhook stamped it), or is refused by the webhook
// itself (it is installed with failurePolicy Fail, and was not reachable then, so no request
// gets past it either). It looks again every minute, and the next decision after the webhook
// is removed is recorded unverified.

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns,verbs=create

// Name is the admission webhook's name in its MutatingWebhookConfiguration.
const Name = "decisions.agents.baton.dev"

// Installed reports whether the API server sends runs' creation through Baton's
// admission webhook, by a dry-run create of a run in namespace; when not, it says why.
func Installed(ctx context.Context, c client.Client, namespace string) (bool, string) {
	installed, _, why := probe(ctx, c, namespace)
	return installed, why
}

// probe is Installed, and the creator the webhook recorded on the probe, the client's own user
// as the webhook sees it: empty when the webhook refused the probe.
func probe(ctx context.Context, c client.Client, namespace string) (installed bool, self, why string) {
	run := &v1alpha1.AgentRun{}
	run.Namespace, run.GenerateName = namespace, "baton-webhook-probe-"
	run.Spec.ConfigRef.Name = "baton-webhook-probe"
	err := c.Create(ctx, run, client.DryRunAll)
	switch {
	case err == nil && run.Annotations[v1alpha1.AnnotationCreatedBy] != "":
		return true, run.Annotations[v1alpha1.AnnotationCreatedBy], ""
	case err == nil:
		return false, "", "a run created in namespace " + namespace + " (dry run) came back without its creator recorded: the admission webhook " + Name + " is not installed"
	case strings.Contains(err.Error(), `webhook "`+Name+`"`):
		// Installed, and refusing what it cannot check: nothing gets past it.
		return true, "", ""
	}
	return false, "", fmt.Sprintf("a dry-run create of a run in namespace %s failed: %v", namespace, err)
}

// Trust says whether the decision queue and the created-by annotation are to be
// trusted: asked for (--trust-decision-queue) and the webhook seen installed within a minute.
type Trust struct {
	c         client.Client
	namespace string
	clock     clock.PassiveClock
	log       logr.Logger
	every     time.Duration

	mu      sync.Mutex
	checked time.Time
	trusted bool
	why     string
	// self is the creator the webhook recorded on the operator's own probe: what it records on
	// every run the operator creates without naming a creator, its branch runs among them.
	self string
}

// NewTrust checks in namespace ("": the operator's own, else default).
func NewTrust(c client.Client, namespace string, clk clock.PassiveClock, log logr.Logger) *Trust {
	if namespace == "" {
		namespace = OperatorNamespace()
	}
	return &Trust{c: c, namespace: namespace, clock: clk, log: log, every: time.Minute}
}

// Trusted reports whether the webhook was seen installed within the last minute, looking
// again when that is older.
func (t *Trust) Trusted(ctx context.Context) bool {
	trusted, _ := t.Operator(ctx)
	return trusted
}

// Operator is Trusted, and the creator the webhook records on the runs the operator creates
// (without naming another), when it is trusted and that is known: nobody else can create a
// run with that creator while the webhook is installed, so a run that has it is the
// operator's own. Empty when the webhook refused the last probe (it was down): then nothing
// is known to be the operator's.
func (t *Trust) Operator(ctx context.Context) (trusted bool, self string) {
	if t == nil {
		return false, ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	if !t.checked.IsZero() && now.Sub(t.checked) < t.every {
		return t.trusted, t.self
	}
	probeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	trusted, self, why := probe(probeCtx, t.c, t.namespace)
	if ctx.Err() != nil {
		return t.trusted, t.self
	}
	if t.checked.IsZero() || trusted != t.trusted || why != t.why {
		if trusted {
			t.log.Info("The admission webhook is installed: decisions and creators are attributed as it records them")
		} else {
			t.log.Info("The admission webhook is not seen installed: decisions are recorded unverified and no run's creator is known", "why", why)
		}
	}
	t.checked, t.trusted, t.why, t.self = now, trusted, why, self
	return trusted, self
}

// OperatorNamespace is the namespace the operator runs in: POD_NAMESPACE, else as its
// ServiceAccount says, else default.
func OperatorNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(data) > 0 {
		return strings.TrimSpace(string(data))
	}
	return "default"
}
