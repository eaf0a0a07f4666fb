package console

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/test/builders"
)

// researchConfig is the config of fannedOut's runs: lead fans out to web and papers, web to
// deep, whose work waits at gate publish for someone other than the run's creator.
func researchConfig() *v1alpha1.AgentConfig {
	fan := v1alpha1.Join{Mode: v1alpha1.JoinAll}
	return builders.MakeConfig("research", "review").Entrypoint("lead").Agents(
		builders.MakeAgent("lead").HandsOffTo("web", "papers").Parallel(2, v1alpha1.BudgetSplit, fan),
		builders.MakeAgent("web").HandsOffTo("deep").Parallel(1, v1alpha1.BudgetSplit, fan),
		builders.MakeAgent("papers").Terminator(), builders.MakeAgent("deep").Terminator(),
	).Gate("publish", "deep", 1).AllowSelfApproval("publish", false).Obj()
}

func (f tree) objects() []client.Object {
	return []client.Object{researchConfig(), f.parent, f.web, f.papers, f.deep, f.claims}
}

// order is the names of the runs a page links to in its table rows, in order.
func order(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<td data-label="Name">(?:<span class="tree-mark"[^>]*>└</span> )?<a href="/runs/review/([^"]+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestTheRunsListShowsBranchesUnderTheirRun(t *testing.T) {
	f := fannedOut()
	s, _ := newConsole(t, true, f.objects()...)

	_, body := get(t, s, "/runs")
	if got, want := strings.Join(order(body), " "), "claims research-1 research-1-b1-1 research-1-b1-1-b2-1 research-1-b1-2"; got != want {
		t.Errorf("the runs list's order is %s, want %s", got, want)
	}
	for row, want := range map[string]string{
		`href="/runs/review/research-1-b1-1"`:      `<tr class="branch depth-1">`,
		`href="/runs/review/research-1-b1-1-b2-1"`: `<tr class="branch depth-2">`,
		`href="/runs/review/research-1"`:           `<tr>`,
		`href="/runs/review/claims"`:               `<tr>`,
	} {
		if tr := rowOf(body, row); !strings.HasPrefix("<tr"+tr, want) {
			t.Errorf("the row of %s is not drawn %s: <tr%.120s", row, want, tr)
		}
	}
	for _, want := range []string{
		`<span class="branch-of">branch of <a href="/runs/review/research-1">research-1</a>, step 1</span>`,
		`<span class="branch-of">branch of <a href="/runs/review/research-1-b1-1">research-1-b1-1</a>, step 2</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the runs list lacks %s", want)
		}
	}
	if strings.Contains(rowOf(body, `href="/runs/review/claims"`), "branch-of") {
		t.Error("a run its named parent does not control is shown as its branch")
	}

	_, body = get(t, s, "/runs?branches=hide")
	if got := strings.Join(order(body), " "); got != "claims research-1" {
		t.Errorf("with branches hidden the list is %s", got)
	}
	if !strings.Contains(body, `<span class="branches-left-out">3 branches not shown</span>`) || !strings.Contains(body, `<option value="hide" selected>`) {
		t.Errorf("the list does not say it leaves 3 branches out:\n%s", body)
	}

	// Filtered, a branch whose parent is not listed still names it.
	_, body = get(t, s, "/runs?phase=AwaitingApproval")
	if got := strings.Join(order(body), " "); got != "research-1-b1-1-b2-1" || !strings.Contains(body, "branch of <a href=\"/runs/review/research-1-b1-1\">") {
		t.Errorf("the branch waiting at a gate, alone: %s\n%s", got, body)
	}
}

// branchesCell is the cell of the run page's timeline that holds the tree of the branches of
// step.
func branchesCell(body, step string) string {
	_, after, found := strings.Cut(body, `<tr class="branches" id="branches-`+step+`">`)
	if !found {
		return ""
	}
	cell, _, _ := strings.Cut(after, "</tr>")
	return cell
}

func TestTheRunPageShowsItsBranchTreeUnderTheStepThatFannedOut(t *testing.T) {
	f := fannedOut()
	s, _ := newConsole(t, true, f.objects()...)

	_, body := get(t, s, "/runs/review/research-1")
	// The tree is the row after step 1's.
	if !regexp.MustCompile(`<td data-label="Step">1</td>\n(?:<td [^\n]*\n)*</tr>\n<tr class="branches" id="branches-1">`).MatchString(body) {
		t.Errorf("the branches are not under step 1:\n%s", body)
	}
	tree := html.UnescapeString(regexp.MustCompile(`\s+`).ReplaceAllString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(branchesCell(body, "1"), " "), " "))
	for _, want := range []string{
		"Step 1 fanned out to 2 branches",
		"research-1-b1-1 web Running 120 tokens",
		"research-1-b1-1-b2-1 deep AwaitingApproval 40 tokens",
		"research-1-b1-2 papers Succeeded Completed 200 tokens, 0.0004 USD",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("the tree lacks %q: %s", want, tree)
		}
	}
	cell := branchesCell(body, "1")
	for _, link := range []string{`href="/runs/review/research-1-b1-1"`, `href="/runs/review/research-1-b1-1-b2-1"`, `href="/runs/review/research-1-b1-2"`} {
		if !strings.Contains(cell, link) {
			t.Errorf("the tree does not link %s to its own page", link)
		}
	}
	if strings.Contains(cell, "claims") {
		t.Error("the tree shows a run the parent does not control")
	}
	// deep is web's branch: a list inside web's item.
	if !regexp.MustCompile(`(?s)research-1-b1-1</a>[^<]*<span class="agent">web</span>.*?<ul class="tree">\s*<li class="branch"><a href="/runs/review/research-1-b1-1-b2-1"`).MatchString(cell) {
		t.Errorf("deep is not under web:\n%s", cell)
	}
	if strings.Contains(body, "is working…") {
		t.Error("a run that waits for its branches is shown working")
	}
	if !strings.Contains(body, "<dt>Branches</dt><dd>2 started</dd>") {
		t.Error("the summary does not count the branches started")
	}

	_, body = get(t, s, "/runs/review/research-1-b1-1")
	if want := `<dt>Branch of</dt><dd id="branch-of"><a href="/runs/review/research-1">research-1</a> (step 1, branch 1, depth 1)</dd>`; !strings.Contains(body, want) {
		t.Errorf("the branch's page does not say what it is a branch of:\n%s", body)
	}
	if !strings.Contains(branchesCell(body, "2"), `href="/runs/review/research-1-b1-1-b2-1"`) {
		t.Errorf("the branch's page does not show its own branch under its step 2:\n%s", body)
	}
}

func TestARunPageWhoseBranchesCannotBeListedShowsWhatItsStatusSays(t *testing.T) {
	f := fannedOut()
	funcs := interceptAccess(true)
	funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		o := &client.ListOptions{}
		o.ApplyOptions(opts)
		if o.LabelSelector != nil && !o.LabelSelector.Empty() {
			return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "agentruns"}, "", errNoList)
		}
		return c.List(ctx, list, opts...)
	}
	s, _ := newConsoleWith(t, funcs, f.objects()...)
	_, body := get(t, s, "/runs/review/research-1")
	cell := branchesCell(body, "1")
	if !strings.Contains(cell, `href="/runs/review/research-1-b1-1"`) || !strings.Contains(cell, "0.0004 USD") || strings.Contains(cell, "research-1-b1-1-b2-1") {
		t.Errorf("the tree is not what the run's status says:\n%s", cell)
	}
	if !strings.Contains(html.UnescapeString(body), "The branches' own runs were not read, so they are as this run's status says:") {
		t.Errorf("the page does not say why the branches were not read:\n%s", body)
	}
}

var errNoList = errNoListing{}

type errNoListing struct{}

func (errNoListing) Error() string { return "bob may not list runs" }

func TestABranchsGateIsInTheInboxWithItsParentNamed(t *testing.T) {
	f := fannedOut()
	s, _ := newConsole(t, true, f.objects()...)
	s.opts.User = "bob"
	_, body := get(t, s, "/inbox")
	text := html.UnescapeString(body)
	for _, want := range []string{
		"1 waiting for you",
		`<a href="/runs/review/research-1-b1-1-b2-1">research-1-b1-1-b2-1</a>`,
		`<span class="branch-of">branch of <a href="/runs/review/research-1-b1-1">research-1-b1-1</a> (step 2, branch 1)</span>`,
		// The branch was made by the operator; the run it is part of, by alice.
		"· started by alice",
		`action="/runs/review/research-1-b1-1-b2-1/decide"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("bob's inbox lacks %s:\n%s", want, body)
		}
	}

	// alice created the run the branch is part of: gate publish needs someone else.
	s.opts.User = "alice"
	if _, body := get(t, s, "/inbox"); !strings.Contains(body, "0 waiting for you") {
		t.Errorf("alice's inbox offers her the gate of a branch of her own run:\n%s", body)
	}
	_, body = get(t, s, "/runs/review/research-1-b1-1-b2-1")
	text = html.UnescapeString(body)
	for _, want := range []string{
		"You created the run this branch is part of, and gate publish needs an approver other than that run's creator (allowSelfApproval: false).",
		"<dt>Created by</dt><dd>alice <span class=\"muted\">(who created the run it is a branch of)</span></dd>",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the branch's page lacks %s:\n%s", want, body)
		}
	}
}

