// Package image checks the manager's container image without a container engine. It reads the
// Dockerfile and the .dockerignore, lays out in a temporary directory exactly the files the
// builder stage's COPY lines would copy from the build context, runs the builder's RUN commands
// there as `docker build` would, and requires the file the final stage copies to come out of
// it. It also checks what the final stage is: distroless static, run as a non-root user.
package image

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

var root = filepath.Join("..", "..")

func TestTheImageBuildsFromWhatTheDockerfileCopies(t *testing.T) {
	dockerfile := read(t, filepath.Join(root, "Dockerfile"))
	ignore := read(t, filepath.Join(root, ".dockerignore"))
	stages, err := parseDockerfile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.image, "gcr.io/distroless/static") || !strings.HasSuffix(final.image, ":nonroot") {
		t.Errorf("the final image is built on %s, not gcr.io/distroless/static:nonroot", final.image)
	}
	if user := final.last("USER"); user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
		t.Errorf("the final image runs as %q, not as a non-root user", user)
	}
	checkGoVersion(t, stages)

	built, err := buildStages(t.TempDir(), root, stages, ignore)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s", strings.Join(built, ", "))
}

// The check must catch what broke the image once: a Dockerfile that copied the manager's main, api/,
// agents/ and controllers/ only, beside a .dockerignore that let nothing else in.
func TestAnImageMissingPackagesDoesNotBuild(t *testing.T) {
	stages, err := parseDockerfile(read(t, filepath.Join("testdata", "four-packages.Dockerfile")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = buildStages(t.TempDir(), root, stages, read(t, filepath.Join("testdata", "four-packages.dockerignore")))
	if err == nil {
		t.Fatal("a Dockerfile that copies four of the manager's packages builds")
	}
	if !strings.Contains(err.Error(), "github.com/baton-dev/baton/internal/telemetry") {
		t.Errorf("the build fails, but not for want of the telemetry package:\n%v", err)
	}
	t.Logf("the build fails as it should:\n%v", err)
}

// What the build context holds after .dockerignore, in the cases its patterns rely on.
func TestBuildContextFollowsDockerignore(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"main.go", "README.md", "go.mod",
		"api/types.go", "api/types_test.go",
		"controllers/run.go", "controllers/deep/er/run_test.go", "controllers/testdata/a.yaml",
		"docs/x.md", "bin/manager", ".git/HEAD",
	} {
		write(t, filepath.Join(dir, f), "")
	}
	for _, c := range []struct {
		name, ignore string
		want         []string
	}{
		{"nothing ignored", "", []string{
			".git/HEAD", "README.md", "api/types.go", "api/types_test.go", "bin/manager", "controllers/deep/er/run_test.go",
			"controllers/run.go", "controllers/testdata/a.yaml", "docs/x.md", "go.mod", "main.go"}},
		{"directories, ** at any depth and root-anchored globs", ".git\nbin\ndocs\n*.md\n**/*_test.go\n**/testdata\n",
			[]string{"api/types.go", "controllers/run.go", "go.mod", "main.go"}},
		{"everything but what ! lets back in, then ** takes some out again", "*\n!go.mod\n!main.go\n!api/\n!controllers/\ncontrollers/**/*_test.go\n",
			[]string{"api/types.go", "api/types_test.go", "controllers/run.go", "controllers/testdata/a.yaml", "go.mod", "main.go"}},
		{"a later ! wins over an earlier exclusion", "**/*.md\n!docs/x.md\n",
			[]string{".git/HEAD", "api/types.go", "api/types_test.go", "bin/manager", "controllers/deep/er/run_test.go",
				"controllers/run.go", "controllers/testdata/a.yaml", "docs/x.md", "go.mod", "main.go"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			files, err := buildContext(dir, c.ignore)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(sorted(files), " "); got != strings.Join(c.want, " ") {
				t.Errorf("context:\n got %s\nwant %s", got, strings.Join(c.want, " "))
			}
		})
	}
}

// checkGoVersion: the builder image's Go must be at least what go.mod asks for, since the
// golang image does not download a newer toolchain (GOTOOLCHAIN=local).
func checkGoVersion(t *testing.T, stages []stage) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(read(t, filepath.Join(root, "go.mod")))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	for _, s := range stages {
		tag := regexp.MustCompile(`^golang:(\d+)\.(\d+)`).FindStringSubmatch(s.image)
		if tag == nil {
			continue
		}
		if minor(tag[1], tag[2]) < minor(m[1], m[2]) {
			t.Errorf("stage %s builds with %s, and go.mod needs Go %s.%s", s.name, s.image, m[1], m[2])
		}
	}
}

