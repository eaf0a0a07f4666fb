package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcriptclient"
	. "github.com/baton-dev/baton/test/builders"
)

// transcriptClient calls the transcript API as the user of cfg: with its client certificate or
// token, as kubectl would. The API's certificate is self-signed here.
func transcriptClient(cfg *rest.Config) *http.Client {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.RootCAs, tlsConfig.InsecureSkipVerify = nil, true //nolint:gosec // a self-signed test server
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 30 * time.Second}
}

func transcriptURL(path string) string {
	return fmt.Sprintf("https://%s%s", transcriptAddr.Load(), path)
}

var _ = Describe("The transcript API", Ordered, func() {
	var ns string
	var run *v1alpha1.AgentRun
	var reader *rest.Config
	BeforeAll(func() {
		ns = newNamespace()
		cfg := MakeConfig("relay", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
			MakeAgent("b").Terminator().Script(Says("done")),
		).Obj()
		run = MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		run = waitForEnd(run)
		au, err := testEnv.AddUser(envtest.User{Name: "reader"}, nil)
		Expect(err).NotTo(HaveOccurred())
		reader = au.Config()
		Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "run-reader", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"agents.baton.dev"}, Resources: []string{"agentruns"}, Verbs: []string{"get"}}}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "run-reader", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "run-reader"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "reader"}}})).To(Succeed())
	})

	It("gives a run's records, in order, to whoever may get the run", func() {
		resp, err := transcriptClient(reader).Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/r/records", ns)))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		var page transcriptclient.Page
		Expect(json.NewDecoder(resp.Body).Decode(&page)).To(Succeed())
		Expect(page.UID).To(Equal(string(run.UID)))
		Expect(page.Records).To(HaveLen(2))
		Expect(page.Records[0].Step).To(BeEquivalentTo(1))
		Expect(string(page.Records[0].Body)).To(ContainSubstring(`"output":"to b"`))

		By("one step")
		resp2, err := transcriptClient(reader).Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/r/records?step=2", ns)))
		Expect(err).NotTo(HaveOccurred())
		defer resp2.Body.Close()
		Expect(json.NewDecoder(resp2.Body).Decode(&page)).To(Succeed())
		Expect(page.Records).To(HaveLen(1))
		Expect(string(page.Records[0].Body)).To(ContainSubstring(`"output":"done"`))
	})
})
