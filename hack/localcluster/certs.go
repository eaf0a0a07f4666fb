package main

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// servingCA gives the local operator a serving certificate signed by a CA of its own, and
// returns that CA. envtest serves webhooks with a certificate that it also gives as their CA
// bundle: Go and curl accept such a leaf as an anchor, Node's TLS does not
// (UNABLE_TO_VERIFY_LEAF_SIGNATURE), and the transcript API and the A2A endpoint share the
// webhook's certificate. The certificate and key replace envtest's in the webhook's serving
// directory, and the webhook configurations envtest installed trust the CA.
func servingCA(ctx context.Context, c client.Client, w *envtest.WebhookInstallOptions) ([]byte, error) {
	chain, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, nil)
	if err != nil {
		return nil, fmt.Errorf("making the local serving certificate: %w", err)
	}
	ca, err := lastCertificate(chain)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"tls.crt": chain, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(w.LocalServingCertDir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	for _, cfg := range webhookConfigs(w) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return nil, err
		}
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			if hook, ok := h.(map[string]any); ok {
				if err := unstructured.SetNestedField(hook, base64.StdEncoding.EncodeToString(ca), "clientConfig", "caBundle"); err != nil {
					return nil, err
				}
			}
		}
		if err := unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks"); err != nil {
			return nil, err
		}
		if err := c.Update(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return ca, nil
}

// lastCertificate is the last certificate of a PEM chain, PEM-encoded: the CA, after the leaf.
func lastCertificate(chain []byte) ([]byte, error) {
	var last *pem.Block
	for rest := chain; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		last = b
	}
	if last == nil {
		return nil, errors.New("the serving certificate chain holds no certificate")
	}
	return pem.EncodeToMemory(last), nil
}

// webhookConfigs are the webhook configurations envtest installed, of either kind.
func webhookConfigs(w *envtest.WebhookInstallOptions) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	add := func(kind, name string) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind(kind))
		u.SetName(name)
		out = append(out, u)
	}
	for _, h := range w.MutatingWebhooks {
		add("MutatingWebhookConfiguration", h.Name)
	}
	for _, h := range w.ValidatingWebhooks {
		add("ValidatingWebhookConfiguration", h.Name)
	}
	return out
}
