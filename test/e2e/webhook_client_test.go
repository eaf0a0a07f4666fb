package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/internal/webhook"
)

// authority is a CA that signs serving and client certificates for a spec.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(name string) authority {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for a server on 127.0.0.1 or for a client; it returns the
// certificate and key in PEM.
func (a authority) issue(name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

var _ = Describe("The admission webhook with --webhook-client-ca-name", func() {
	It("answers only clients whose certificate the CA signed, as the API server's is", func() {
		ca, other := newAuthority("webhook-ca"), newAuthority("someone-else")
		dir := GinkgoT().TempDir()
		crt, key := ca.issue("webhook", x509.ExtKeyUsageServerAuth)
		Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "client-ca.crt"), ca.pem, 0o600)).To(Succeed())

		_, port, err := net.SplitHostPort(freeAddress())
		Expect(err).NotTo(HaveOccurred())
		proc := start("webhook-client-ca", os.Getenv("MANAGER_BIN"), "--webhook-only", "--health-probe-bind-address=0",
			"--kubeconfig", filepath.Join(stateDir, "kubeconfig-operator"),
			"--webhook-port="+port, "--webhook-cert-dir="+dir, "--webhook-client-ca-name=client-ca.crt")
		DeferCleanup(func() { _ = proc.Process.Signal(syscall.SIGTERM); _ = proc.Wait() })

		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.pem)
		review := func(certs ...tls.Certificate) (int, error) {
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}}
			body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"e2e","operation":"CREATE",` +
				`"kind":{"group":"agents.baton.dev","version":"v1alpha1","kind":"AgentRun"},` +
				`"resource":{"group":"agents.baton.dev","version":"v1alpha1","resource":"agentruns"},` +
				`"namespace":"default","userInfo":{"username":"mallory"},"object":{}}}`
			resp, err := c.Post("https://127.0.0.1:"+port+webhook.Path, "application/json", bytes.NewBufferString(body))
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode, nil
		}
		pair := func(a authority, name string) tls.Certificate {
			crt, key := a.issue(name, x509.ExtKeyUsageClientAuth)
			cert, err := tls.X509KeyPair(crt, key)
			Expect(err).NotTo(HaveOccurred())
			return cert
		}
		apiServer, stranger := pair(ca, "kube-apiserver"), pair(other, "kube-apiserver")

		Eventually(func() (int, error) { return review(apiServer) }, time.Minute, 200*time.Millisecond).
			Should(Equal(http.StatusOK), "the webhook answers a client with the CA's certificate")
		_, err = review()
		Expect(err).To(HaveOccurred(), "a client without a certificate is answered")
		_, err = review(stranger)
		Expect(err).To(HaveOccurred(), "a client with another CA's certificate is answered")
	})
})
