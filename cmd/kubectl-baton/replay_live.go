package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/replay/live"
	"github.com/baton-dev/baton/internal/workflow"
)

// liveFlags are replay's flags for the turns the recording does not hold.
type liveFlags struct {
	on      bool
	allow   []string
	maxLive int
}

func (l *liveFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&l.on, "live", false, "Answer the turns the recording does not hold by calling the agent's model, with API keys from "+
		"BATON_SECRET_<NAME>_<KEY> or the Secrets you may read; tool calls are answered from the recording only")
	cmd.Flags().StringSliceVar(&l.allow, "egress-allow", nil, "With --live, addresses the model calls may reach beyond the default policy "+
		"(CIDR or host; loopback, link-local and metadata addresses are refused unless allowed here)")
	cmd.Flags().IntVar(&l.maxLive, "max-live", replay.DefaultMaxLive, "With --live, the most turns answered live")
}

// liveOptions are the replay's options: without --live, none; with it, a caller of the models
// behind the egress policy, with the user's credentials, from the user's namespace. A file's
// own config does not name the models and keys of live turns: with -f, --live needs --config.
func (o *options) liveOptions(ctx context.Context, l liveFlags, e *records.Export, fromFile bool, config string) (func(*workflow.Plan, replay.Recording) replay.Options, error) {
	if !l.on {
		if len(l.allow) > 0 {
			return nil, fmt.Errorf("--egress-allow is for --live")
		}
		return nil, nil
	}
	if l.maxLive < 1 {
		return nil, fmt.Errorf("--max-live %d: give at least 1", l.maxLive)
	}
	if fromFile && config == "" {
		return nil, fmt.Errorf("--live with -f needs --config: live turns call the models, and send the keys, of a config you name, never of the file's own")
	}
	policy, err := egress.New(l.allow, nil)
	if err != nil {
		return nil, err
	}
	policy = policy.OwnedBy(egress.Owner{Whose: "the replay's", Remedy: "allow it with --egress-allow"})
	setup := live.Setup{HTTPClient: policy.Client(), OperatorNamespace: o.operatorNamespace}
	// A cluster, when one is at hand, is read as the user: the Secrets and model endpoints
	// they may read, in their namespace.
	namespace := e.Namespace
	if c, ns, err := o.kubeClient(); err == nil {
		setup.Reader, namespace = c, ns
	}
	return func(p *workflow.Plan, rec replay.Recording) replay.Options {
		return replay.Options{Live: live.NewCaller(setup, p, rec, namespace, e.UID).Live(ctx), MaxLive: l.maxLive}
	}, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func joinSteps(steps []int32) string {
	s := make([]string, len(steps))
	for i, n := range steps {
		s[i] = strconv.Itoa(int(n))
	}
	return strings.Join(s, ", ")
}
