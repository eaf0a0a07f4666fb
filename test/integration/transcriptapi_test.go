package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	var reader, stranger *rest.Config
	BeforeAll(func() {
		ns = newNamespace()
		cfg := MakeConfig("relay", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
			MakeAgent("b").Terminator().Script(Says("done")),
		).Obj()
		run = MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		run = waitForEnd(run)
		for _, u := range []string{"reader", "stranger"} {
			au, err := testEnv.AddUser(envtest.User{Name: u}, nil)
			Expect(err).NotTo(HaveOccurred())
			if u == "reader" {
				reader = au.Config()
			} else {
				stranger = au.Config()
			}
		}
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

	It("refuses whoever may not get the run, and anyone unauthenticated, as the API server would", func() {
		resp, err := transcriptClient(stranger).Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/r/records", ns)))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
		Expect(string(body)).To(ContainSubstring(`User \"stranger\" cannot get resource \"agentruns\" in API group \"agents.baton.dev\" in the namespace \"` + ns + `\"`))

		anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test server
		resp, err = anonymous.Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/r/records", ns)))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

		By("a bad bearer token")
		req, _ := http.NewRequest(http.MethodGet, transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/r/records", ns)), nil)
		req.Header.Set("Authorization", "Bearer not-a-token")
		resp, err = anonymous.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

		By("a run that does not exist, to someone who may get it")
		resp, err = transcriptClient(reader).Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/nope/records", ns)))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	})

	It("streams the records as events, resumes after Last-Event-ID, and ends with the run", func() {
		events := func(lastID string) []string {
			req, _ := http.NewRequest(http.MethodGet, transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/r/stream", ns)), nil)
			if lastID != "" {
				req.Header.Set("Last-Event-ID", lastID)
			}
			resp, err := transcriptClient(reader).Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
			var out []string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if line := sc.Text(); strings.HasPrefix(line, "id: ") || strings.HasPrefix(line, "event: ") {
					out = append(out, line)
				}
			}
			return out
		}
		all := events("")
		Expect(all).To(HaveLen(5))
		Expect(all[0]).To(HavePrefix("id: "))
		Expect(all[1]).To(Equal("event: record"))
		Expect(all[4]).To(Equal("event: end"))
		first := strings.TrimPrefix(all[0], "id: ")
		Expect(events(first)).To(Equal(all[2:]))
	})

	It("ends a stream once its caller may no longer read the run, though the run waits on", func() {
		waiting := MakeRun("waiting", ns).Config("gated").Obj()
		create(MakeConfig("gated", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
			MakeAgent("b").Terminator().Script(Says("done")),
		).Gate("check", "a", 1).Obj(), waiting)
		waitForGate(waiting, "check", 1)
		au, err := testEnv.AddUser(envtest.User{Name: "watcher"}, nil)
		Expect(err).NotTo(HaveOccurred())
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "watcher", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "run-reader"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "watcher"}}}
		create(binding)

		c := transcriptClient(au.Config())
		c.Timeout = 0
		var resp *http.Response
		Eventually(func() int {
			resp, err = c.Get(transcriptURL(fmt.Sprintf("/v1/namespaces/%s/agentruns/waiting/stream", ns)))
			Expect(err).NotTo(HaveOccurred())
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
			}
			return resp.StatusCode
		}).Should(Equal(http.StatusOK), "the API server's authorizer knows the new binding")
		defer resp.Body.Close()
		lines := make(chan string, 100)
		go func() {
			defer GinkgoRecover()
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		Eventually(lines).Should(Receive(Equal("event: record")), "the stream sends the run's step")

		Expect(k8sClient.Delete(ctx, binding)).To(Succeed())
		var rest []string
		Eventually(func() bool {
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						return true
					}
					rest = append(rest, l)
				default:
					return false
				}
			}
		}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "the stream ends")
		Expect(rest).To(ContainElement("event: error"))
		Expect(rest).To(ContainElement(ContainSubstring(`access ended (403)`)))
		Expect(get(waiting).Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval), "the run waits on")
	})
})
