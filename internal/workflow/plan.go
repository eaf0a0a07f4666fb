package workflow

import (
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/shopspring/decimal"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// Default limits, the same as the API's defaults. They back up configs stored without them.
const (
	DefaultMaxHandoffs         int32 = 20
	DefaultMaxSteps            int32 = 25
	DefaultMaxTokens           int64 = 50000
	DefaultTokenWarningPercent int32 = 90
	DefaultTimeout                   = 10 * time.Minute
	DefaultAgentTimeout              = 2 * time.Minute
	DefaultMaxErrors           int32 = 5
	DefaultMaxHandoffDepth     int32 = 5
	DefaultMaxToolCalls        int32 = 100
	DefaultMaxTranscriptBytes  int64 = 64 << 20

	DefaultWindow             int32 = 3
	DefaultMinUniqueAgents    int32 = 2
	DefaultMaxCycleRepeats    int32 = 3
	DefaultMaxRepeatedInputs  int32 = 2
	DefaultMaxRepeatedOutputs int32 = 3

	DefaultMaxRepeatedToolCalls int32 = 3
)

// LoopSettings are the loop detectors' settings after defaults.
type LoopSettings struct {
	Window             int32
	MinUniqueAgents    int32
	MaxCycleRepeats    int32
	MaxRepeatedInputs  int32
	MaxRepeatedOutputs int32
	Allow              []v1alpha1.AllowedCycle
	// MaxRepeatedToolCalls is how often a run may call one tool with the same arguments.
	MaxRepeatedToolCalls int32
}

// EffectiveLimits are a run's limits after the run's overrides and the defaults are applied.
type EffectiveLimits struct {
	MaxHandoffs         int32
	MaxSteps            int32
	MaxTokens           int64
	TokenWarningPercent int32
	Timeout             time.Duration
	AgentTimeout        time.Duration
	MaxErrors           int32
	MaxHandoffDepth     int32
	MaxToolCalls        int32
	MaxTranscriptBytes  int64
	// MaxBranches is how many branches a run may start in all; MaxDepth how deep they nest.
	MaxBranches int32
	MaxDepth    int32
	// CostLimit is limits.maxCost, when CostLimited.
	CostLimit   decimal.Decimal
	CostLimited bool
}

// MaxCost is limits.maxCost, and whether the run has one.
func (l EffectiveLimits) MaxCost() (decimal.Decimal, bool) { return l.CostLimit, l.CostLimited }

// Plan is a run's pinned config, checked and indexed for the core.
type Plan struct {
	// shared is what every run of the config shares, read only once NewPlan has built it: each
	// run's plan holds a pointer to it and its own few fields below, so a run's plan is small.
	*shared

	runName, runNamespace string
	skipGates             bool
	// creator is who created the run, as the admission webhook recorded it; empty if unknown.
	creator string
	// earlier and earlierRuns are, for a turn of a session, the steps and runs of its earlier
	// turns given the same history (WithEarlierTurns).
	earlier     []v1alpha1.HandoffRecord
	earlierRuns []string
	// alsoNotApprovedBy is, while a run started from an earlier one is replayed, who created
	// the earlier run: their approvals do not pass gates with allowSelfApproval: false either.
	alsoNotApprovedBy string
	// depth is how deep the run is nested as a branch: 0 for a run that is no branch. A
	// branch starts at entry, and its first answer without a handoff is its output.
	depth int32
	entry string
}

// shared is a checked config and its indexes.
type shared struct {
	Spec   v1alpha1.AgentConfigSpec
	Limits EffectiveLimits
	Loops  LoopSettings

	agents      map[string]*v1alpha1.Agent
	signals     map[string]v1alpha1.Signal
	states      map[string]v1alpha1.State
	terminators int
	schemas     map[string]*jsonschema.Schema
}

// NewPlan checks a pinned config and a run's overrides and indexes them. The API server refuses
// most bad configs; these checks hold the core's own assumptions whatever was stored.
func NewPlan(spec v1alpha1.AgentConfigSpec, overrides *v1alpha1.LimitOverrides) (*Plan, field.ErrorList) {
	p := &Plan{shared: &shared{
		Spec:    spec,
		Limits:  mergeLimits(spec.Limits, overrides),
		Loops:   loopSettings(spec.LoopDetection),
		agents:  make(map[string]*v1alpha1.Agent, len(spec.Agents)),
		signals: make(map[string]v1alpha1.Signal, len(spec.Signals)),
		states:  make(map[string]v1alpha1.State, len(spec.States)),
	}}
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	errs = append(errs, p.shared.costLimit(spec.Limits, overrides)...)

	if _, ok := modes[p.Mode()]; !ok {
		errs = append(errs, field.NotSupported(specPath.Child("mode"), p.Mode(), supportedModes()))
	}
	if len(spec.Agents) == 0 {
		errs = append(errs, field.Required(specPath.Child("agents"), "a config needs at least one agent"))
	}
	for i := range spec.Agents {
		a := &spec.Agents[i]
		if _, dup := p.agents[a.Name]; dup {
			errs = append(errs, field.Duplicate(specPath.Child("agents").Index(i).Child("name"), a.Name))
		}
		p.agents[a.Name] = a
		if a.Terminator {
			p.terminators++
		}
	}
	for _, s := range spec.Signals {
		p.signals[s.Name] = s
	}
	for _, s := range spec.States {
		p.states[s.Name] = s
	}
	if _, ok := p.agents[spec.Entrypoint]; !ok {
		errs = append(errs, field.Invalid(specPath.Child("entrypoint"), spec.Entrypoint, "not the name of an agent in spec.agents"))
	}
	for i := range spec.Agents {
		for j, h := range spec.Agents[i].Handoffs {
			if _, ok := p.agents[h]; !ok {
				errs = append(errs, field.Invalid(specPath.Child("agents").Index(i).Child("handoffs").Index(j), h, "not the name of an agent in spec.agents"))
			}
		}
	}
	if m, ok := modes[p.Mode()]; ok {
		errs = append(errs, m.validate(p, specPath)...)
	}
	errs = append(errs, checkDurations(spec, overrides, specPath)...)
	errs = append(errs, p.compileSchemas(specPath)...)
	errs = append(errs, p.checkTools(specPath)...)
	errs = append(errs, p.checkParallel(specPath)...)
	errs = append(errs, p.checkTrust(specPath)...)
	return p, errs
}

// Mode is the config's workflow mode, Swarm when unset.
func (p *Plan) Mode() v1alpha1.WorkflowMode {
	if p.Spec.Mode == "" {
		return v1alpha1.ModeSwarm
	}
	return p.Spec.Mode
}

// Agent returns the named agent, or nil.
func (p *Plan) Agent(name string) *v1alpha1.Agent { return p.agents[name] }

// Signal returns the declared signal of that name.
func (p *Plan) Signal(name string) (v1alpha1.Signal, bool) {
	s, ok := p.signals[name]
	if ok && s.Action == "" {
		s.Action = v1alpha1.ActionNone
	}
	return s, ok
}

// State returns the named state.
func (p *Plan) State(name string) (v1alpha1.State, bool) {
	s, ok := p.states[name]
	return s, ok
}

// Default context budget: what an agent sees of the run's earlier steps.
const (
	DefaultContextMessages int32 = 12
	DefaultContextChars    int32 = 32000
)

// ContextBudget is the most entries and characters of earlier steps an agent sees.
func (p *Plan) ContextBudget() (messages, chars int) {
	return int(orDefault(p.Spec.Context.MaxMessages, DefaultContextMessages)), int(orDefault(p.Spec.Context.MaxChars, DefaultContextChars))
}

// HasTerminator reports whether any agent is a terminator.
func (p *Plan) HasTerminator() bool { return p.terminators > 0 }

// StepTimeout is the deadline of one step of the named agent.
func (p *Plan) StepTimeout(agent string) time.Duration {
	if a := p.agents[agent]; a != nil {
		if d := a.Timeout.OrZero(); d > 0 {
			return d
		}
	}
	return p.Limits.AgentTimeout
}

// CanHandOff reports whether from may hand control to to.
func (p *Plan) CanHandOff(from, to string) bool {
	a := p.agents[from]
	if a == nil {
		return false
	}
	for _, h := range a.Handoffs {
		if h == to {
			return true
		}
	}
	return false
}

// costLimit reads limits.maxCost, the run's override first.
func (s *shared) costLimit(l v1alpha1.Limits, o *v1alpha1.LimitOverrides) field.ErrorList {
	raw := l.MaxCost
	if o != nil && o.MaxCost != nil {
		raw = o.MaxCost
	}
	if raw == nil {
		return nil
	}
	limit, err := cost.Parse(*raw)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "limits", "maxCost"), *raw, err.Error())}
	}
	s.Limits.CostLimit, s.Limits.CostLimited = limit, true
	return nil
}

