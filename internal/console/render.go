package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/textbound"
)

// page is what every page shows around its content.
type page struct {
	Title string
	// Nav is the menu entry the page belongs to.
	Nav  string
	User string
	// Scope says where the console looks for runs.
	Scope string
	// Errors are the API server's answers that stopped part of the page, as it gave them.
	Errors []string
	// Notice says what the user's last action did.
	Notice string
	// Live is the URL of the events that say the page changed; empty, it does not.
	Live string
	// Form is what the user sent, shown again when it was refused, so nothing is lost.
	Form url.Values
	// Self is the page's own address, which live updates fetch; a page shown in answer to a
	// form has the address of the page, not of the form's target.
	Self string
}

func (s *Server) page(r *http.Request, title, nav string) page {
	scope := "all namespaces"
	if scopes := s.scopes.get(r.Context()); len(scopes) != 1 || scopes[0] != "" {
		scope = "namespace " + strings.Join(scopes, ", ")
		if len(scopes) > 1 {
			scope = "namespaces " + strings.Join(scopes, ", ")
		}
	}
	p := page{Title: title, Nav: nav, User: s.opts.User, Scope: scope, Notice: textbound.Line(r.URL.Query().Get("notice"), 300)}
	if r.Method == http.MethodGet {
		p.Self = r.URL.RequestURI()
	}
	return p
}

var funcs = template.FuncMap{
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("15:04:05")
	},
	"datetime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"stamp": stamp,
	"age":   func(t time.Time) string { return age(time.Since(t)) },
	"dur": func(d time.Duration) string {
		if d < 0 {
			return ""
		}
		if d < time.Second {
			return d.Round(time.Millisecond).String()
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"phaseClass": func(p v1alpha1.RunPhase) string { return "phase-" + strings.ToLower(string(p)) },
	"join":       strings.Join,
	"phase":      runview.Phase,
	"queue":      queueOf,
	"money":      money,
	"limits":     limitsText,
	"ms":         func(n int64) time.Duration { return time.Duration(n) * time.Millisecond },
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: an odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"f1": func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"runURL": func(namespace, name string) string {
		return "/runs/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	},
	"sessionURL": func(namespace, name string) string {
		return "/sessions/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	},
}

// stamp is a time exactly, as a gate's form carries the time the gate opened.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// age is a duration as kubectl prints ages.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// parsePages parses each page with the layout and the parts pages share.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" || base == "parts.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", name)
		if err != nil {
			return nil, err
		}
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages, nil
}

// render writes a page, rendered in full before anything is sent, so a template error is a
// plain 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}
