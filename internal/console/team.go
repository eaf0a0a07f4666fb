package console

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
)

// Team is the picture of a run's agents: a node per agent on a circle, an arrow per handoff the
// config allows or the run took, labelled with how often the run took it.
type Team struct {
	Width, Height float64
	Nodes         []Node
	Edges         []Edge
}

// Node is one agent.
type Node struct {
	Name    string
	X, Y    float64
	Steps   int
	Current bool
	Entry   bool
}

// Edge is a handoff from one agent to another.
type Edge struct {
	From, To       string
	X1, Y1, X2, Y2 float64
	LX, LY         float64
	Count          int
	Taken          bool
}

const (
	nodeRadius  = 34.0
	teamMarginX = 40.0
	teamMarginY = 8.0
)

// configured is the team as its config (nil when unreadable) says: its agents in order, the
// handoffs it allows, and the agent that starts.
func configured(cfg *v1alpha1.AgentConfig) (names []string, allowed map[[2]string]bool, entry string) {
	allowed = map[[2]string]bool{}
	if cfg == nil {
		return nil, allowed, ""
	}
	entry = cfg.Spec.Entrypoint
	for _, a := range cfg.Spec.Agents {
		names = append(names, a.Name)
		for _, h := range a.Handoffs {
			allowed[[2]string{a.Name, h}] = true
		}
	}
	if r := cfg.Spec.Routing; r != nil && r.Supervisor != "" {
		entry = r.Supervisor
	}
	return names, allowed, entry
}

// team draws the run's team from its config (nil when unreadable) and the steps it took.
func team(cfg *v1alpha1.AgentConfig, run *v1alpha1.AgentRun, entries []runview.Entry) Team {
	names, allowed, entry := configured(cfg)
	steps := map[string]int{}
	taken := map[[2]string]int{}
	for _, e := range entries {
		if e.Kind != runview.EntryStep {
			continue
		}
		// A fan-out hands off to each of its branches' agents; a join's record names them all,
		// and is no step of theirs.
		from := agentsOf(e.Agent)
		if len(from) == 1 {
			steps[from[0]]++
		}
		for _, a := range from {
			for _, b := range agentsOf(e.To) {
				if b != a {
					taken[[2]string{a, b}]++
				}
			}
		}
	}
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for k := range taken {
		add(k[0])
		add(k[1])
	}
	for n := range steps {
		add(n)
	}
	// The entrypoint at the top, the rest in the config's order, clockwise.
	if i := slices.Index(names, entry); i > 0 {
		names = append([]string{entry}, slices.Delete(names, i, i+1)...)
	}

	t := placeNodes(names)
	for i := range t.Nodes {
		name := t.Nodes[i].Name
		t.Nodes[i].Steps, t.Nodes[i].Entry = steps[name], name == entry
		t.Nodes[i].Current = slices.Contains(agentsOf(run.Status.CurrentAgent), name) && !run.Status.Phase.Terminal()
	}
	t.Edges = drawEdges(t.Nodes, allowed, taken)
	return t
}

// agentsOf are the agents a handoff record's from or to names: one, or, for a fan-out or a
// join, the branches' agents, comma-separated.
func agentsOf(names string) []string {
	var out []string
	for n := range strings.SplitSeq(names, ",") {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// placeNodes puts the agents on a circle, the first at the top, clockwise, in a picture as big as
// they need.
func placeNodes(names []string) Team {
	n := len(names)
	radius := 0.0
	if n > 1 {
		// Far enough apart that neighbours' circles and labels do not touch.
		radius = math.Max(110, (2*nodeRadius+70)/(2*math.Sin(math.Pi/float64(n))))
	}
	var t Team
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for i, name := range names {
		angle := -math.Pi/2 + 2*math.Pi*float64(i)/float64(max(n, 1))
		x, y := radius*math.Cos(angle), radius*math.Sin(angle)
		t.Nodes = append(t.Nodes, Node{Name: name, X: x, Y: y})
		minX, maxX, minY, maxY = math.Min(minX, x), math.Max(maxX, x), math.Min(minY, y), math.Max(maxY, y)
	}
	// The picture is as big as its agents: room for each circle, and beside it for a name
	// longer than the circle is wide.
	if n > 0 {
		dx, dy := teamMarginX+nodeRadius-minX, teamMarginY+nodeRadius-minY
		t.Width, t.Height = maxX-minX+2*(nodeRadius+teamMarginX), maxY-minY+2*(nodeRadius+teamMarginY)
		for i := range t.Nodes {
			t.Nodes[i].X, t.Nodes[i].Y = t.Nodes[i].X+dx, t.Nodes[i].Y+dy
		}
	}
	return t
}

// drawEdges draws an arrow for every handoff allowed or taken between the placed agents,
// labelled with how often the run took it.
func drawEdges(nodes []Node, allowed map[[2]string]bool, taken map[[2]string]int) []Edge {
	at := map[string][2]float64{}
	for _, n := range nodes {
		at[n.Name] = [2]float64{n.X, n.Y}
	}
	pairs := map[[2]string]bool{}
	for k := range allowed {
		pairs[k] = true
	}
	for k := range taken {
		pairs[k] = true
	}
	keys := make([][2]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	var edges []Edge
	for _, k := range keys {
		a, b := at[k[0]], at[k[1]]
		if k[0] == k[1] {
			continue
		}
		dx, dy := b[0]-a[0], b[1]-a[1]
		length := math.Hypot(dx, dy)
		ux, uy := dx/length, dy/length
		// An arrow each way between two agents: each is moved to its own side.
		shift := 0.0
		if pairs[[2]string{k[1], k[0]}] {
			shift = 8
		}
		px, py := -uy*shift, ux*shift
		e := Edge{From: k[0], To: k[1], Count: taken[k], Taken: taken[k] > 0,
			X1: a[0] + ux*nodeRadius + px, Y1: a[1] + uy*nodeRadius + py,
			X2: b[0] - ux*(nodeRadius+6) + px, Y2: b[1] - uy*(nodeRadius+6) + py}
		// The count sits beside its arrow, on the side the arrow was moved to, so the counts of
		// two arrows between the same agents are on either side.
		e.LX, e.LY = (e.X1+e.X2)/2-uy*12, (e.Y1+e.Y2)/2+ux*12
		edges = append(edges, e)
	}
	return edges
}
