package main

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
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
	for _, hook := range w.MutatingWebhooks {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: hook.Name}, cfg); err != nil {
			return nil, err
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
		}
		if err := c.Update(ctx, cfg); err != nil {
			return nil, err
		}
	}
	for _, hook := range w.ValidatingWebhooks {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: hook.Name}, cfg); err != nil {
			return nil, err
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
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
