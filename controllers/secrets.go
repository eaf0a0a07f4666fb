package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LabelAPIKey marks the Secrets agents may use for their API keys. The operator reads no other
// Secret, so an AgentConfig cannot send an arbitrary Secret to the endpoint it names.
const LabelAPIKey = "agents.baton.dev/api-key"

// secretTTL is how long a Secret's key is reused before it is read again, so that a rotated
// key takes effect within it.
const secretTTL = 30 * time.Second

// secretReader reads API keys straight from the API server, keeping each for secretTTL: the
// operator does not watch or cache the cluster's Secrets, and needs only get on them.
type secretReader struct {
	reader client.Reader
	cache  *cache.LRUExpireCache
}

func newSecretReader(reader client.Reader) *secretReader {
	return &secretReader{reader: reader, cache: cache.NewLRUExpireCache(4096)}
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// SecretKey returns one key of a Secret. Its errors name the Secret and the key, never a value.
func (s *secretReader) SecretKey(ctx context.Context, namespace, name, key string) (string, error) {
	cacheKey := namespace + "/" + name + "/" + key
	if v, ok := s.cache.Get(cacheKey); ok {
		return v.(string), nil
	}
	secret := &corev1.Secret{}
	err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("Secret %s (for the API key) does not exist in namespace %s", name, namespace)
	}
	if err != nil {
		return "", fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	if secret.Labels[LabelAPIKey] != "true" {
		return "", fmt.Errorf("Secret %s in namespace %s is not labelled %s=true; Baton only uses Secrets marked for it", name, namespace, LabelAPIKey)
	}
	value, ok := secret.Data[key]
	if !ok || len(value) == 0 {
		return "", fmt.Errorf("Secret %s in namespace %s has no key %q", name, namespace, key)
	}
	s.cache.Add(cacheKey, string(value), secretTTL)
	return string(value), nil
}
