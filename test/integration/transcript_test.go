package integration

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	. "github.com/baton-dev/baton/test/builders"
)

// transcriptOf lists a run's transcript.
func transcriptOf(run *v1alpha1.AgentRun) []transcript.Record {
	rs, err := controllerOptions.Transcript.List(ctx, transcript.Query{RunUID: string(run.UID)})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return rs
}

// heldRuns are the UIDs of the runs the transcript holds records of.
func heldRuns() []string {
	refs, err := controllerOptions.Transcript.Runs(ctx, "")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out []string
	for _, r := range refs {
		out = append(out, r.RunUID)
	}
	return out
}

var _ = Describe("The transcript", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("keeps every step's full output, which status only bounds", func() {
		long := strings.Repeat("a long finding. ", 4000) // 64 000 characters
		cfg := MakeConfig("long", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says(long[:30000]).HandOff("b").Because("go on")),
			MakeAgent("b").Terminator().Script(Says("summary")),
		).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("study this").Obj()
		create(cfg, run)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		rs := transcriptOf(done)
		Expect(rs).To(HaveLen(2))
		var first struct {
			Agent, Input, Output, Handoff, Reason string
			Tokens                                int64
		}
		Expect(json.Unmarshal(rs[0].Body, &first)).To(Succeed())
		Expect(first.Agent).To(Equal("a"))
		Expect(first.Input).To(Equal("study this"))
		Expect(first.Output).To(Equal(long[:30000]))
		Expect(first.Handoff).To(Equal("b"))
		Expect(rs[0].Kind).To(Equal(transcript.KindStep))
		Expect(rs[1].Step).To(BeEquivalentTo(2))
	})

	It("hands the next agent the whole of a long answer while status holds its beginning, across a restart", func() {
		long := strings.Repeat("a finding of ten kilobytes. ", 366)
		cfg := MakeConfig("relay", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says(long).HandOff("b")),
			MakeAgent("b").HandsOffTo("c").Script(Says("short").HandOff("c").Delay(3*time.Second)),
			MakeAgent("c").Terminator().Script(Says("done")),
		).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("study this").Obj()
		create(cfg, run)
		// Step 1 is written once the batch period has passed while step 2 runs.
		Eventually(func() int32 { return get(run).Status.StepCount }, 5*time.Second).Should(BeEquivalentTo(1))
		st := get(run).Status
		Expect(len(st.Input)).To(BeNumerically("<=", 512))
		Expect(long).To(HavePrefix(strings.TrimSuffix(st.Input, "…")))
		Expect(st.InputDigest).To(HaveLen(12))

		By("restarting the operator while b's step runs: b's input is found again in the transcript")
		stopManager()
		stopManager = startManager(controllerOptions)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(done.Status.InputDigest).To(BeEmpty())
		var inputs []string
		for _, rec := range transcriptOf(done) {
			var body struct{ Input string }
			Expect(json.Unmarshal(rec.Body, &body)).To(Succeed())
			inputs = append(inputs, body.Input)
		}
		Expect(inputs).To(Equal([]string{"study this", long, "short"}))
	})

	It("gives the loop detectors the latest 50 steps across a restart, though status holds 10", func() {
		ok := func() *TurnWrapper { return Says("ok").HandOff("a") }
		cfg := MakeConfig("echo", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("same").HandOff("b")),
			MakeAgent("b").HandsOffTo("a").Script(ok(), ok(), ok(), ok(), ok(), ok().Delay(3*time.Second), ok()),
		).LoopDetection(nil, nil, ptr.To[int32](25), ptr.To[int32](50), ptr.To[int32](8)).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		// Steps 1 to 11 are written together once the batch period has passed while step 12 runs.
		Eventually(func() int32 { return get(run).Status.StepCount }, 5*time.Second).Should(BeEquivalentTo(11))
		st := get(run).Status
		Expect(st.HandoffSequence).To(HaveLen(10))
		Expect(st.HandoffSequence[0].Step).To(BeEquivalentTo(2))
		Expect(st.HandoffSequence[0].OutputDigest).To(BeEmpty())

		By("restarting the operator while step 12 runs: steps 1 to 11 come back from the transcript")
		stopManager()
		stopManager = startManager(controllerOptions)
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonLoopDetected))
		Expect(done.Status.Loop.Detector).To(Equal(v1alpha1.DetectorRepeatedOutput))
		Expect(done.Status.Loop.Steps).To(Equal([]int32{1, 3, 5, 7, 9, 11, 13, 15}))
	})

	It("of a deleted run is deleted within the sweep", func() {
		cfg := MakeConfig("gone", ns).Agents(MakeAgent("a").Script(Says("done"))).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		done := waitForEnd(run)
		Expect(transcriptOf(done)).NotTo(BeEmpty())
		Expect(k8sClient.Delete(ctx, done)).To(Succeed())
		Eventually(heldRuns, 10*time.Second, 100*time.Millisecond).ShouldNot(ContainElement(string(done.UID)))
	})
})

