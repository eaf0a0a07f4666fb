// An A2A agent written as the A2A JavaScript SDK's examples write one: a reply's events start
// with the task as it was (still asking for input), then the reply's own. It asks once, then
// answers with what it was told.
import express from 'express';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const PORT = Number(process.env.PORT);
const BASE = `http://127.0.0.1:${PORT}`;
const card = {
  name: 'asks-again', description: 'asks once', version: '1.0.0',
  supportedInterfaces: [{ url: `${BASE}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'ask', name: 'Ask', description: 'asks once', tags: [], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  documentationUrl: '', signatures: [],
};
const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const now = () => new Date().toISOString();
const status = (taskId, contextId, state, words) => AgentEvent.statusUpdate({ taskId, contextId, metadata: {},
  status: { state, timestamp: now(), message: words && { role: Role.ROLE_AGENT, messageId: crypto.randomUUID(), parts: [text(words)],
    taskId, contextId, extensions: [], metadata: {}, referenceTaskIds: [] } } });
const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    bus.publish(AgentEvent.task(ctx.task ?? { id: taskId, contextId, artifacts: [], history: [userMessage], metadata: {},
      status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined } }));
    if (!ctx.task) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, 'Which region?'));
      bus.finished();
      return;
    }
    const said = userMessage.parts.map((p) => p.content.value).join('');
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, 'reading'));
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: crypto.randomUUID(), name: 'answer', description: '', metadata: undefined, extensions: [], parts: [text(`logs of ${said}`)] } }));
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  },
  async cancelTask() {},
};
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(PORT, '127.0.0.1', () => console.log(`ready at ${BASE}`));
