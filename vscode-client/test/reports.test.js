'use strict';
// lib.js's parts of the acceptance reports: the item as the server sent it, VS Code's accepted
// length, and the counts and health in the status bar.
const test = require('node:test');
const assert = require('node:assert');
const lib = require('../lib');

const command = { title: 'dLLM: completion accepted', command: 'dllm.accepted', arguments: [{ id: 'ab-1', languageId: 'python' }] };

test('wireItem keeps the text and the accept command, and refuses items without it', () => {
  const item = { insertText: 'x = 1', range: {}, command, filterText: 'x' };
  assert.deepStrictEqual(lib.wireItem(item), { insertText: 'x = 1', command });
  assert.strictEqual(lib.wireItem({ insertText: { value: 'y' }, command }).insertText, 'y');
  assert.strictEqual(lib.wireItem({ insertText: 'x' }), undefined);
  assert.strictEqual(lib.wireItem({ insertText: 'x', command: { command: 'other', arguments: [] } }), undefined);
  assert.strictEqual(lib.wireItem(undefined), undefined);
});

test('acceptedLength reads both forms VS Code passes', () => {
  assert.strictEqual(lib.acceptedLength(4), 4);
  assert.strictEqual(lib.acceptedLength({ kind: 1, acceptedLength: 7 }), 7);
  assert.strictEqual(lib.acceptedLength({ kind: 1 }), 0);
  assert.strictEqual(lib.acceptedLength(-2), 0);
  assert.strictEqual(lib.acceptedLength(undefined), 0);
});

const ready = {
  state: 'ready',
  model: 'builtin',
  device: 'cpu',
  requests: 4,
  model_calls: 4,
  stats: { enabled: true, total: { shown: 3, accepted: 1, partial: 1, acceptance_rate: 0.333, p50_ms: 412.4 } },
  health: { state: 'ok', reason: '4 recent requests' },
};

test('the status line and summary show the counts', () => {
  const line = lib.statusLine(ready);
  assert.strictEqual(line.text, '$(check) dLLM');
  assert.match(line.tooltip, / · 3 shown · 1 accepted \(33%\) · 1 partial · p50 412 ms$/);
  assert.match(lib.statusSummary(ready), /3 shown · 1 accepted \(33%\) · 1 partial/);
  const off = { ...ready, stats: { enabled: false, total: {} } };
  assert.match(lib.statusLine(off).tooltip, /counting off$/);
});

test('a slow or failing backend changes the icon and says why', () => {
  const slow = { ...ready, health: { state: 'slow', reason: 'median 2500 ms over 2000 ms' } };
  assert.strictEqual(lib.statusLine(slow).text, '$(watch) dLLM');
  assert.match(lib.statusLine(slow).tooltip, /slow: median 2500 ms over 2000 ms$/);
  const failing = { ...ready, health: { state: 'failing', reason: '3 of 4 failed' } };
  assert.strictEqual(lib.statusLine(failing).text, '$(warning) dLLM');
  assert.match(lib.statusSummary(failing), /failing: 3 of 4 failed/);
});
