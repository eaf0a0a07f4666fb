package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

const (
	// runTimeout bounds how long a spec waits for a run that should end on its own.
	runTimeout = 30 * time.Second
	poll       = 50 * time.Millisecond
)

var ctx = context.Background()

// create creates objects in order.
func create(objs ...client.Object) {
	for _, o := range objs {
		ExpectWithOffset(1, k8sClient.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
	}
}

// get reads a run.
func get(run *v1alpha1.AgentRun) *v1alpha1.AgentRun {
	out := &v1alpha1.AgentRun{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKeyFromObject(run), out)).To(Succeed())
	return out
}

// waitForEnd waits until the run reaches a terminal phase and returns it.
func waitForEnd(run *v1alpha1.AgentRun) *v1alpha1.AgentRun {
	return waitForEndWithin(run, runTimeout)
}

// waitForEndWithin is waitForEnd for an end that waits on another process (Kueue's scheduler),
// which a loaded machine slows down.
func waitForEndWithin(run *v1alpha1.AgentRun, timeout time.Duration) *v1alpha1.AgentRun {
	out := &v1alpha1.AgentRun{}
	EventuallyWithOffset(2, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), out)).To(Succeed())
		g.Expect(out.Status.Phase.Terminal()).To(BeTrue(), "phase %s", out.Status.Phase)
	}, timeout, poll).Should(Succeed())
	return out
}

// sequence renders a run's handoff sequence as "from->to" entries.
func sequence(run *v1alpha1.AgentRun) []string {
	var out []string
	for _, r := range run.Status.HandoffSequence {
		out = append(out, r.From+"->"+r.To)
	}
	return out
}

// eventsOf lists the Events about a run as "Type Reason: message".
func eventsOf(run *v1alpha1.AgentRun) []string {
	list := &eventsv1.EventList{}
	ExpectWithOffset(1, k8sClient.List(ctx, list, client.InNamespace(run.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == run.Name && e.Regarding.Kind == "AgentRun" {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
		}
	}
	return out
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return data
}

// digestOf is the short digest status uses for a step's input or output.
func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// loadSample reads the objects of a file in config/samples into namespace.
func loadSample(file, namespace string) (*v1alpha1.AgentConfig, []*v1alpha1.AgentRun) {
	f, err := os.Open(filepath.Join("..", "..", "config", "samples", file))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer f.Close()
	var cfg *v1alpha1.AgentConfig
	var runs []*v1alpha1.AgentRun
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else {
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
		}
		switch u.GetKind() {
		case "AgentConfig":
			cfg = &v1alpha1.AgentConfig{}
			ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg)).To(Succeed())
			cfg.Namespace = namespace
		case "AgentRun":
			run := &v1alpha1.AgentRun{}
			ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, run)).To(Succeed())
			run.Namespace = namespace
			runs = append(runs, run)
		}
	}
	ExpectWithOffset(1, cfg).NotTo(BeNil(), "no AgentConfig in %s", file)
	return cfg, runs
}
