// Package secrets reads the API keys and tool headers runs use from labelled Secrets, in the
// namespaces an admin allows.
package secrets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Reader reads API keys from the manager's cache, whose Secret informer lists and
// watches only Secrets labelled v1alpha1.LabelAPIKey=true (operator.CacheOptions): the API server
// filters on the label, so no other Secret's data ever reaches the operator, its memory or its logs. A
// rotated key takes effect as soon as the watch delivers it.
type Reader struct {
	reader client.Reader
	// namespaces, when not empty, are the only namespaces Secrets are read in.
	namespaces map[string]bool
}

// NewReader reads Secrets through reader, only in namespaces when they are given.
func NewReader(reader client.Reader, namespaces []string) *Reader {
	s := &Reader{reader: reader}
	if len(namespaces) > 0 {
		s.namespaces = make(map[string]bool, len(namespaces))
		for _, ns := range namespaces {
			s.namespaces[ns] = true
		}
	}
	return s
}

// readable says why a Secret in namespace cannot be read, if it cannot.
func (s *Reader) readable(namespace, name string) error {
	if s.namespaces == nil || s.namespaces[namespace] {
		return nil
	}
	return fmt.Errorf("the Secret %s in namespace %s cannot be read: the operator reads Secrets only in the namespaces a cluster admin listed (--secret-namespaces)",
		name, namespace)
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch

// SecretKey returns one key of a labelled Secret. Its errors name the Secret and the key, never
// a value.
func (s *Reader) SecretKey(ctx context.Context, namespace, name, key string) (string, error) {
	secret, err := s.get(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	value, ok := secret.Data[key]
	if !ok || len(value) == 0 {
		return "", fmt.Errorf("the Secret %s in namespace %s has no key %q", name, namespace, key)
	}
	return string(value), nil
}

// SecretData returns every key of a labelled Secret: the headers a tool server is sent. Its
// errors name the Secret, never a value.
func (s *Reader) SecretData(ctx context.Context, namespace, name string) (map[string]string, error) {
	secret, err := s.get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(secret.Data))
	for k, v := range secret.Data {
		out[k] = string(v)
	}
	return out, nil
}

// get reads a labelled Secret the operator may read.
func (s *Reader) get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	if err := s.readable(namespace, name); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the Secret %s in namespace %s does not exist or is not labelled %s=true; Baton only reads Secrets marked for it",
			name, namespace, v1alpha1.LabelAPIKey)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	return secret, nil
}
