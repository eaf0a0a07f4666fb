package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/agents"
)

// CacheOptions are the manager cache settings the controllers rely on: only the config
// snapshots the operator makes are cached, not every ControllerRevision in the cluster.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.ControllerRevision{}: {Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})},
	}}
}

// Setup registers Baton's controllers with the manager.
func Setup(mgr ctrl.Manager, providers *agents.Providers, clk clock.Clock, opts Options) error {
	runs := NewAgentRunReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(),
		mgr.GetEventRecorder("baton-controller"), clk, providers, opts)
	if err := runs.SetupWithManager(mgr); err != nil {
		return err
	}
	configs := &AgentConfigReconciler{Client: mgr.GetClient(), Providers: providers}
	return configs.SetupWithManager(mgr)
}
