package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/transcriptclient"
	"github.com/baton-dev/baton/internal/workflow"
)

// branchRun is a branch of parent as the operator makes one: controlled by it, with spec.branch.
func branchRun(name string, parent *v1alpha1.AgentRun, step, index int32, agent string, st v1alpha1.AgentRunStatus) *v1alpha1.AgentRun {
	depth := int32(1)
	if parent.Spec.Branch != nil {
		depth = parent.Spec.Branch.Depth + 1
	}
	return &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: parent.Namespace, UID: types.UID("u-" + name),
		Labels: map[string]string{v1alpha1.LabelParent: workflow.ParentLabel(parent.Name)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun", Name: parent.Name,
			UID: parent.UID, Controller: ptr.To(true)}}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: parent.Spec.ConfigRef,
			Branch: &v1alpha1.RunBranch{Parent: parent.Name, Step: step, Index: index, Agent: agent, Depth: depth}},
		Status: st}
}

// joinedRun is a run whose step 2 fanned out to web and papers, which joined; web's own step 1
// fanned out to deep. It ended at step 3.
func joinedRun() (*v1alpha1.AgentRun, []v1alpha1.AgentRun) {
	t0 := time.Date(2026, 11, 22, 11, 34, 0, 0, time.UTC)
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "survey-7", Namespace: "default", UID: "p7"},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "research"}}}
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, StepCount: 3, HandoffCount: 2, TokensUsed: 400,
		Currency: "USD", BranchesStarted: 3, BranchSteps: 5,
		HandoffSequence: []v1alpha1.HandoffRecord{
			{Step: 1, From: "triage", To: "lead", Outcome: v1alpha1.OutcomeHandoff, Reason: "plan it", Tokens: 10, Time: at(1)},
			{Step: 2, From: "lead", To: "web,papers", Outcome: v1alpha1.OutcomeFanOut, Reason: "fan-out to 2 branches", Tokens: 20, Time: at(2)},
			{Step: 2, From: "web,papers", To: "lead", Outcome: v1alpha1.OutcomeJoined, Reason: "joined 1 of 2 branches (All)", Tokens: 350, Time: at(9)},
			{Step: 3, From: "lead", Outcome: v1alpha1.OutcomeFinal, Reason: "final answer", Tokens: 20, Time: at(10)},
		},
		Branches: []v1alpha1.BranchStatus{
			{Name: "survey-7-b2-1", Agent: "web", Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, TokensUsed: 300, Cost: "0.0003"},
			{Name: "survey-7-b2-2", Agent: "papers", Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonLoopDetected, TokensUsed: 50},
		}}
	web := branchRun("survey-7-b2-1", run, 2, 1, "web", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded,
		TerminationReason: v1alpha1.ReasonCompleted, TokensUsed: 300, Cost: "0.0003", Currency: "USD", BranchesStarted: 1})
	papers := branchRun("survey-7-b2-2", run, 2, 2, "papers", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed,
		TerminationReason: v1alpha1.ReasonLoopDetected, TokensUsed: 50})
	deep := branchRun("survey-7-b2-1-b1-1", web, 1, 1, "deep", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded,
		TerminationReason: v1alpha1.ReasonCompleted, TokensUsed: 100, Cost: "0.0001", Currency: "USD"})
	return run, []v1alpha1.AgentRun{*papers, *deep, *web}
}

func TestDescribeShowsTheBranchesUnderTheStepThatFannedOut(t *testing.T) {
	run, children := joinedRun()
	for name, c := range map[string]struct {
		st    runStory
		tail  int
		lines []string
		not   []string
	}{
		"every branch, and theirs, read from their runs": {
			st: runStory{branches: runview.BranchTree(run, children)},
			lines: []string{
				`  2     lead        web,papers  FanOut   20                        fan-out to 2 branches`,
				`        ├─ survey-7-b2-1          web     Succeeded  Completed     300 tokens  0.0003 USD`,
				`        │  └─ survey-7-b2-1-b1-1  deep    Succeeded  Completed     100 tokens  0.0001 USD`,
				`        └─ survey-7-b2-2          papers  Failed     LoopDetected  50 tokens`,
				// The join shares the step of the fan-out, and is a row of its own after it.
				`  2     web,papers  lead        Joined   350                       joined 1 of 2 branches (All)`,
				`  3     lead        (end)       Final    20                        final answer`,
			},
			not: []string{"branches' runs not read"},
		},
		"the branches' runs not read: what the run's status says": {
			st: runStory{branches: runview.BranchTree(run, nil), branchesUnread: `agentruns.agents.baton.dev is forbidden: User "bob" cannot list resource "agentruns"`},
			lines: []string{
				`        ├─ survey-7-b2-1  web     Succeeded  Completed     300 tokens  0.0003 USD`,
				`        └─ survey-7-b2-2  papers  Failed     LoopDetected  50 tokens`,
				`(branches' runs not read: agentruns.agents.baton.dev is forbidden: User "bob" cannot list resource "agentruns"; they are as the run's status says)`,
			},
			not: []string{"survey-7-b2-1-b1-1"},
		},
		"the step that fanned out not shown, nor its branches": {
			st: runStory{branches: runview.BranchTree(run, children)}, tail: 1,
			lines: []string{`  3     lead   (end)  Final    20                        final answer`},
			not:   []string{"survey-7-b2-"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c.st.entries = runview.BuildTimeline(run, nil)
			var out bytes.Buffer
			describe(&out, run, c.st, c.tail)
			lines := strings.Split(out.String(), "\n")
			for _, want := range c.lines {
				if !strings.Contains("\n"+out.String()+"\n", "\n"+want+"\n") {
					t.Errorf("no line %q in:\n%s", want, out.String())
				}
			}
			for _, not := range c.not {
				if strings.Contains(out.String(), not) {
					t.Errorf("%q in:\n%s", not, out.String())
				}
			}
			// The steps' columns go on past the tree: the reasons of steps 1 and 3 start under REASON.
			column := func(prefix, of string) int {
				for _, l := range lines {
					if strings.HasPrefix(l, prefix) {
						return strings.Index(l, of)
					}
				}
				return -1
			}
			if at := column("  STEP", "REASON"); at < 0 || column("  3 ", "final answer") != at || c.tail == 0 && column("  1 ", "plan it") != at {
				t.Errorf("the reasons are not all under REASON:\n%s", out.String())
			}
		})
	}
}

