package controllers

import "github.com/baton-dev/baton/api/v1alpha1"

// scripted reports whether the agent plays a script: it is sent no messages and reads no
// context.
func scripted(a *v1alpha1.Agent) bool {
	return a.Model.Provider == v1alpha1.ProviderScripted || a.Model.Provider == ""
}