func minor(major, minor string) int {
	a, _ := strconv.Atoi(major)
	b, _ := strconv.Atoi(minor)
	return a*1000 + b
}

// stage is one FROM of a Dockerfile and the instructions under it.
type stage struct {
	image, name  string
	instructions []instruction
}

type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// last is the arguments of the stage's last instruction cmd, or "".
func (s stage) last(cmd string) string {
	out := ""
	for _, in := range s.instructions {
		if in.cmd == cmd {
			out = in.args
		}
	}
	return out
}

// parseDockerfile reads instructions as Docker does: a trailing backslash continues a line,
// lines starting with # are comments, also inside a continued line.
func parseDockerfile(text string) ([]stage, error) {
	var stages []stage
	var global []instruction // ARGs before the first FROM
	var cur strings.Builder
	start := 0
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		trimmed := strings.TrimSpace(raw)
		if strings.HasPrefix(trimmed, "#") || trimmed == "" && cur.Len() == 0 {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		cur.Reset()
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			s := stage{image: f[0], name: strconv.Itoa(len(stages))}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			s.instructions = append(s.instructions, global...)
			stages = append(stages, s)
		case len(stages) == 0 && in.cmd == "ARG":
			global = append(global, in)
		case len(stages) == 0:
			return nil, fmt.Errorf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		default:
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
		}
	}
	if len(stages) == 0 {
		return nil, errors.New("the Dockerfile has no FROM")
	}
	return stages, nil
}

// buildStages runs the stages the final one copies from, each in a directory of its own under
// dir standing for its filesystem, and checks that what the final stage copies from them is
// there. It returns what was copied.
func buildStages(dir, contextDir string, stages []stage, ignore string) ([]string, error) {
	context, err := buildContext(contextDir, ignore)
	if err != nil {
		return nil, err
	}
	final := stages[len(stages)-1]
	var built []string
	for _, in := range final.instructions {
		if in.cmd != "COPY" {
			continue
		}
		flags, srcs, _ := splitCopy(in.args)
		from := flags["from"]
		if from == "" {
			continue
		}
		var s *stage
		for i := range stages {
			if stages[i].name == from {
				s = &stages[i]
			}
		}
		if s == nil {
			return nil, fmt.Errorf("Dockerfile:%d: no stage %s", in.line, from)
		}
		fsRoot := filepath.Join(dir, s.name)
		if _, err := os.Stat(fsRoot); errors.Is(err, fs.ErrNotExist) {
			if err := runStage(fsRoot, contextDir, context, *s); err != nil {
				return nil, err
			}
		}
		for _, src := range srcs {
			info, err := os.Stat(filepath.Join(fsRoot, filepath.FromSlash(src)))
			if err != nil {
				return nil, fmt.Errorf("Dockerfile:%d: stage %s did not make %s: %w", in.line, from, src, err)
			}
			if info.Mode().IsRegular() && info.Mode()&0o111 == 0 {
				return nil, fmt.Errorf("Dockerfile:%d: %s from stage %s is not executable", in.line, src, from)
			}
			built = append(built, fmt.Sprintf("%s (%d bytes) in stage %s", src, info.Size(), from))
		}
	}
	if len(built) == 0 {
		return nil, errors.New("the final stage copies nothing from a build stage")
	}
	return built, nil
}

// runStage lays out a stage's filesystem under fsRoot and runs its RUN commands in it, with
// the stage's ARGs (BuildKit's TARGETOS and TARGETARCH for this machine's architecture) and
// ENVs, and none of this machine's Go settings but its caches and proxy.
func runStage(fsRoot, contextDir string, context map[string]bool, s stage) error {
	args := map[string]string{"TARGETOS": "linux", "TARGETARCH": runtime.GOARCH, "TARGETPLATFORM": "linux/" + runtime.GOARCH}
	env := map[string]string{}
	workdir := "/"
	for _, in := range s.instructions {
		switch in.cmd {
		case "ARG":
			name, value, ok := strings.Cut(in.args, "=")
			if !ok {
				value = args[name]
			}
			env[name] = value
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("Dockerfile:%d: ENV %s: this check reads only ENV key=value", in.line, in.args)
				}
				env[k] = strings.Trim(v, `"`)
			}
		case "WORKDIR":
			workdir = path.Join(workdir, in.args)
			if path.IsAbs(in.args) {
				workdir = path.Clean(in.args)
			}
			if err := os.MkdirAll(filepath.Join(fsRoot, workdir), 0o755); err != nil {
				return err
			}
		case "COPY":
			if err := copyFromContext(fsRoot, workdir, contextDir, context, in); err != nil {
				return err
			}
		case "RUN":
			if strings.HasPrefix(in.args, "[") {
				return fmt.Errorf("Dockerfile:%d: this check runs only the shell form of RUN", in.line)
			}
			cmd := exec.Command("/bin/sh", "-c", in.args)
			cmd.Dir = filepath.Join(fsRoot, workdir)
			cmd.Env = goEnv(env)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("Dockerfile:%d: RUN %s: %w\n%s", in.line, in.args, err, out.String())
			}
		default:
			return fmt.Errorf("Dockerfile:%d: stage %s has %s, which this check does not know how to run", in.line, s.name, in.cmd)
		}
	}
	return nil
}

