package webhook

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// probed is an API server that answers the operator's dry-run creates of runs as answer says,
// counting them.
type probed struct {
	answer func(run *v1alpha1.AgentRun) error
	probes int
	// wet counts creates that were not dry runs: a probe must leave nothing behind.
	wet int
}

func (p *probed) client(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			p.probes++
			o := &client.CreateOptions{}
			o.ApplyOptions(opts)
			if !slices.Equal(o.DryRun, []string{"All"}) {
				p.wet++
			}
			return p.answer(obj.(*v1alpha1.AgentRun))
		},
	}).Build()
}

// stamped is the webhook's answer: the run comes back with its creator recorded.
func stamped(run *v1alpha1.AgentRun) error {
	run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: operatorUser}
	return nil
}

// unstamped is an API server without the webhook.
func unstamped(*v1alpha1.AgentRun) error { return nil }

// down is the webhook installed and unreachable: the API server refuses with its name.
func down(*v1alpha1.AgentRun) error {
	return apierrors.NewInternalError(errors.New(`failed calling webhook "decisions.agents.baton.dev": failed to call webhook: connection refused`))
}

// unavailable is an API server that refuses the run for its own reasons.
func unavailable(*v1alpha1.AgentRun) error {
	return errors.New("the server is currently unable to handle the request")
}

// The operator sees the webhook installed when its dry-run create of a run comes back with a
// creator recorded, or is refused by the webhook itself (installed, failing closed); not when
// it comes back unstamped or fails otherwise, and then it says why.
func TestTheWebhookIsSeenInstalledByADryRunCreate(t *testing.T) {
	for name, tc := range map[string]struct {
		answer    func(*v1alpha1.AgentRun) error
		installed bool
		why       string
	}{
		"the webhook stamps the run":  {answer: stamped, installed: true},
		"the webhook refuses the run": {answer: down, installed: true},
		"the run comes back unstamped": {answer: unstamped,
			why: "a run created in namespace baton-system (dry run) came back without its creator recorded: the admission webhook decisions.agents.baton.dev is not installed"},
		"the API server refuses the run": {answer: unavailable,
			why: "a dry-run create of a run in namespace baton-system failed: the server is currently unable to handle the request"},
	} {
		t.Run(name, func(t *testing.T) {
			p := &probed{answer: tc.answer}
			installed, why := Installed(context.Background(), p.client(t), "baton-system")
			if installed != tc.installed || why != tc.why {
				t.Errorf("installed %t, %q; want %t, %q", installed, why, tc.installed, tc.why)
			}
			if p.wet > 0 {
				t.Errorf("%d of %d probes were real creates; want dry runs only", p.wet, p.probes)
			}
		})
	}
}

// The operator trusts what the webhook records only while it saw the webhook installed within
// the last minute: it looks again once a minute has passed, not before, and then trusts or
// stops trusting as it finds. The creator the webhook records on the operator's own runs is
// known only while the webhook stamps them.
func TestTrustFollowsTheWebhookMinuteByMinute(t *testing.T) {
	p := &probed{answer: unstamped}
	clk := clocktesting.NewFakePassiveClock(t0)
	trust := NewTrust(p.client(t), "baton-system", clk, logr.Discard())
	type seen struct {
		trusted bool
		self    string
		probes  int
	}
	look := func() seen {
		trusted, self := trust.Operator(context.Background())
		return seen{trusted, self, p.probes}
	}
	steps := []struct {
		name   string
		after  time.Duration
		answer func(*v1alpha1.AgentRun) error
		want   seen
	}{
		{name: "without the webhook", want: seen{false, "", 1}},
		{name: "installed since, within the minute", after: 30 * time.Second, answer: stamped, want: seen{false, "", 1}},
		{name: "a minute after the last look", after: 30 * time.Second, want: seen{true, operatorUser, 2}},
		{name: "down since, within the minute", after: 59 * time.Second, answer: down, want: seen{true, operatorUser, 2}},
		{name: "down, a minute after the last look", after: time.Second, want: seen{true, "", 3}},
		{name: "removed", after: time.Minute, answer: unstamped, want: seen{false, "", 4}},
	}
	for _, s := range steps {
		clk.SetTime(clk.Now().Add(s.after))
		if s.answer != nil {
			p.answer = s.answer
		}
		if got := look(); got != s.want {
			t.Fatalf("%s: %+v; want %+v", s.name, got, s.want)
		}
	}
	if trusted, self := (*Trust)(nil).Operator(context.Background()); trusted || self != "" {
		t.Errorf("no Trust: %t %q; want nothing trusted", trusted, self)
	}
}
