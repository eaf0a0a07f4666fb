package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestARunMayNameOnlyAPriorityClassItsNamespacesQuotasList(t *testing.T) {
	withQuotas := func(t *testing.T, specs ...v1alpha1.AgentQuotaSpec) *Decisions {
		t.Helper()
		w := testWebhook(t, nil)
		for i, s := range specs {
			q := &v1alpha1.AgentQuota{Spec: s}
			q.Name, q.Namespace = []string{"platform", "team"}[i], "team-a"
			if err := w.Client.Create(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	classes := v1alpha1.AgentQuotaSpec{PriorityClasses: []string{"low", "normal"}}
	for _, c := range []struct {
		name    string
		quotas  []v1alpha1.AgentQuotaSpec
		class   string
		user    string
		refused string
	}{
		{name: "a listed class is taken", quotas: []v1alpha1.AgentQuotaSpec{classes}, class: "normal", user: "alice"},
		{name: "a run that names no class is taken", quotas: []v1alpha1.AgentQuotaSpec{classes}, user: "alice"},
		{name: "a class the quotas do not list is refused, naming those they do", quotas: []v1alpha1.AgentQuotaSpec{classes}, class: "urgent", user: "alice",
			refused: `spec.priorityClassName "urgent" is not one of the priority classes the AgentQuotas of namespace team-a allow: low, normal`},
		{name: "a class in a namespace whose quotas list none is refused", quotas: []v1alpha1.AgentQuotaSpec{{MaxRunningRuns: new(int32)}}, class: "low", user: "alice",
			refused: "no AgentQuota of namespace team-a lists priorityClasses"},
		{name: "a class in a namespace with no quota is refused", class: "low", user: "alice", refused: "lists priorityClasses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := withQuotas(t, c.quotas...)
			run := plainRun()
			run.Spec.PriorityClassName = c.class
			resp := w.Handle(context.Background(), request(t, admissionv1.Create, c.user, run, nil))
			switch {
			case c.refused == "" && !resp.Allowed:
				t.Fatalf("refused: %s", resp.Result.Message)
			case c.refused != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, c.refused)):
				t.Fatalf("allowed %t, %q; want refused saying %q", resp.Allowed, resp.Result.Message, c.refused)
			}
		})
	}
}
