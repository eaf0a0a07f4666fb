package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// The hostile suite: what an attacker with create rights on AgentConfigs and AgentRuns, or a
// broken model server, would try. Each manifest is refused with the field named, or its run ends
// with a clear condition, and other runs keep completing throughout.

// manifest reads YAML into an unstructured object in namespace ns.
func manifest(ns, doc string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	ExpectWithOffset(1, yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	u.SetNamespace(ns)
	return u
}

// healthyRunCompletes starts a plain run and waits for it to succeed: the operator still serves.
func healthyRunCompletes(ns, name string) {
	cfg := MakeConfig(name, ns).Agents(
		MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
		MakeAgent("b").Terminator().Script(Says("done")),
	).Obj()
	run := MakeRun(name, ns).Config(cfg.Name).Obj()
	create(cfg, run)
	ExpectWithOffset(1, waitForEnd(run).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
}

const agentConfigHead = `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: hostile}
spec:
  entrypoint: a
`

var _ = Describe("Hostile manifests", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("are refused by the API server, naming the field",
		func(doc string, want ...string) {
			err := k8sClient.Create(ctx, manifest(ns, doc))
			Expect(err).To(HaveOccurred())
			for _, w := range want {
				Expect(err.Error()).To(ContainSubstring(w))
			}
		},
		Entry("a timeout Go cannot hold", agentConfigHead+`  agents: [{name: a}]
  limits: {timeout: 99999999999h}`, `spec.limits.timeout: Invalid value: "99999999999h"`),
		Entry("a timeout of more than a year", agentConfigHead+`  agents: [{name: a}]
  limits: {timeout: 9000h}`, `spec.limits.timeout: Invalid value: "9000h": must be at most 8760h (a year)`),
		Entry("a zero run timeout", agentConfigHead+`  agents: [{name: a}]
  limits: {timeout: 0s}`, `spec.limits.timeout: Invalid value: "0s": must be more than 0s`),
		Entry("a zero agent timeout", agentConfigHead+`  agents: [{name: a}]
  limits: {agentTimeout: 0s}`, `spec.limits.agentTimeout: Invalid value: "0s": must be more than 0s`),
		Entry("an agent timeout Go cannot hold", agentConfigHead+`  agents: [{name: a, timeout: 2562048h}]`, `spec.agents[0].timeout`),
		Entry("a script delay past a year", agentConfigHead+`  agents: [{name: a, script: [{delay: 8761h}]}]`,
			`spec.agents[0].script[0].delay: Invalid value: "8761h": must be at most 8760h (a year)`),
		Entry("a gate timeout in another notation", agentConfigHead+`  agents: [{name: a}]
  approvals: [{name: g, after: a, timeout: 1e3h}]`, `spec.approvals[0].timeout: Invalid value: "1e3h"`),
		Entry("a step limit past int32", agentConfigHead+`  agents: [{name: a, maxSteps: 99999999999}]`,
			`spec.agents[0].maxSteps: Invalid value: 99999999999`),
		Entry("a token budget past int64", agentConfigHead+`  agents: [{name: a}]
  limits: {maxTokens: 100000000000000000000}`, `spec.limits.maxTokens`),
		Entry("negative script tokens", agentConfigHead+`  agents: [{name: a, script: [{tokens: -2000000}]}]`,
			`spec.agents[0].script[0].tokens: Invalid value: -2000000`),
		Entry("a scripted confidence above 1", agentConfigHead+`  agents: [{name: a, script: [{routing: {target: b, confidence: 1.5}}]}]`,
			`spec.agents[0].script[0].routing.confidence: Invalid value: 1.5`),
		Entry("an agent name in another script", agentConfigHead+`  agents: [{name: "ägent"}]`, `spec.agents[0].name: Invalid value: "ägent"`),
		Entry("a signal name of emoji", agentConfigHead+`  agents: [{name: a}]
  signals: [{name: "🛑"}]`, `spec.signals[0].name: Invalid value: "🛑"`),
		Entry("a run timeout override Go cannot hold", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: hostile}
spec: {configRef: {name: x}, limits: {timeout: 999999999h}}`, `spec.limits.timeout`),
		Entry("a run input past its bound in emoji", `apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: hostile}
spec: {configRef: {name: x}, input: "`+strings.Repeat("🙂", 32769)+`"}`, `spec.input: Too long: may not be more than 32768`),
	)

	It("end their runs ConfigInvalid when a schema names a file or a URL, and read nothing", func() {
		secret := filepath.Join(GinkgoT().TempDir(), "token")
		Expect(os.WriteFile(secret, []byte(`{"const": "operator-token-5ecret"}`), 0o600)).To(Succeed())
		var fetched atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fetched.Add(1)
			_, _ = w.Write([]byte(`{"const": "operator-token-5ecret"}`))
		}))
		DeferCleanup(srv.Close)

		cases := map[string]struct{ schema, want string }{
			"file":   {`{"type": "object", "properties": {"a": {"$ref": "file://` + secret + `"}}}`, "refers to file://" + secret},
			"url":    {`{"$ref": "` + srv.URL + `/s.json"}`, "refers to " + srv.URL + "/s.json"},
			"schema": {`{"$schema": "` + srv.URL + `/meta", "type": "string"}`, "refers to " + srv.URL + "/meta"},
			"cycle":  {`{"$ref": "#"}`, "its references go round in a cycle"},
			"deep":   {strings.Repeat(`{"items": `, 40) + `{}` + strings.Repeat(`}`, 40), "nested 41 levels deep"},
		}
		for name, tc := range cases {
			cfg := MakeConfig(name, ns).Agents(MakeAgent("a").Script(Says(`{"ok": true}`))).Obj()
			cfg.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(tc.schema)}
			run := MakeRun(name, ns).Config(cfg.Name).Obj()
			create(cfg, run)
			done := waitForEnd(run)
			Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid), name)
			Expect(done.Status.TerminationMessage).To(ContainSubstring("spec.agents[0].outputSchema"), name)
			Expect(done.Status.TerminationMessage).To(ContainSubstring(tc.want), name)
			Expect(string(mustJSON(done))).NotTo(ContainSubstring("5ecret"))
			Expect(eventsOf(done)).NotTo(ContainElement(ContainSubstring("5ecret")))
		}
		Expect(fetched.Load()).To(BeZero(), "the schema server was called")
		healthyRunCompletes(ns, "after")
	})

	It("stored before the API bounded durations neither stop the operator nor survive a restart of it", func() {
		// Relax the CRD to what it was before durations were bounded, store a config Go cannot
		// read, and put the CRD back: the object stays in etcd as an older cluster would hold it.
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: "agentconfigs.agents.baton.dev"}, crd)).To(Succeed())
		original := crd.DeepCopy()
		timeout := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["limits"].Properties["timeout"]
		timeout.Pattern, timeout.XValidations, timeout.MaxLength = "", nil, nil
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["limits"].Properties["timeout"] = timeout
		Expect(k8sClient.Update(ctx, crd)).To(Succeed())
		DeferCleanup(func() {
			current := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(original), current)).To(Succeed())
			current.Spec = original.Spec
			Expect(k8sClient.Update(ctx, current)).To(Succeed())
		})
		bad := manifest(ns, `apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: forever}
spec:
  entrypoint: a
  agents: [{name: a, script: [{output: hi}]}]
  limits: {timeout: 99999999999h}`)
		Eventually(func() error { return k8sClient.Create(ctx, bad) }, runTimeout, poll).Should(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, bad))).To(Succeed()) })

		run := MakeRun("forever", ns).Config("forever").Obj()
		create(run)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(done.Status.TerminationMessage).To(ContainSubstring(
			`spec.limits.timeout: Invalid value: "99999999999h": "99999999999h" is not a duration such as 90s or 1h30m`))
		healthyRunCompletes(newNamespace(), "beside")

		By("restarting the operator while the object is stored")
		stopManager()
		stopManager = startManager(controllerOptions)
		healthyRunCompletes(newNamespace(), "after-restart")
	})
})

var _ = Describe("A run whose agents answer in HTML, emoji and control characters", func() {
	It("stays small, as kubectl get -o json measures it", func() {
		ns := newNamespace()
		cfg := MakeConfig("noisy", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says(strings.Repeat("<b>&</b>", 4096)).HandOff("b").Because(strings.Repeat("<&>", 85))),
			MakeAgent("b").HandsOffTo("a").Script(Says(strings.Repeat("🙂\u0001", 16384)).HandOff("a").Because(strings.Repeat("🙂\u0007", 128))),
		).MaxSteps(40).MaxHandoffs(100).Allow(24, "a", "b").
			LoopDetection(nil, nil, nil, ptr.To[int32](50), ptr.To[int32](50)).Obj()
		run := MakeRun("noisy", ns).Config(cfg.Name).Input(strings.Repeat("\u0000<>", 1000)).Obj()
		create(cfg, run)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonMaxStepsExceeded), done.Status.TerminationMessage)

		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		user, err := testEnv.AddUser(envtest.User{Name: "kubectl-user", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		data, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(kubeconfig, data, 0o600)).To(Succeed())
		out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "agentrun", "noisy", "-n", ns, "-o", "json").Output()
		Expect(err).NotTo(HaveOccurred())
		var obj struct {
			Spec   json.RawMessage `json:"spec"`
			Status json.RawMessage `json:"status"`
		}
		Expect(json.Unmarshal(out, &obj)).To(Succeed())
		// kubectl indents its JSON; the budget is for the JSON the API server stores.
		status := &bytes.Buffer{}
		Expect(json.Compact(status, obj.Status)).To(Succeed())
		GinkgoWriter.Printf("kubectl get -o json of a 40-step run of escaped output: %d bytes; status %d bytes compact\n", len(out), status.Len())
		Expect(status.Len()).To(BeNumerically("<=", 64<<10))
		// The rest is the spec the user wrote (18 KiB of escaped input), metadata and indentation.
		Expect(len(out)).To(BeNumerically("<", len(obj.Spec)+len(obj.Status)+16<<10))
	})
})

var _ = Describe("A broken model server", func() {
	It("answering random JSON ends every run with a reason, and every status write is accepted", func() {
		ns := newNamespace()
		refusedBefore := refusedWrites.Load()
		var served atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			n := served.Add(1)
			r := rand.New(rand.NewPCG(7, uint64(n)))
			status, body := randomAnswer(r)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
		}))
		DeferCleanup(srv.Close)
		server := &fakes.OpenAI{Server: srv}
		agentsOf := func() []*AgentWrapper {
			return []*AgentWrapper{modelAgent("boss", server), modelAgent("billing", server).HandsOffTo("support"),
				modelAgent("support", server).HandsOffTo("billing")}
		}
		swarm := MakeConfig("swarm", ns).Agents(agentsOf()...).MaxSteps(8).Signal("DONE", v1alpha1.ActionComplete).Obj()
		swarm.Spec.Agents[0].Handoffs = []string{"billing", "support"}
		supervised := MakeConfig("supervised", ns).Mode(v1alpha1.ModeSupervisor).Agents(agentsOf()...).MaxSteps(8).Obj()
		supervised.Spec.Routing = &v1alpha1.Routing{Supervisor: "boss"}
		create(apiKeySecret(ns), swarm, supervised)
		var runs []*v1alpha1.AgentRun
		for i := range 24 {
			run := MakeRun(fmt.Sprintf("r%d", i), ns).Config([]string{"swarm", "supervised"}[i%2]).Input("route this").Obj()
			runs = append(runs, run)
			create(run)
		}
		for _, run := range runs {
			done := waitForEnd(run)
			Expect(done.Status.TerminationReason).NotTo(BeEmpty())
			Expect(done.Status.TerminationMessage).NotTo(BeEmpty())
			Expect(done.Status.TokensUsed).To(BeNumerically(">=", 0))
			Expect(string(mustJSON(done.Status))).NotTo(ContainSubstring(fakeKey))
			Expect(len(mustJSON(done))).To(BeNumerically("<", 96<<10))
		}
		Expect(served.Load()).To(BeNumerically(">=", 24))
		Expect(refusedWrites.Load()).To(Equal(refusedBefore), "status writes the API server refused")
		healthyRunCompletes(ns, "after")
	})
})

// randomAnswer is a chat completions answer a broken or hostile server might send: values out
// of range, negative or huge usage, text that escapes badly, the key quoted back, truncated or
// malformed JSON, errors.
func randomAnswer(r *rand.Rand) (int, []byte) {
	pieces := []string{"<div>&amp;</div>", "🙂🎉", "\u0000\u001f", "\u2028", fakeKey, "plain", `"\`}
	text := func() string {
		return strings.Repeat(pieces[r.IntN(len(pieces))], r.IntN(8000))
	}
	names := []string{"billing", "support", "boss", "nobody", "", "../../etc", strings.Repeat("x", 300), "🙂"}
	var calls []map[string]any
	for range r.IntN(3) {
		name := []string{"route", "transfer_to_billing", "transfer_to_support", "emit_signal", "unknown_tool"}[r.IntN(5)]
		args, _ := json.Marshal(map[string]any{
			"target": names[r.IntN(len(names))], "fallback": names[r.IntN(len(names))],
			"confidence": []float64{-1, 0, 0.5, 0.99, 1, 1.5, 1e300}[r.IntN(7)],
			"reason":     text(), "signal": []string{"DONE", "NOPE", text()}[r.IntN(3)],
		})
		calls = append(calls, map[string]any{"id": fmt.Sprint(len(calls)), "type": "function",
			"function": map[string]any{"name": name, "arguments": string(args)}})
	}
	message := map[string]any{"role": "assistant", "content": text()}
	if len(calls) > 0 {
		message["tool_calls"] = calls
	}
	answer := map[string]any{
		"id": "x", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": message,
			"finish_reason": []string{"stop", "length", "tool_calls", "weird"}[r.IntN(4)]}},
		"usage": map[string]any{"total_tokens": []int64{-2000000, 0, 17, 1 << 50, 9223372036854775807}[r.IntN(5)]},
	}
	body, _ := json.Marshal(answer)
	switch r.IntN(10) {
	case 0:
		return http.StatusOK, []byte("null")
	case 1:
		return http.StatusOK, body[:len(body)/2]
	case 2:
		return http.StatusBadRequest, []byte(`{"error": {"message": "` + fakeKey + ` is not valid <here>"}}`)
	}
	return http.StatusOK, body
}