func TestDescribeSaysWhatARunIsABranchOf(t *testing.T) {
	run, children := joinedRun()
	web := &children[2]
	var out bytes.Buffer
	describe(&out, web, runStory{entries: runview.BuildTimeline(web, nil), branches: runview.BranchTree(web, children)}, runview.DefaultTail)
	if !strings.Contains(out.String(), "Name:         survey-7-b2-1\nNamespace:    default\nBranch of:    survey-7 (step 2, branch 1, depth 1)\nConfig:") {
		t.Errorf("describe does not say what the run is a branch of:\n%s", out.String())
	}

	// A run that only names a parent, which does not control it, is no branch.
	claims := web.DeepCopy()
	claims.OwnerReferences = nil
	out.Reset()
	describe(&out, claims, runStory{entries: runview.BuildTimeline(claims, nil)}, runview.DefaultTail)
	if strings.Contains(out.String(), "Branch of:") {
		t.Errorf("a run its named parent does not control is described as its branch:\n%s", out.String())
	}

	out.Reset()
	describe(&out, run, runStory{entries: runview.BuildTimeline(run, nil)}, runview.DefaultTail)
	if strings.Contains(out.String(), "Branch of:") || !regexp.MustCompile(`(?m)^Branches:     3 started, 5 steps in branches that joined$`).MatchString(out.String()) {
		t.Errorf("the run that fanned out:\n%s", out.String())
	}
}

func TestDescribeShowsNoStepInProgressWhileTheRunWaitsForItsBranches(t *testing.T) {
	run, children := joinedRun()
	run.Status.Phase, run.Status.CurrentAgent, run.Status.StepCount = v1alpha1.PhaseRunning, "web,papers", 2
	run.Status.HandoffSequence = run.Status.HandoffSequence[:2]
	var out bytes.Buffer
	describe(&out, run, runStory{entries: runview.BuildTimeline(run, nil), branches: runview.BranchTree(run, children)}, runview.DefaultTail)
	if strings.Contains(out.String(), "(working)") || !strings.Contains(out.String(), "        └─ survey-7-b2-2") {
		t.Errorf("a run that waits for its branches:\n%s", out.String())
	}
}

// Once a run's status lists a branch's UID, describe and the export take only the run of that
// UID as the branch: a run of its name with another UID, controlled by the run and labelled with
// it as a forger would, is neither shown nor exported as the branch.
func TestOnlyTheRunOfABranchsUIDIsShownOrExportedAsTheBranch(t *testing.T) {
	run, children := joinedRun()
	run.Status.Branches[0].UID, run.Status.Branches[1].UID = "u-survey-7-b2-1", "u-survey-7-b2-2"
	forged := branchRun("survey-7-b2-1", run, 2, 1, "web", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded,
		TerminationReason: v1alpha1.ReasonCompleted, TokensUsed: 9999})
	forged.UID = "forged"
	papers := children[0]

	var out bytes.Buffer
	describe(&out, run, runStory{entries: runview.BuildTimeline(run, nil), branches: runview.BranchTree(run, []v1alpha1.AgentRun{*forged, papers})}, runview.DefaultTail)
	if strings.Contains(out.String(), "9999") || !strings.Contains(out.String(), "├─ survey-7-b2-1  web     Succeeded  Completed     300 tokens") {
		t.Errorf("describe shows another run as branch survey-7-b2-1:\n%s", out.String())
	}

	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(forged, &papers).Build()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(transcriptclient.Page{Namespace: "default", Records: []records.Record{}})
	}))
	defer api.Close()
	o := &options{streams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}
	c := &operatorClient{Client: &transcriptclient.Client{Base: api.URL, HTTP: api.Client()}}
	exports, err := o.branchExports(context.Background(), c, kube, run, 1, &records.ExportBudget{})
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, e := range exports {
		exported = append(exported, e.Spec.Branch.Agent+"/"+string(e.Status.Phase))
	}
	if strings.Join(exported, " ") != "papers/Failed" {
		t.Errorf("exported branches %v; want papers alone", exported)
	}
}