var _ = Describe("ttlSecondsAfterFinished", func() {
	It("deletes a finished run and its transcript, by the run's own or its config's", func() {
		ns := newNamespace()
		// Long enough for the spec to see each run end before it goes, even on a loaded machine.
		cfg := MakeConfig("short", ns).TTL(5).Agents(MakeAgent("a").Script(Says("done"))).Obj()
		own := MakeRun("own", ns).Config(cfg.Name).TTL(6).Obj()
		inherited := MakeRun("inherited", ns).Config(cfg.Name).Obj()
		keep := MakeConfig("keep", ns).Agents(MakeAgent("a").Script(Says("done"))).Obj()
		kept := MakeRun("kept", ns).Config(keep.Name).Obj()
		create(cfg, keep, own, inherited, kept)
		for _, r := range []*v1alpha1.AgentRun{own, inherited, kept} {
			done := waitForEnd(r)
			r.UID, r.Status = done.UID, done.Status
		}
		for _, r := range []*v1alpha1.AgentRun{own, inherited} {
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), &v1alpha1.AgentRun{}))
			}, 20*time.Second, 100*time.Millisecond).Should(BeTrue(), "%s was not deleted", r.Name)
			Expect(time.Since(r.Status.CompletionTime.Time)).To(BeNumerically(">=", 4*time.Second))
			// The run goes first, its transcript right after.
			Eventually(heldRuns, 2*time.Second, 50*time.Millisecond).ShouldNot(ContainElement(string(r.UID)))
		}
		Consistently(func() error { return k8sClient.Get(ctx, client.ObjectKeyFromObject(kept), &v1alpha1.AgentRun{}) },
			2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})

var _ = Describe("A run from an earlier one (spec.from)", func() {
	It("continues where the earlier run was after a step, on the config as it is now, and leaves the earlier run as it was", func() {
		ns := newNamespace()
		cfg := MakeConfig("relay", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("a1").HandOff("b"), Says("a2").HandOff("b")),
			MakeAgent("b").HandsOffTo("a").Terminator().Script(Says("b1").HandOff("a"), Says("b2 final")),
		).Obj()
		first := MakeRun("first", ns).Config(cfg.Name).Input("the task").Obj()
		create(cfg, first)
		done := waitForEnd(first)
		Expect(done.Status.StepCount).To(BeEquivalentTo(4))
		Expect(done.Status.Output).To(Equal("b2 final"))

		By("changing the config: the new run takes it, as a retry after a fix would")
		editConfig(cfg, func(c *v1alpha1.AgentConfig) {
			c.Spec.Agents[1].Script = []v1alpha1.ScriptTurn{{Output: "b1", Handoff: "a"}, {Output: "CHANGED"}}
		})

		second := MakeRun("second", ns).Config(cfg.Name).Obj()
		second.Spec.From = &v1alpha1.RunFrom{Run: "first", Step: 2}
		create(second)
		again := waitForEnd(second)
		Expect(again.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), again.Status.TerminationMessage)
		Expect(again.Status.Output).To(Equal("CHANGED"))
		Expect(again.Status.StepCount).To(BeEquivalentTo(4))
		Expect(again.Status.HandoffCount).To(Equal(done.Status.HandoffCount))
		Expect(again.Status.ConfigRevision).NotTo(Equal(done.Status.ConfigRevision))
		Expect(sequence(again)).To(Equal(sequence(done)))
		Expect(again.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("continuing run first after step 2"))))
		var steps []int32
		for _, rec := range transcriptOf(again) {
			if rec.Kind == transcript.KindStep {
				steps = append(steps, rec.Step)
			}
		}
		Expect(steps).To(Equal([]int32{1, 2, 3, 4}), "two steps copied, two taken")
		Expect(get(first).Status).To(Equal(done.Status), "the earlier run is not changed")
	})

	It("is refused when a step it would replay does not follow under the config as it is now", func() {
		ns := newNamespace()
		cfg := MakeConfig("relay", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("a1").HandOff("b")),
			MakeAgent("b").HandsOffTo("a").Terminator().Script(Says("b1").HandOff("a"), Says("done")),
		).Obj()
		first := MakeRun("first", ns).Config(cfg.Name).Obj()
		create(cfg, first)
		waitForEnd(first)
		editConfig(cfg, func(c *v1alpha1.AgentConfig) { c.Spec.Entrypoint = "b" })
		second := MakeRun("second", ns).Config(cfg.Name).Obj()
		second.Spec.From = &v1alpha1.RunFrom{Run: "first", Step: 2}
		create(second)
		ended := waitForEnd(second)
		Expect(ended.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(ended.Status.TerminationMessage).To(ContainSubstring("step 1 was taken by a, but b has control after step 0 in the current config"))
	})

	DescribeTable("is refused with the reason when it cannot be followed",
		func(from v1alpha1.RunFrom, message string) {
			ns := newNamespace()
			cfg := MakeConfig("pair", ns).Agents(
				MakeAgent("a").HandsOffTo("b").Script(Says("a1").HandOff("b")),
				MakeAgent("b").Terminator().Script(Says("done")),
			).Obj()
			create(cfg, MakeRun("first", ns).Config(cfg.Name).Obj())
			waitForEnd(MakeRun("first", ns).Obj())
			run := MakeRun("second", ns).Config(cfg.Name).Obj()
			run.Spec.From = &from
			create(run)
			ended := waitForEnd(run)
			Expect(ended.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
			Expect(ended.Status.TerminationMessage).To(ContainSubstring(message))
		},
		Entry("a run that does not exist", v1alpha1.RunFrom{Run: "nope", Step: 1}, "spec.from: run nope does not exist in namespace"),
		Entry("a step the run did not take", v1alpha1.RunFrom{Run: "first", Step: 9}, "spec.from: run first has taken 2 steps, not 9"),
		Entry("the step that ended the run", v1alpha1.RunFrom{Run: "first", Step: 2}, "the run ended Completed at step 2: continue from an earlier step"),
	)
})
