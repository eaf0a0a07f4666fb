package e2e

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// helpFlags reads the manager's flags and their defaults from its --help, as a user sees them.
// A flag that prints no default has Go's zero value: false for a switch, "" for a string.
func helpFlags() map[string]string {
	out, _ := osexec.Command(os.Getenv("MANAGER_BIN"), "--help").CombinedOutput()
	flag := regexp.MustCompile(`^  -(\S+)(?: (\S+))?$`)
	dflt := regexp.MustCompile(`\(default ([^()]*)\)\s*$`)
	flags := map[string]string{}
	var name, kind, help string
	done := func() {
		if name == "" {
			return
		}
		switch m := dflt.FindStringSubmatch(strings.TrimSpace(help)); {
		case m != nil:
			flags[name] = m[1]
		case kind == "":
			flags[name] = "false"
		default:
			flags[name] = `""`
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if m := flag.FindStringSubmatch(line); m != nil {
			done()
			name, kind, help = m[1], m[2], ""
			continue
		}
		help += " " + strings.TrimSpace(line)
	}
	done()
	Expect(flags).To(HaveKey("max-steps-in-flight"), string(out))
	return flags
}

var _ = Describe("The operations guide", func() {
	It("lists every flag of the manager with the default the binary has", func() {
		doc := readFile(filepath.Join(root, "docs", "operations.md"))
		row := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| `([^`]*)` \\|")
		listed := map[string]string{}
		for _, m := range row.FindAllStringSubmatch(doc, -1) {
			listed[m[1]] = m[2]
		}
		want := map[string]string{}
		for name, value := range helpFlags() {
			if name != "kubeconfig" && !strings.HasPrefix(name, "zap-") { // named in the text below the table
				want[name] = value
			}
		}
		Expect(listed).To(Equal(want), "docs/operations.md's table of flags, against manager --help")
	})
})
