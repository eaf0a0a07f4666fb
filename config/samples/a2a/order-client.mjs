// An A2A client, written with the A2A JavaScript SDK, that calls the order-desk team (a Baton
// team served as an A2A agent, order-desk.yaml) as it would call any A2A agent. Each command
// prints what came back as JSON lines: {kind, id, contextId, state, text}.
//
//   export A2A_TOKEN=$(kubectl create token order-clerk --audience agents.baton.dev)   # a caller who may create agentruns
//   export NODE_EXTRA_CA_CERTS=baton-ca.crt                         # the operator's serving CA
//   AGENT=https://baton.example:8444/namespaces/default/agentconfigs/order-desk
//   node order-client.mjs $AGENT send "Can order ORD-7 (3 x SKU-123) ship today?"
//   node order-client.mjs $AGENT reply <task> <context> berlin
//   node order-client.mjs $AGENT continue <context> "And ORD-8?"   # the next turn of the context's session
//   node order-client.mjs $AGENT stream "Can order ORD-7 (3 x SKU-123) ship today?"
//   node order-client.mjs $AGENT get|cancel|resubscribe <task>
//
// --v0.3 (before the agent's URL) speaks A2A 0.3 rather than 1.0; --now (likewise) asks a
// send or reply to answer at once rather than when the task ends or asks for input.
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const args = process.argv.slice(2);
const flag = (name) => (args[0] === name ? (args.shift(), true) : false);
const legacy = flag('--v0.3');
const now = flag('--now');
const [agent, command, ...rest] = args;

// Every request carries the caller's Kubernetes token, as kubectl would.
const token = process.env.A2A_TOKEN;
const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } });
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  cardResolver: resolver,
  transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
}));
// The card is at .well-known/agent-card.json under the agent's URL, which resolves as a folder.
const card = await resolver.resolve(agent.replace(/\/?$/, '/'));
card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === (legacy ? '0.3' : '1.0'));
const client = await factory.createFromAgentCard(card);

const textOf = (parts = []) => parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');
const print = (o) => console.log(JSON.stringify(o));
const task = (t) => print({ kind: 'task', id: t.id, contextId: t.contextId, state: TaskState[t.status.state],
  text: textOf(t.status.message?.parts) || textOf(t.artifacts?.flatMap((a) => a.parts)) });
const event = (ev) => {
  const { $case, value } = ev.payload;
  if ($case === 'task') return task(value);
  if ($case === 'statusUpdate') return print({ kind: 'status', id: value.taskId, contextId: value.contextId, state: TaskState[value.status.state], text: textOf(value.status.message?.parts) });
  if ($case === 'artifactUpdate') return print({ kind: 'artifact', id: value.taskId, contextId: value.contextId, text: textOf(value.artifact.parts) });
  return print({ kind: 'message', text: textOf(value.parts) });
};
const message = (text, taskId = '', contextId = '') => ({
  message: { messageId: crypto.randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }],
    taskId, contextId, extensions: [], metadata: {}, referenceTaskIds: [] },
  configuration: now ? { returnImmediately: true, acceptedOutputModes: [] } : undefined,
});

try {
  switch (command) {
    case 'send': task(await client.sendMessage(message(rest[0]))); break;
    case 'reply': task(await client.sendMessage(message(rest[2], rest[0], rest[1]))); break;
    case 'continue': task(await client.sendMessage(message(rest[1], '', rest[0]))); break;
    case 'stream': for await (const ev of client.sendMessageStream(message(rest[0]))) event(ev); break;
    case 'stream-reply': for await (const ev of client.sendMessageStream(message(rest[2], rest[0], rest[1]))) event(ev); break;
    case 'get': task(await client.getTask({ id: rest[0], tenant: '' })); break;
    case 'cancel': task(await client.cancelTask({ id: rest[0], tenant: '', metadata: {} })); break;
    case 'resubscribe': for await (const ev of client.resubscribeTask({ id: rest[0], tenant: '' })) event(ev); break;
    default: throw new Error(`unknown command ${command}: send, reply, continue, stream, stream-reply, get, cancel or resubscribe`);
  }
} catch (e) {
  print({ kind: 'error', error: e.constructor.name, text: e.message });
  process.exitCode = 1;
}
