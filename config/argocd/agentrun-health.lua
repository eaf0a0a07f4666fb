-- Argo CD health check of an AgentRun (agents.baton.dev/v1alpha1).
-- Running and Pending runs are Progressing, runs waiting for a person are Suspended, a run that
-- succeeded is Healthy, one that failed or was cancelled is Degraded.
local hs = {status = "Progressing", message = "Waiting for the operator to pick the run up"}
if obj.status == nil then
  return hs
end
local st = obj.status
if obj.metadata.generation ~= nil and st.observedGeneration ~= nil and st.observedGeneration < obj.metadata.generation then
  hs.message = "Waiting for the operator to see the latest spec"
  return hs
end
local phase = st.phase or "Pending"
local reason = st.terminationReason or ""
local message = st.terminationMessage or ""
if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = reason .. ": " .. message
elseif phase == "Failed" or phase == "Cancelled" then
  hs.status = "Degraded"
  hs.message = reason .. ": " .. message
elseif phase == "AwaitingApproval" then
  hs.status = "Suspended"
  local gate = ""
  if st.pendingApproval ~= nil and st.pendingApproval.gate ~= nil then
    gate = st.pendingApproval.gate
  end
  hs.message = "Waiting for approval at gate " .. gate
elseif phase == "AwaitingInput" then
  hs.status = "Suspended"
  hs.message = "Waiting for a reply (kubectl annotate agentrun " .. obj.metadata.name .. " agents.baton.dev/reply=...)"
elseif phase == "Running" then
  hs.message = "Step " .. tostring(st.stepCount or 0) .. ", agent " .. (st.currentAgent or "")
else
  hs.message = phase
  if st.conditions ~= nil then
    for _, c in ipairs(st.conditions) do
      if c.type == "Progressing" and c.message ~= nil then
        hs.message = phase .. ": " .. c.message
      end
    end
  end
end
return hs