func TestARunsPageFollowsItsBranches(t *testing.T) {
	f := fannedOut()
	// The fake API server's watches start from now: the test changes the branch once the
	// console watches the run's branches.
	watching := make(chan struct{})
	var once sync.Once
	funcs := interceptAccess(true)
	funcs.Watch = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
		o := &client.ListOptions{}
		o.ApplyOptions(opts)
		if o.LabelSelector != nil && o.LabelSelector.Matches(labels.Set{v1alpha1.LabelParent: "research-1"}) {
			once.Do(func() { close(watching) })
		}
		return c.Watch(ctx, list, opts...)
	}
	s, kube := newConsoleWith(t, funcs, f.objects()...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	parent := &v1alpha1.AgentRun{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(f.parent), parent); err != nil {
		t.Fatal(err)
	}
	// From the version the page was drawn from: opening it is not news.
	changed := make(chan struct{}, 16)
	q := url.Values{"watch": {"run"}, "namespace": {"review"}, "name": {"research-1"}, "rv": {parent.ResourceVersion}}
	if !s.follow(ctx, q, func() { changed <- struct{}{} }) {
		t.Fatal("the console does not follow a run")
	}
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the console does not watch the run's branches")
	}
	if len(changed) > 0 {
		t.Fatal("the page is told of a change before anything changed")
	}
	// A branch's tokens change while it runs; its parent's status says nothing of it yet.
	web := f.web.DeepCopy()
	if err := kube.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	web.Status.TokensUsed = 500
	if err := kube.Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the run's page is not told that its branch changed")
	}
}
