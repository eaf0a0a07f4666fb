package agentrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run pins its AgentConfig by recording the name of a ControllerRevision that holds the
// config's spec as it was when the run started. Revisions are named after the config and a
// digest of its UID and spec, so every run of the same config version shares one revision and
// pinning costs one API write per config change, not one per run. Revisions are owned by their
// AgentConfig and go away with it.
const (
	// LabelManagedBy marks the ControllerRevisions the operator manages (and caches).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "baton"
	// LabelConfig names the AgentConfig a revision snapshots.
	LabelConfig = "agents.baton.dev/config"
)

// errRevisionGone means a running run's pinned config no longer exists.
var errRevisionGone = errors.New("pinned config revision no longer exists")

// revisions pins configs and reads pinned specs back, decoding each revision once.
type revisions struct {
	client client.Client
	// reader reads past the cache, for a revision this operator just created.
	reader  client.Reader
	scheme  *runtime.Scheme
	decoded *lru.Cache
	// pinned are the revisions known to exist. Runs of a new config version start together;
	// they wait for one create (creating) instead of each finding the cache without it.
	pinned   *lru.Cache
	creating singleflight.Group
	// plans are the checked plans of pinned revisions, by revision and limit overrides: the runs
	// of a config share one (each gets its own copy of the few fields that are the run's).
	plans *lru.Cache
}

func newRevisions(c client.Client, reader client.Reader, scheme *runtime.Scheme) *revisions {
	return &revisions{client: c, reader: reader, scheme: scheme, decoded: lru.New(1024), pinned: lru.New(1024), plans: lru.New(1024)}
}

// planKey names a pinned revision's plan with a run's limit overrides.
func planKey(namespace, revision string, overrides *v1alpha1.LimitOverrides) string {
	data, _ := json.Marshal(overrides)
	return namespace + "/" + revision + "/" + string(data)
}

// shared is the plan of a pinned revision with these overrides, if one was built.
func (r *revisions) shared(namespace, revision string, overrides *v1alpha1.LimitOverrides) (*workflow.Plan, bool) {
	p, ok := r.plans.Get(planKey(namespace, revision, overrides))
	if !ok {
		return nil, false
	}
	return p.(*workflow.Plan), true
}

// share keeps plan as the revision's with these overrides and returns the one to use: an
// earlier one, if another run built it first.
func (r *revisions) share(namespace, revision string, overrides *v1alpha1.LimitOverrides, plan *workflow.Plan) *workflow.Plan {
	if p, ok := r.shared(namespace, revision, overrides); ok {
		return p
	}
	r.plans.Add(planKey(namespace, revision, overrides), plan)
	return plan
}

func revisionName(cfg *v1alpha1.AgentConfig, raw []byte) string {
	h := sha256.New()
	h.Write([]byte(cfg.UID))
	h.Write(raw)
	sum := hex.EncodeToString(h.Sum(nil))[:10]
	name := cfg.Name
	if len(name) > 242 {
		name = name[:242]
	}
	return name + "-" + sum
}

// pin returns the name of the revision holding cfg's current spec, creating it if needed.
func (r *revisions) pin(ctx context.Context, cfg *v1alpha1.AgentConfig) (string, error) {
	raw, err := json.Marshal(cfg.Spec)
	if err != nil {
		return "", fmt.Errorf("encoding AgentConfig %s: %w", cfg.Name, err)
	}
	name := revisionName(cfg, raw)
	key := types.NamespacedName{Namespace: cfg.Namespace, Name: name}
	if at, ok := r.pinned.Get(key); ok && time.Since(at.(time.Time)) < pinnedTrust {
		return name, nil
	}
	_, err, _ = r.creating.Do(key.String(), func() (any, error) { return nil, r.create(ctx, cfg, key, raw) })
	if err != nil {
		return "", err
	}
	r.pinned.Add(key, time.Now())
	return name, nil
}

// pinnedTrust is how long a revision this operator found or made is taken to exist without
// looking; after that the cache, which has caught up by then, is asked again.
const pinnedTrust = 30 * time.Second

// create makes the revision unless it exists.
func (r *revisions) create(ctx context.Context, cfg *v1alpha1.AgentConfig, key types.NamespacedName, raw []byte) error {
	if err := r.client.Get(ctx, key, &appsv1.ControllerRevision{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	name := key.Name
	rev := &appsv1.ControllerRevision{
		Data:     runtime.RawExtension{Raw: raw},
		Revision: cfg.Generation,
	}
	rev.Name, rev.Namespace = name, cfg.Namespace
	rev.Labels = map[string]string{LabelManagedBy: ManagedBy}
	if len(cfg.Name) <= 63 {
		rev.Labels[LabelConfig] = cfg.Name
	}
	if err := controllerutil.SetOwnerReference(cfg, rev, r.scheme); err != nil {
		return err
	}
	metrics.APIWrites.WithLabelValues("revision").Inc()
	if err := r.client.Create(ctx, rev); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating config revision %s: %w", name, err)
	}
	return nil
}

// spec reads a pinned spec back.
func (r *revisions) spec(ctx context.Context, namespace, name string) (*v1alpha1.AgentConfigSpec, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	// Revision names are content addressed: a name always holds the same spec.
	if s, ok := r.decoded.Get(key); ok {
		return s.(*v1alpha1.AgentConfigSpec), nil
	}
	rev := &appsv1.ControllerRevision{}
	err := r.client.Get(ctx, key, rev)
	if apierrors.IsNotFound(err) {
		err = r.reader.Get(ctx, key, rev)
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", errRevisionGone, name)
	}
	if err != nil {
		return nil, err
	}
	spec := &v1alpha1.AgentConfigSpec{}
	if err := json.Unmarshal(rev.Data.Raw, spec); err != nil {
		return nil, fmt.Errorf("decoding config revision %s: %w", name, err)
	}
	r.decoded.Add(key, spec)
	return spec, nil
}