func mergeLimits(l v1alpha1.Limits, o *v1alpha1.LimitOverrides) EffectiveLimits {
	e := EffectiveLimits{
		MaxHandoffs:         orDefault(l.MaxHandoffs, DefaultMaxHandoffs),
		MaxSteps:            orDefault(l.MaxSteps, DefaultMaxSteps),
		MaxTokens:           orDefault(l.MaxTokens, DefaultMaxTokens),
		TokenWarningPercent: orDefault(l.TokenWarningPercent, DefaultTokenWarningPercent),
		Timeout:             durationOr(l.Timeout, DefaultTimeout),
		AgentTimeout:        durationOr(l.AgentTimeout, DefaultAgentTimeout),
		MaxErrors:           orDefault(l.MaxErrors, DefaultMaxErrors),
		MaxHandoffDepth:     orDefault(l.MaxHandoffDepth, DefaultMaxHandoffDepth),
		MaxToolCalls:        orDefault(l.MaxToolCalls, DefaultMaxToolCalls),
		MaxTranscriptBytes:  orDefault(l.MaxTranscriptBytes, DefaultMaxTranscriptBytes),
		MaxBranches:         orDefault(l.MaxBranches, DefaultMaxBranches),
		MaxDepth:            orDefault(l.MaxDepth, DefaultMaxDepth),
	}
	if o == nil {
		return e
	}
	e.MaxHandoffs = orDefault(o.MaxHandoffs, e.MaxHandoffs)
	e.MaxSteps = orDefault(o.MaxSteps, e.MaxSteps)
	e.MaxTokens = orDefault(o.MaxTokens, e.MaxTokens)
	e.TokenWarningPercent = orDefault(o.TokenWarningPercent, e.TokenWarningPercent)
	e.Timeout = durationOr(o.Timeout, e.Timeout)
	e.AgentTimeout = durationOr(o.AgentTimeout, e.AgentTimeout)
	e.MaxErrors = orDefault(o.MaxErrors, e.MaxErrors)
	e.MaxHandoffDepth = orDefault(o.MaxHandoffDepth, e.MaxHandoffDepth)
	e.MaxToolCalls = orDefault(o.MaxToolCalls, e.MaxToolCalls)
	e.MaxTranscriptBytes = orDefault(o.MaxTranscriptBytes, e.MaxTranscriptBytes)
	e.MaxBranches = orDefault(o.MaxBranches, e.MaxBranches)
	e.MaxDepth = orDefault(o.MaxDepth, e.MaxDepth)
	return e
}

