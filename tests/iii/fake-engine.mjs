// A small stand-in for the iii engine (0.22/0.23 worker protocol, as described in
// ../../docs/iii.md and the protocol notes it cites): it accepts workers on `/`, routes
// invocations between them by function id, forwards trigger bindings to the provider of
// their trigger type (parking them while there is none), answers a few engine::*
// functions, and records everything the tests assert on. Like the engine, it drops
// frames it cannot decode (invalid JSON, unknown type, missing field, non-UUID
// invocation id) and never answers them. It keeps no state across close(): a restart is
// close() and a new startFakeEngine() on the same port.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { WebSocketServer } from 'ws';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// Required fields per message type (the engine's serde enum: missing ones fail decoding).
const REQUIRED = {
  registerfunction: ['id'],
  unregisterfunction: ['id'],
  registertriggertype: ['id', 'description'],
  registertrigger: ['id', 'trigger_type', 'function_id', 'config'],
  unregistertrigger: ['id'],
  triggerregistrationresult: ['id', 'trigger_type', 'function_id'],
  invokefunction: ['function_id', 'data'],
  invocationresult: ['invocation_id', 'function_id'],
  registerservice: ['id'],
  ping: [],
  pong: [],
  reattach: ['previous_worker_id'],
};

export async function startFakeEngine({ port = 0, host = '127.0.0.1' } = {}) {
  const wss = new WebSocketServer({ port, host, perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  const engine = new EventEmitter();
  engine.setMaxListeners(100);
  engine.port = wss.address().port;
  engine.url = `ws://${host}:${engine.port}`;
  engine.workers = new Map(); // worker_id -> {id, ws, info, closed, closeCode, received[]}
  engine.functions = new Map(); // function id -> {workerId, message}
  engine.triggerTypes = new Map(); // trigger type id -> {workerId, message}
  engine.triggers = new Map(); // binding id -> {ownerId, message, results[]}
  engine.dropped = []; // {workerId, reason, text}
  const pending = new Map(); // invocation_id -> {callerId, calleeId, functionId, silent}

  const changed = () => engine.emit('change');
  const send = (w, msg) => {
    if (w && !w.closed && w.ws.readyState === w.ws.OPEN) w.ws.send(JSON.stringify(msg));
  };
  engine.send = (workerId, msg) => send(engine.workers.get(workerId), msg);
  engine.workerNamed = (prefix) =>
    [...engine.workers.values()].find((w) => !w.closed && w.info?.name?.startsWith(prefix));

  // Waits until predicate() is truthy (checked on every change and every 50 ms).
  engine.waitFor = (predicate, timeoutMs = 10000, what = 'condition') =>
    new Promise((resolve, reject) => {
      let timer, poll;
      const check = () => {
        let v;
        try {
          v = predicate();
        } catch (e) {
          return finish(e);
        }
        if (v) finish(null, v);
      };
      const finish = (err, v) => {
        clearTimeout(timer);
        clearInterval(poll);
        engine.off('change', check);
        err ? reject(err) : resolve(v);
      };
      timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), timeoutMs);
      poll = setInterval(check, 50);
      engine.on('change', check);
      check();
    });

  const forwardBinding = (binding) => {
    const provider = engine.triggerTypes.get(binding.message.trigger_type);
    if (!provider) return; // parked until a provider registers the type
    const { type, ...rest } = binding.message;
    send(engine.workers.get(provider.workerId), { type: 'registertrigger', ...rest });
  };

  const builtin = {
    'engine::workers::register': (w, data) => {
      w.info = data;
      return { success: true };
    },
    'engine::functions::list': (_w, data) => ({
      functions: [...engine.functions.entries()]
        .filter(([, f]) => data?.include_internal || !f.message.metadata?.internal)
        .map(([id, f]) => ({
          function_id: id,
          namespace: 'default',
          worker_name: engine.workers.get(f.workerId)?.info?.name ?? '',
          description: f.message.description,
          metadata: f.message.metadata,
        })),
    }),
    'engine::functions::info': (_w, data) => {
      const detail = (id) => {
        const f = engine.functions.get(id);
        if (!f) return null;
        return {
          function_id: id,
          namespace: 'default',
          worker_name: engine.workers.get(f.workerId)?.info?.name ?? '',
          description: f.message.description,
          request_schema: f.message.request_format,
          response_schema: f.message.response_format,
          metadata: f.message.metadata,
          registered_triggers: [],
        };
      };
      if (Array.isArray(data?.function_ids))
        return { functions: data.function_ids.map(detail).filter(Boolean) };
      return detail(data?.function_id);
    },
    'engine::registered-triggers::list': (_w, data) => ({
      triggers: [...engine.triggers.entries()]
        .filter(([, t]) => !data?.trigger_type || t.message.trigger_type === data.trigger_type)
        .map(([id, t]) => ({ id, ...t.message })),
    }),
    'engine::health::check': () => ({ status: 'ok', version: 'fake-0.22' }),
  };

  const onInvoke = (w, msg) => {
    const silent = msg.action?.type === 'void' || msg.invocation_id == null;
    const reply = (body) => {
      if (!silent)
        send(w, { type: 'invocationresult', invocation_id: msg.invocation_id, function_id: msg.function_id, ...body });
    };
    if (builtin[msg.function_id]) {
      reply({ result: builtin[msg.function_id](w, msg.data) });
      return;
    }
    const fn = engine.functions.get(msg.function_id);
    const callee = fn && engine.workers.get(fn.workerId);
    if (!callee || callee.closed) {
      reply({
        error: { code: 'function_not_found', message: `Function ${msg.function_id} not found in namespace default.` },
      });
      return;
    }
    const invocationId = msg.invocation_id ?? randomUUID();
    pending.set(invocationId, { callerId: w.id, calleeId: callee.id, functionId: msg.function_id, silent });
    const data =
      msg.data && typeof msg.data === 'object' && !Array.isArray(msg.data)
        ? { ...msg.data, _caller_worker_id: w.id }
        : msg.data;
    const forwarded = { type: 'invokefunction', invocation_id: invocationId, function_id: msg.function_id, data };
    for (const k of ['traceparent', 'baggage', 'metadata']) if (msg[k] !== undefined) forwarded[k] = msg[k];
    send(callee, forwarded);
  };

  const handlers = {
    registerfunction: (w, m) => engine.functions.set(m.id, { workerId: w.id, message: m }),
    unregisterfunction: (w, m) => {
      if (engine.functions.get(m.id)?.workerId === w.id) engine.functions.delete(m.id);
    },
    registertriggertype: (w, m) => {
      engine.triggerTypes.set(m.id, { workerId: w.id, message: m });
      for (const b of engine.triggers.values()) if (b.message.trigger_type === m.id) forwardBinding(b);
    },
    registertrigger: (w, m) => {
      const b = { ownerId: w.id, message: m, results: [] };
      engine.triggers.set(m.id, b);
      forwardBinding(b);
    },
    unregistertrigger: (w, m) => {
      const b = engine.triggers.get(m.id);
      if (!b) return;
      engine.triggers.delete(m.id);
      const provider = engine.triggerTypes.get(b.message.trigger_type);
      if (provider)
        send(engine.workers.get(provider.workerId), {
          type: 'unregistertrigger',
          id: m.id,
          trigger_type: b.message.trigger_type,
        });
    },
    triggerregistrationresult: (_w, m) => {
      const b = engine.triggers.get(m.id);
      if (!b) return;
      b.results.push(m);
      if (m.error) send(engine.workers.get(b.ownerId), m);
    },
    invokefunction: onInvoke,
    invocationresult: (w, m) => {
      const p = pending.get(m.invocation_id);
      if (!p || p.calleeId !== w.id) return;
      pending.delete(m.invocation_id);
      if (p.silent) return;
      const { type, ...rest } = m;
      send(engine.workers.get(p.callerId), { type: 'invocationresult', ...rest });
    },
    ping: (w) => send(w, { type: 'pong' }),
    pong: () => {},
    registerservice: () => {},
    reattach: () => {},
  };

  const cleanup = (w) => {
    for (const [id, f] of engine.functions) if (f.workerId === w.id) engine.functions.delete(id);
    for (const [id, t] of engine.triggerTypes) if (t.workerId === w.id) engine.triggerTypes.delete(id);
    for (const [id, b] of engine.triggers) {
      if (b.ownerId !== w.id) continue;
      engine.triggers.delete(id);
      const provider = engine.triggerTypes.get(b.message.trigger_type);
      if (provider)
        send(engine.workers.get(provider.workerId), { type: 'unregistertrigger', id, trigger_type: b.message.trigger_type });
    }
    for (const [id, p] of pending) {
      if (p.calleeId === w.id) {
        pending.delete(id);
        if (!p.silent)
          send(engine.workers.get(p.callerId), {
            type: 'invocationresult',
            invocation_id: id,
            function_id: p.functionId,
            error: { code: 'invocation_stopped', message: 'the worker serving the call went away' },
          });
      } else if (p.callerId === w.id) {
        pending.delete(id);
      }
    }
  };

  wss.on('connection', (ws, req) => {
    if (req.url.startsWith('/otel')) {
      ws.on('message', () => {});
      return;
    }
    const w = {
      id: randomUUID(),
      ws,
      info: null,
      closed: false,
      closeCode: null,
      closeReason: null,
      received: [],
      requestHeaders: req.headers,
    };
    engine.workers.set(w.id, w);
    send(w, { type: 'workerregistered', worker_id: w.id, reattach_token: randomUUID() });
    ws.on('message', (raw, isBinary) => {
      const text = raw.toString();
      if (!isBinary && text.trim() === '') return;
      let m;
      try {
        m = JSON.parse(text);
      } catch {
        engine.dropped.push({ workerId: w.id, reason: 'json', text });
        return changed();
      }
      const required = REQUIRED[m?.type];
      const missing = required?.find((k) => m[k] === undefined);
      const badId =
        (m?.type === 'invokefunction' && m.invocation_id != null && !UUID.test(m.invocation_id)) ||
        (m?.type === 'invocationresult' && !UUID.test(String(m.invocation_id)));
      if (!required || missing || badId) {
        engine.dropped.push({ workerId: w.id, reason: !required ? 'type' : missing ? `missing ${missing}` : 'uuid', text });
        return changed();
      }
      w.received.push(m);
      handlers[m.type](w, m);
      changed();
    });
    ws.on('close', (code, reason) => {
      w.closed = true;
      w.closeCode = code;
      w.closeReason = reason.toString();
      cleanup(w);
      changed();
    });
    ws.on('error', () => {});
    changed();
  });

  // Stops like a killed engine: every socket is cut without a close handshake.
  engine.close = async () => {
    for (const c of wss.clients) c.terminate();
    await new Promise((resolve) => wss.close(resolve));
    engine.removeAllListeners();
  };
  return engine;
}
