// The stock agent: an A2A agent, written with the A2A JavaScript SDK, that the order-desk team
// (order-desk.yaml) calls as one of its members. It answers how many units of a SKU a
// warehouse holds; when the question names no warehouse, it asks which (input-required) and
// the reply continues the same task. It streams its progress, and speaks A2A 1.0 and 0.3.
//
//   npm ci && PORT=9310 node stock-agent.mjs
//
// Its stock is a fixed table, so that the sample runs the same everywhere.
import express from 'express';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';

const PORT = Number(process.env.PORT || 9310);
const BASE = process.env.A2A_URL || `http://127.0.0.1:${PORT}`;

const STOCK = {
  'SKU-123': { berlin: 42, lyon: 0 },
  'SKU-456': { berlin: 3, lyon: 17 },
};

const card = {
  name: 'stock',
  description: 'Says how many units of a SKU a warehouse (berlin or lyon) holds',
  version: '1.0.0',
  supportedInterfaces: duplicateInterfacesForLegacy(
    [{ url: `${BASE}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }], ['JSONRPC']),
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{
    id: 'stock-level', name: 'Stock level', description: 'Units of a SKU in a warehouse',
    tags: ['inventory'], examples: ['How many SKU-123 does berlin hold?'], inputModes: [], outputModes: [], securityRequirements: [],
  }],
  documentationUrl: '',
  signatures: [],
};

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const now = () => new Date().toISOString();
const say = (taskId, contextId, words) => ({
  role: Role.ROLE_AGENT, messageId: crypto.randomUUID(), parts: [text(words)], taskId, contextId,
  extensions: [], metadata: {}, referenceTaskIds: [],
});
const status = (taskId, contextId, state, message) =>
  AgentEvent.statusUpdate({ taskId, contextId, status: { state, timestamp: now(), message }, metadata: {} });

// textOf is the text of a message's parts.
const textOf = (message) => message.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');

const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    // The first event is the task, on a new task and on a reply alike: a reply's is at work
    // again, no longer asking.
    bus.publish(AgentEvent.task(ctx.task
      ? { ...ctx.task, status: { state: TaskState.TASK_STATE_WORKING, timestamp: now(), message: undefined } }
      : { id: taskId, contextId, artifacts: [], history: [userMessage], metadata: {},
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined } }));
    // A reply continues the question of the task's first message.
    const question = ctx.task ? textOf(ctx.task.history[0]) : textOf(userMessage);
    const sku = (question.match(/SKU-\d+/) || [])[0];
    const said = `${question}\n${ctx.task ? textOf(userMessage) : ''}`.toLowerCase();
    const warehouse = ['berlin', 'lyon'].find((w) => said.includes(w));
    if (!sku || !STOCK[sku]) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_REJECTED, say(taskId, contextId, `I know no such SKU; I know ${Object.keys(STOCK).join(', ')}.`)));
      bus.finished();
      return;
    }
    if (!warehouse) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, say(taskId, contextId, 'Which warehouse: berlin or lyon?')));
      bus.finished();
      return;
    }
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, say(taskId, contextId, `counting ${sku} in ${warehouse}`)));
    const units = STOCK[sku][warehouse];
    bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: crypto.randomUUID(), name: 'stock', description: '', metadata: undefined, extensions: [],
        parts: [text(`${sku}: ${units} units in ${warehouse}.`)] },
    }));
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.publish(status(taskId, '', TaskState.TASK_STATE_CANCELED));
    bus.finished();
  },
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: true } }));
app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
app.listen(PORT, '127.0.0.1', () => console.log(`stock agent ready at ${BASE}`));