func loopSettings(l v1alpha1.LoopDetection) LoopSettings {
	return LoopSettings{
		Window:             orDefault(l.Window, DefaultWindow),
		MinUniqueAgents:    orDefault(l.MinUniqueAgents, DefaultMinUniqueAgents),
		MaxCycleRepeats:    orDefault(l.MaxCycleRepeats, DefaultMaxCycleRepeats),
		MaxRepeatedInputs:  orDefault(l.MaxRepeatedInputs, DefaultMaxRepeatedInputs),
		MaxRepeatedOutputs: orDefault(l.MaxRepeatedOutputs, DefaultMaxRepeatedOutputs),
		Allow:              l.Allow,

		MaxRepeatedToolCalls: orDefault(l.MaxRepeatedToolCalls, DefaultMaxRepeatedToolCalls),
	}
}

func orDefault[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

func durationOr(d *v1alpha1.Duration, def time.Duration) time.Duration {
	if v := d.OrZero(); v > 0 {
		return v
	}
	return def
}

// checkDurations names every duration of the config and the run's overrides that Go cannot
// read or that is out of bounds. The API server refuses them; this holds for objects stored
// before it did.
func checkDurations(spec v1alpha1.AgentConfigSpec, overrides *v1alpha1.LimitOverrides, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(d *v1alpha1.Duration, p *field.Path) {
		if _, err := d.Get(); err != nil {
			errs = append(errs, field.Invalid(p, string(*d), err.Error()))
		}
	}
	check(spec.Limits.Timeout, path.Child("limits", "timeout"))
	check(spec.Limits.AgentTimeout, path.Child("limits", "agentTimeout"))
	for i, a := range spec.Agents {
		check(a.Timeout, path.Child("agents").Index(i).Child("timeout"))
		for j, t := range a.Script {
			check(t.Delay, path.Child("agents").Index(i).Child("script").Index(j).Child("delay"))
		}
	}
	for i, g := range spec.Approvals {
		check(g.Timeout, path.Child("approvals").Index(i).Child("timeout"))
	}
	for i, s := range spec.ToolServers {
		if s.MCP != nil {
			check(s.MCP.Timeout, path.Child("toolServers").Index(i).Child("mcp", "timeout"))
		}
		if s.HTTP != nil {
			check(s.HTTP.Timeout, path.Child("toolServers").Index(i).Child("http", "timeout"))
		}
	}
	for i, a := range spec.Agents {
		for j, t := range a.Tools {
			if t.Gate != nil {
				check(t.Gate.Timeout, path.Child("agents").Index(i).Child("tools").Index(j).Child("gate", "timeout"))
			}
		}
	}
	if overrides != nil {
		runPath := field.NewPath("spec", "limits")
		check(overrides.Timeout, runPath.Child("timeout"))
		check(overrides.AgentTimeout, runPath.Child("agentTimeout"))
	}
	return errs
}

func supportedModes() []string {
	out := make([]string, 0, len(modes))
	for _, m := range []v1alpha1.WorkflowMode{v1alpha1.ModeSwarm, v1alpha1.ModeSupervisor, v1alpha1.ModeStateMachine} {
		if _, ok := modes[m]; ok {
			out = append(out, string(m))
		}
	}
	return out
}
