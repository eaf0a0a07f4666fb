package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcriptclient"
)

func (o *options) chatCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "chat SESSION [--new CONFIG]",
		Short: "Talk with a team in a session: each line is a turn, and while a turn waits for input, the next line is its reply",
		Long: "Each line read is sent as a turn of the session (a run named SESSION-tN). Each step prints as it becomes durable; " +
			"a turn waiting at a gate says so, and one waiting for input prints the question and takes the next line as the reply. " +
			"--new CONFIG starts the session first.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kube, ns, err := o.kubeClient()
			if err != nil {
				return err
			}
			tc, err := o.operator(cmd.Context())
			if err != nil {
				return err
			}
			defer tc.stop()
			ch := &chat{kube: kube, ns: ns, session: args[0], out: o.streams.Out, poll: 500 * time.Millisecond,
				records: func(ctx context.Context, name string, after int64) ([]records.Record, error) {
					var recs []records.Record
					err := tc.PagesAfter(ctx, ns, name, 0, after, func(p transcriptclient.Page) error {
						recs = append(recs, p.Records...)
						return nil
					})
					return recs, err
				}}
			if err := ch.open(cmd.Context(), config); err != nil {
				return err
			}
			return ch.run(cmd.Context(), o.streams.In)
		},
	}
	cmd.Flags().StringVar(&config, "new", "", "Start the session first, on this AgentConfig")
	return cmd
}

// chat sends a person's lines to a session, as turns or as replies, and prints what the team
// does with them.
type chat struct {
	kube    client.Client
	ns      string
	session string
	// records reads a turn's transcript records after the one numbered after, oldest first.
	records func(ctx context.Context, name string, after int64) ([]records.Record, error)
	out     io.Writer
	poll    time.Duration
	// seen is the last record printed of the turn followed: each look, and a turn followed again
	// after its reply, reads on from there. last is the turn's last answer read.
	seen map[string]int64
	last map[string]string
}

// open starts the session on config, or checks that it exists.
func (c *chat) open(ctx context.Context, config string) error {
	s := &v1alpha1.AgentSession{}
	if config == "" {
		err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.session}, s)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("AgentSession %s does not exist in namespace %s: start it with --new CONFIG", c.session, c.ns)
		}
		return err
	}
	s.Name, s.Namespace = c.session, c.ns
	s.Spec.ConfigRef.Name = config
	if err := c.kube.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("AgentSession %s exists already: leave out --new to go on with it", c.session)
		}
		return err
	}
	fmt.Fprintf(c.out, "agentsession.agents.baton.dev/%s created\n", c.session)
	return nil
}

// run reads lines until in ends: each is a new turn, or the reply of the turn that asked.
func (c *chat) run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 32<<10) // a turn's input is at most 32 KiB
	asking := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name := asking
		var err error
		if asking != "" {
			err = c.reply(ctx, asking, line)
		} else {
			name, err = c.send(ctx, line)
		}
		if err != nil {
			return err
		}
		if asking, err = c.follow(ctx, name); err != nil {
			return err
		}
	}
	return sc.Err()
}

// send creates the next turn with the line as its input, named SESSION-tN after the turns the
// session has numbered; a name taken already is passed over.
func (c *chat) send(ctx context.Context, line string) (string, error) {
	s := &v1alpha1.AgentSession{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.session}, s); err != nil {
		return "", err
	}
	for n := s.Status.Numbered + 1; n <= s.Status.Numbered+100; n++ {
		turn := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-t%d", c.session, n), Namespace: c.ns},
			Spec: v1alpha1.AgentRunSpec{Session: &v1alpha1.SessionReference{Name: c.session}, Input: line}}
		err := c.kube.Create(ctx, turn)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(c.out, "agentrun.agents.baton.dev/%s created\n", turn.Name)
		return turn.Name, nil
	}
	return "", fmt.Errorf("no free name for the next turn of session %s", c.session)
}

// reply answers the question the turn waits on.
func (c *chat) reply(ctx context.Context, name, line string) error {
	run := &v1alpha1.AgentRun{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, run); err != nil {
		return err
	}
	patch := client.MergeFrom(run.DeepCopy())
	if run.Annotations == nil {
		run.Annotations = map[string]string{}
	}
	run.Annotations[v1alpha1.AnnotationReply] = line
	return c.kube.Patch(ctx, run, patch)
}

// follow prints the turn's steps as they become durable until it ends or asks for input; it
// returns the turn's name when it asks.
func (c *chat) follow(ctx context.Context, name string) (string, error) {
	if c.seen == nil {
		c.seen, c.last = map[string]int64{}, map[string]string{}
	}
	gate := ""
	for {
		run := &v1alpha1.AgentRun{}
		if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, run); err != nil {
			return "", err
		}
		recs, err := c.records(ctx, name, c.seen[name])
		if err != nil && !errors.Is(err, context.Canceled) {
			return "", err
		}
		for _, r := range recs {
			if r.Seq <= c.seen[name] {
				continue
			}
			if r.Kind == "step" {
				c.last[name] = r.StepBody().Output
			}
			c.seen[name] = r.Seq
			if line := logLine(r); line != "" {
				fmt.Fprintln(c.out, line)
			}
		}
		st := run.Status
		switch {
		case st.Phase.Terminal():
			fmt.Fprintf(c.out, "turn %s ended %s (%s)\n", name, st.Phase, st.TerminationReason)
			if last := c.last[name]; last != "" {
				fmt.Fprintln(c.out, indent(last))
			}
			return "", nil
		case st.Phase == v1alpha1.PhaseAwaitingInput && st.PendingInput != nil:
			fmt.Fprintf(c.out, "%s asks: %s\n", st.PendingInput.Agent, textbound.Line(st.PendingInput.Question, 400))
			return name, nil
		case st.Phase == v1alpha1.PhaseAwaitingApproval && st.PendingApproval != nil && st.PendingApproval.Gate != gate:
			gate = st.PendingApproval.Gate
			fmt.Fprintf(c.out, "turn %s waits at gate %s for approval (kubectl baton approve %s %s)\n", name, gate, name, gate)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(c.poll):
		}
	}
}
