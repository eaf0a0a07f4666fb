package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/records"
)

// kubeClient is a client for Baton's kinds with the user's kubeconfig.
func (o *options) kubeClient() (client.Client, string, error) {
	cfg, err := o.config.restConfig()
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	// Secrets and Namespaces, for replay --live.
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", err
	}
	ns, err := o.namespace()
	return c, ns, err
}

// getRun reads a run of the namespace the kubeconfig flags say, and returns the client.
func (o *options) getRun(ctx context.Context, name string) (*v1alpha1.AgentRun, client.Client, error) {
	c, ns, err := o.kubeClient()
	if err != nil {
		return nil, nil, err
	}
	run := &v1alpha1.AgentRun{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		return nil, nil, err
	}
	return run, c, nil
}

// annotate sets annotations on a run, as kubectl annotate does: the decision is the same
// annotation a person could write by hand, so the admission webhook records who made it.
func (o *options) annotate(ctx context.Context, name string, set map[string]string) error {
	run, c, err := o.getRun(ctx, name)
	if err != nil {
		return err
	}
	orig := run.DeepCopy()
	if run.Annotations == nil {
		run.Annotations = map[string]string{}
	}
	maps.Copy(run.Annotations, set)
	if err := c.Patch(ctx, run, client.MergeFrom(orig)); err != nil {
		return err
	}
	fmt.Fprintf(o.streams.Out, "agentrun.agents.baton.dev/%s annotated\n", name)
	return nil
}

func (o *options) approveCmd() *cobra.Command {
	var feedback string
	cmd := &cobra.Command{
		Use:   "approve RUN GATE",
		Short: "Approve the gate a run waits at",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.annotate(cmd.Context(), args[0], decisions.Annotations(decisions.Queued{Action: decisions.Approve, Gate: args[1], Feedback: feedback}))
		},
	}
	cmd.Flags().StringVar(&feedback, "feedback", "", "Feedback for the next agent")
	return cmd
}

func (o *options) rejectCmd() *cobra.Command {
	var feedback, revise string
	cmd := &cobra.Command{
		Use:   "reject RUN GATE",
		Short: "Reject the gate a run waits at: it ends Rejected, or goes back to an agent with --revise",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.annotate(cmd.Context(), args[0], decisions.Annotations(decisions.Queued{Action: decisions.Reject, Gate: args[1], Revise: revise, Feedback: feedback}))
		},
	}
	cmd.Flags().StringVar(&feedback, "feedback", "", "What to change, for the agent that revises")
	cmd.Flags().StringVar(&revise, "revise", "", "The agent that revises, or replan for the entrypoint")
	return cmd
}

func (o *options) replyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reply RUN TEXT",
		Short: "Answer a run that waits for input",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.annotate(cmd.Context(), args[0], decisions.Annotations(decisions.Queued{Action: decisions.Reply, Reply: args[1]}))
		},
	}
}

func (o *options) cancelCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "End a run Cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.annotate(cmd.Context(), args[0], map[string]string{v1alpha1.AnnotationCancel: reason})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "cancelled with kubectl baton", "Why")
	return cmd
}

func (o *options) retryCmd() *cobra.Command {
	var fromStep int32
	cmd := &cobra.Command{
		Use:   "retry RUN [--from-step N]",
		Short: "Start a new run with the same config, input, limits and approvals as RUN; with --from-step, where RUN was after step N",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, c, err := o.getRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			run := records.Retry(old, fromStep)
			if err := c.Create(cmd.Context(), run); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "agentrun.agents.baton.dev/%s created\n", run.Name)
			return nil
		},
	}
	cmd.Flags().Int32Var(&fromStep, "from-step", 0, "Continue RUN as it was after this step, without paying again for the steps before it")
	return cmd
}
