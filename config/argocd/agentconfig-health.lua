-- Argo CD health check of an AgentConfig (agents.baton.dev/v1alpha1).
-- Healthy when runs can start with it, Degraded when they cannot, Progressing until the
-- operator has checked its latest spec.
local hs = {status = "Progressing", message = "Waiting for the operator to check the config"}
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.metadata.generation ~= nil and (obj.status.observedGeneration or 0) < obj.metadata.generation then
  return hs
end
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then
    if c.status == "True" then
      hs.status = "Healthy"
    else
      hs.status = "Degraded"
    end
    hs.message = c.message or ""
  end
end
return hs
