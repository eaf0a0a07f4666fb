package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/outbox"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	. "github.com/baton-dev/baton/test/builders"
)

// countingOutbox counts the outbox's writes.
type countingOutbox struct {
	outbox.Store
	writes atomic.Int64
}

func (c *countingOutbox) Put(ctx context.Context, es ...outbox.Entry) (int, error) {
	c.writes.Add(1)
	return c.Store.Put(ctx, es...)
}

func (c *countingOutbox) Delivered(ctx context.Context, seq int64, at time.Time, givenUp bool) error {
	c.writes.Add(1)
	return c.Store.Delivered(ctx, seq, at, givenUp)
}

func (c *countingOutbox) Failed(ctx context.Context, seq int64, n int, next time.Time, e string) error {
	c.writes.Add(1)
	return c.Store.Failed(ctx, seq, n, next, e)
}

// BenchmarkGatesOpenAtOnce opens 1,000 gates at once, as the notifier sees them change, and
// measures the delay from each gate's opening to a receiver taking its event, the store's
// writes per gate, and the API server writes the notifier makes.
func BenchmarkGatesOpenAtOnce(b *testing.B) {
	const gates = 1000
	var mu sync.Mutex
	took := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		took[r.Header.Get("Baton-Event-Run")] = time.Now()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for range b.N {
		scheme := runtime.NewScheme()
		if err := v1alpha1.AddToScheme(scheme); err != nil {
			b.Fatal(err)
		}
		cfg := MakeConfig("refunds", "team-a").Agents(MakeAgent("planner").Terminator()).Gate("plan", "planner", 1).Obj()
		cfg.Spec.Notify = []v1alpha1.NotifySink{{Name: "ops", URL: srv.URL, Format: v1alpha1.NotifyCloudEvents}}
		var apiWrites atomic.Int64
		count := func() { apiWrites.Add(1) }
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cfg).WithStatusSubresource(&v1alpha1.AgentConfig{}).
			WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, cl client.WithWatch, o client.Object, opts ...client.CreateOption) error {
					count()
					return cl.Create(ctx, o, opts...)
				},
				Patch: func(ctx context.Context, cl client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
					count()
					return cl.Patch(ctx, o, p, opts...)
				},
				SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					count()
					return cl.SubResource(sub).Patch(ctx, o, p, opts...)
				},
			}).Build()
		store, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(b.TempDir(), "t.db"))
		if err != nil {
			b.Fatal(err)
		}
		box := &countingOutbox{Store: store.(outbox.Store)}
		n := &Notifier{Client: c, Outbox: box, Transcript: store, Secrets: keys{}, HTTP: &http.Client{Transport: runHeader{srv.Client().Transport}},
			Clock: clock.RealClock{}, Log: logr.Discard()}
		n.init()
		ctx, cancel := context.WithCancel(context.Background())
		go n.deliverLoop(ctx)
		opened := make(map[string]time.Time, gates)
		running := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}
		b.ResetTimer()
		for i := range gates {
			run := MakeRun(fmt.Sprintf("refund-%d", i), "team-a").Config("refunds").Obj()
			run.UID = types.UID(fmt.Sprintf("u%d", i))
			now := time.Now()
			run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval,
				PendingApproval: &v1alpha1.PendingApproval{Gate: "plan", Since: metav1.NewMicroTime(now)}}
			opened[run.Name] = now
			n.derive(ctx, &running, run)
		}
		for {
			mu.Lock()
			done := len(took)
			mu.Unlock()
			if done >= gates {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		n.flush(ctx)
		cancel()
		var delays []time.Duration
		mu.Lock()
		for uid, at := range took {
			delays = append(delays, at.Sub(opened[uid]))
		}
		clear(took)
		mu.Unlock()
		slices.Sort(delays)
		p50, p99 := delays[len(delays)/2], delays[len(delays)*99/100]
		b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
		b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
		b.ReportMetric(float64(box.writes.Load())/gates, "store-writes/gate")
		b.ReportMetric(float64(apiWrites.Load())/gates, "api-writes/gate")
		b.Logf("%d gates opened at once: delay to the receiver p50 %s, p99 %s; %d store writes; %d API writes (the config's status), none to runs",
			gates, p50, p99, box.writes.Load(), apiWrites.Load())
		_ = store.Close()
	}
}

// runHeader tells the receiver which run an event is of, from the CloudEvent's subject, so it
// can time each gate without parsing bodies.
type runHeader struct{ next http.RoundTripper }

func (h runHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := r.GetBody()
	var ce struct {
		Data struct {
			Run string `json:"run"`
		} `json:"data"`
	}
	_ = json.NewDecoder(body).Decode(&ce)
	r.Header.Set("Baton-Event-Run", ce.Data.Run)
	return h.next.RoundTrip(r)
}
