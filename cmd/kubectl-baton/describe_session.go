package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// sessionName is the session a describe names (agentsession/NAME, session/NAME); "" for a run.
func sessionName(arg string) string {
	for _, prefix := range []string{"agentsession/", "agentsessions/", "session/", "as/"} {
		if name, ok := strings.CutPrefix(arg, prefix); ok {
			return name
		}
	}
	return ""
}

// describeSessionNamed prints a session: where it is, its limits, and its turns in order.
func (o *options) describeSessionNamed(ctx context.Context, name string) error {
	c, ns, err := o.kubeClient()
	if err != nil {
		return err
	}
	s := &v1alpha1.AgentSession{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return err
	}
	turns := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, turns, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSession: workflow.LabelValue(s.Name)}); err != nil {
		return err
	}
	describeSession(o.streams.Out, s, turns.Items)
	return nil
}

// describeSession prints a session and its turns, oldest first.
func describeSession(out io.Writer, s *v1alpha1.AgentSession, turns []v1alpha1.AgentRun) {
	st := s.Status
	fmt.Fprintf(out, "Session:      %s/%s\n", s.Namespace, s.Name)
	fmt.Fprintf(out, "Config:       %s\n", s.Spec.ConfigRef.Name)
	fmt.Fprintf(out, "Phase:        %s\n", st.Phase)
	if st.EndReason != "" {
		fmt.Fprintf(out, "Ended:        %s: %s\n", st.EndReason, st.EndMessage)
	}
	if st.State != "" {
		fmt.Fprintf(out, "Next state:   %s\n", st.State)
	}
	fmt.Fprintf(out, "Counts:       %d turns, %d tokens, cost %s\n", st.Turns, st.TokensUsed, orNone(st.Cost))
	if t := st.Taint; t != nil {
		fmt.Fprintf(out, "Tainted:      by %s: every later turn starts tainted\n", t.Source)
	}
	if l := s.Spec.Limits; l != nil {
		var parts []string
		if l.MaxTurns != nil {
			parts = append(parts, fmt.Sprintf("%d turns", *l.MaxTurns))
		}
		if l.MaxTokens != nil {
			parts = append(parts, fmt.Sprintf("%d tokens", *l.MaxTokens))
		}
		if l.MaxCost != nil {
			parts = append(parts, "cost "+*l.MaxCost)
		}
		fmt.Fprintf(out, "Limits:       %s\n", strings.Join(parts, ", "))
	}
	runview.SortTurns(turns)
	fmt.Fprintln(out, "Turns:")
	if len(turns) == 0 {
		fmt.Fprintln(out, "  (none)")
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  TURN\tRUN\tPHASE\tREASON\tTOKENS\tASKED BY\tINPUT")
	for i := range turns {
		t := &turns[i]
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.Annotations[v1alpha1.AnnotationTurn], t.Name, orNone(string(t.Status.Phase)),
			orNone(string(t.Status.TerminationReason)), t.Status.TokensUsed, asker(t.Annotations[v1alpha1.AnnotationCreatedBy]),
			textbound.Line(t.Spec.Input, 60))
	}
	_ = w.Flush()
	last := &turns[len(turns)-1]
	if last.Status.Output != "" {
		fmt.Fprintf(out, "Last answer (%s):\n%s\n", last.Name, indent(last.Status.Output))
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
