package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// argoHealth runs one of config/argocd's health checks on an object the way Argo CD runs a
// resource customization: gopher-lua with only the package, base and table libraries open, the
// object as the global obj, a one-second limit, and the status and message of the table the
// script returns.
func argoHealth(u *unstructured.Unstructured, script string) (status, message string) {
	code, err := os.ReadFile(filepath.Join("..", "..", "config", "argocd", script))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		l.Push(l.NewFunction(open))
		l.Push(lua.LString(name))
		l.Call(1, 0)
	}
	limit, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(limit)
	l.SetGlobal("obj", toLua(l, u.Object))
	ExpectWithOffset(1, l.DoString(string(code))).To(Succeed(), "%s on %s", script, u.GetName())
	hs, ok := l.Get(-1).(*lua.LTable)
	ExpectWithOffset(1, ok).To(BeTrue(), "%s returned no table", script)
	return lua.LVAsString(hs.RawGetString("status")), lua.LVAsString(hs.RawGetString("message"))
}

// toLua converts a decoded JSON value into Lua values, as Argo CD hands objects to its checks.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for i, e := range v {
			t.RawSetInt(i+1, toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	ginkgo.Fail(fmt.Sprintf("no Lua value for %T", v))
	return lua.LNil
}