// goEnv is the environment of a RUN: the stage's ARGs and ENVs, the golang image's
// GOTOOLCHAIN=local, and of this machine's only what finds go and the module and build caches.
func goEnv(stageEnv map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "GOPATH", "GOCACHE", "GOMODCACHE", "GOPROXY", "GONOSUMDB", "GOPRIVATE", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK=off")
	for k, v := range stageEnv {
		env = append(env, k+"="+v)
	}
	return env
}

// splitCopy splits COPY's arguments into its --flags, its sources and its destination.
func splitCopy(args string) (flags map[string]string, srcs []string, dest string) {
	flags = map[string]string{}
	f := strings.Fields(args)
	for len(f) > 0 && strings.HasPrefix(f[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
		flags[k] = v
		f = f[1:]
	}
	if len(f) < 2 {
		return flags, nil, ""
	}
	return flags, f[:len(f)-1], f[len(f)-1]
}

// copyFromContext does a COPY from the build context as Docker does: a directory's content
// goes into the destination directory; files go into it when it ends with / or there are
// several sources, and to it otherwise. A source with nothing in the context fails, as it does
// in `docker build`.
func copyFromContext(fsRoot, workdir, contextDir string, context map[string]bool, in instruction) error {
	flags, srcs, dest := splitCopy(in.args)
	if flags["from"] != "" || dest == "" || strings.HasPrefix(srcs[0], "[") || strings.Contains(in.args, "$") {
		return fmt.Errorf("Dockerfile:%d: this check copies only COPY <src>... <dest> from the context", in.line)
	}
	intoDir := strings.HasSuffix(dest, "/") || len(srcs) > 1
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	for _, src := range srcs {
		src = strings.TrimPrefix(path.Clean("/"+src), "/")
		if src == "" {
			src = "."
		}
		matches, err := filepath.Glob(filepath.Join(contextDir, filepath.FromSlash(src)))
		if err != nil {
			return fmt.Errorf("Dockerfile:%d: %w", in.line, err)
		}
		copied := 0
		for _, m := range matches {
			rel, err := filepath.Rel(contextDir, m)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			for _, f := range sorted(context) {
				var to string
				switch {
				case f == rel && intoDir:
					to = path.Join(dest, path.Base(f))
				case f == rel:
					to = dest
				case rel == ".":
					to = path.Join(dest, f)
				case strings.HasPrefix(f, rel+"/"):
					to = path.Join(dest, strings.TrimPrefix(f, rel+"/"))
				default:
					continue
				}
				if err := copyFile(filepath.Join(contextDir, filepath.FromSlash(f)), filepath.Join(fsRoot, filepath.FromSlash(to))); err != nil {
					return err
				}
				copied++
			}
		}
		if copied == 0 {
			return fmt.Errorf("Dockerfile:%d: COPY %s: not found in the build context (after .dockerignore)", in.line, src)
		}
	}
	return nil
}

// buildContext is what `docker build` sends as its context: the files under dir that the
// .dockerignore patterns leave in, as slash paths relative to dir. The patterns are read and
// matched by moby/patternmatcher, which BuildKit and the Docker CLI use.
func buildContext(dir, dockerignore string) (map[string]bool, error) {
	patterns, err := ignorefile.ReadAll(strings.NewReader(dockerignore))
	if err != nil {
		return nil, err
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, err
	}
	files := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		excluded, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && excluded && !pm.Exclusions():
			// Nothing under it can be let back in.
			return filepath.SkipDir
		case !d.IsDir() && !excluded:
			files[rel] = true
		}
		return nil
	})
	return files, err
}

func copyFile(from, to string) error {
	info, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, info.Mode().Perm())
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
