package benchmark

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// The workloads on a shared model endpoint: a fake OpenAI-compatible server (test/fakes) behind
// one ClusterModelEndpoint that every namespace may use, as an admin would set it up, and a team
// of OpenAI-provider agents on it.

// benchModel is the model the agents name, and the one the endpoint prices.
const benchModel = "gpt-4o-mini"

// outputCap is every agent's model.maxOutputTokens.
const outputCap = 200

// sharedEndpoint is a fake model server and the ClusterModelEndpoint that points at it.
type sharedEndpoint struct {
	name   string
	fake   *fakes.OpenAI
	secret *corev1.Secret
	obj    *v1alpha1.ClusterModelEndpoint
	seen   *answers
}

// newSharedEndpoint starts a fake model server that answers each agent of a chain of steps
// agents by handing off to the next (the last one ends the run), and makes the
// ClusterModelEndpoint name on it, with rpm as its limits.requestsPerMinute (0: none) and
// gpt-4o-mini's prices. fill makes each answer use all the output its request allows.
func (e *env) newSharedEndpoint(ctx context.Context, name string, steps int, rpm int64, fill bool) (*sharedEndpoint, error) {
	s := &sharedEndpoint{name: name, fake: fakes.NewOpenAI(), seen: &answers{}}
	s.fake.Record(false)
	s.fake.Observe(s.seen.add)
	for i := range steps {
		// 250 prompt tokens and 50 output tokens, unless fill says otherwise.
		r := fakes.Reply{Content: "done", Tokens: 300, PromptTokens: 250, FillCap: fill}
		if i < steps-1 {
			r.Content = "over to " + agentName(i+1)
			r.ToolCalls = []fakes.ToolCall{{Name: "transfer_to_" + agentName(i+1), Args: `{"reason":"next part"}`}}
		}
		s.fake.ReplyTo(agentName(i), r)
	}
	s.secret = &corev1.Secret{StringData: map[string]string{"apiKey": "sk-bench-" + name}}
	s.secret.Name, s.secret.Namespace = name+"-key", operatorNamespace
	s.secret.Labels = map[string]string{v1alpha1.LabelAPIKey: "true"}
	s.obj = &v1alpha1.ClusterModelEndpoint{Spec: v1alpha1.ModelEndpointSpec{
		Provider: v1alpha1.ProviderOpenAI, URL: s.fake.BaseURL(),
		APIKeySecretRef:   &v1alpha1.SecretKeyRef{Name: s.secret.Name, Key: "apiKey"},
		Prices:            []v1alpha1.ModelPrice{{Model: benchModel, Input: "0.15", CachedInput: "0.075", Output: "0.60"}},
		NamespaceSelector: &metav1.LabelSelector{},
	}}
	s.obj.Name = name
	if rpm > 0 {
		s.obj.Spec.Limits = &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To(rpm)}
	}
	for _, obj := range []client.Object{s.secret, s.obj} {
		if err := e.c.Create(ctx, obj); err != nil {
			s.fake.Close()
			return nil, err
		}
	}
	return s, nil
}

// status is the endpoint's status once the operator has written it for an endpoint at rest:
// nothing in flight and nothing waiting (it is written every few seconds at most).
func (s *sharedEndpoint) status(ctx context.Context, c client.Client) (v1alpha1.ModelEndpointStatus, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		obj := &v1alpha1.ClusterModelEndpoint{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(s.obj), obj); err != nil {
			return obj.Status, err
		}
		st := obj.Status
		if st.ObservedGeneration == obj.Generation && st.InFlight == 0 && st.Waiting == 0 {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("ClusterModelEndpoint %s not at rest after a minute: %+v", s.name, st)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// remove deletes the endpoint and its key, and stops the fake server.
func (s *sharedEndpoint) remove(ctx context.Context, c client.Client) error {
	defer s.fake.Close()
	for _, obj := range []client.Object{s.obj, s.secret} {
		if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
			return err
		}
	}
	return nil
}

// endpointTeam is a chain of steps OpenAI-provider agents on the ClusterModelEndpoint named
// endpoint: each hands off to the next; the last one's answer ends the run. A run is steps
// steps, each one model call.
func endpointTeam(ns, endpoint string, steps int) *v1alpha1.AgentConfig {
	var team []*AgentWrapper
	for i := range steps {
		a := MakeAgent(agentName(i))
		a.Model.Provider = ""
		a.Model.Name = benchModel
		a.Model.EndpointRef = &v1alpha1.EndpointReference{Kind: v1alpha1.KindClusterModelEndpoint, Name: endpoint}
		a.Model.MaxOutputTokens = ptr.To[int32](outputCap)
		a.Description = "part " + fmt.Sprint(i+1) + " of the work"
		if i < steps-1 {
			a.HandsOffTo(agentName(i + 1))
		} else {
			a.Terminator()
		}
		team = append(team, a)
	}
	return MakeConfig(configName, ns).Agents(team...).Timeout(2 * time.Hour).AgentTimeout(10 * time.Minute).Obj()
}

// answers are the fake server's answers, as its observer sees them.
type answers struct {
	mu sync.Mutex
	// ok are when answers with status 200 were sent, limited when 429s of its limits were;
	// first is when the first request arrived.
	ok, limited []time.Time
	first       time.Time
}

func (a *answers) add(ans fakes.Answer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.first.IsZero() || ans.Start.Before(a.first) {
		a.first = ans.Start
	}
	switch {
	case ans.Status == http.StatusOK:
		a.ok = append(a.ok, ans.Start.Add(ans.Duration))
	case ans.Limit != "":
		a.limited = append(a.limited, ans.Start)
	}
}

// sorted returns when the first request came, and the times of the 200s and of the 429s, in
// order.
func (a *answers) sorted() (first time.Time, ok, limited []time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok = append([]time.Time(nil), a.ok...)
	limited = append([]time.Time(nil), a.limited...)
	for _, ts := range [][]time.Time{ok, limited} {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
	return a.first, ok, limited
}
