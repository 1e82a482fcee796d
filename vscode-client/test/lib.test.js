'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const lib = require('../lib');

test('documentSelector covers file and untitled per language, every language by default', () => {
  assert.deepStrictEqual(lib.documentSelector(['go']), [
    { scheme: 'file', language: 'go' },
    { scheme: 'untitled', language: 'go' },
  ]);
  assert.strictEqual(lib.documentSelector([])[0].language, '*');
  assert.strictEqual(lib.documentSelector('python').length, 2);
});

test('withoutKeys drops client-only keys and copies the rest', () => {
  const settings = { serverPath: '/x', decode: { policy: 'threshold' } };
  const out = lib.withoutKeys(settings, ['serverPath']);
  assert.deepStrictEqual(out, { decode: { policy: 'threshold' } });
  out.decode.policy = 'fixed';
  assert.strictEqual(settings.decode.policy, 'threshold');
});

test('findExecutable resolves PATH names and paths, and refuses the rest', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dllm-'));
  const exe = path.join(dir, 'dllm-infill-ls');
  fs.writeFileSync(exe, '#!/bin/sh\n');
  fs.chmodSync(exe, 0o755);
  const plain = path.join(dir, 'not-executable');
  fs.writeFileSync(plain, '');
  const env = { PATH: ['/nonexistent', dir].join(path.delimiter) };
  assert.strictEqual(lib.findExecutable('dllm-infill-ls', env, 'linux'), exe);
  assert.strictEqual(lib.findExecutable(exe, env, 'linux'), exe);
  assert.strictEqual(lib.findExecutable('not-executable', env, 'linux'), undefined);
  assert.strictEqual(lib.findExecutable(plain, env, 'linux'), undefined);
  assert.strictEqual(lib.findExecutable('missing', env, 'linux'), undefined);
  assert.strictEqual(lib.findExecutable(dir, env, 'linux'), undefined); // a directory
  assert.strictEqual(lib.findExecutable('', env, 'linux'), undefined);
});

test('statusLine shows loading, ready and failed', () => {
  assert.match(lib.statusLine({ state: 'loading' }).text, /loading~spin/);
  const ready = lib.statusLine({ state: 'ready', model: 'builtin', device: 'cpu', model_threshold: 0.5, requests: 3 });
  assert.strictEqual(ready.state, 'ready');
  assert.match(ready.tooltip, /builtin on cpu · τ 0.5 · 3 requests/);
  const failed = lib.statusLine({ state: 'failed', error: 'no such directory' });
  assert.strictEqual(failed.state, 'failed');
  assert.match(failed.tooltip, /no such directory/);
  assert.strictEqual(lib.statusLine(undefined, 'not running').state, 'failed');
});

test('statusSummary is one line', () => {
  const s = lib.statusSummary({ state: 'ready', model: 'builtin', device: 'cpu', model_threshold: 0.5, requests: 2, model_calls: 1 });
  assert.strictEqual(s, 'dLLM: ready · builtin on cpu · τ 0.5 · 2 requests · 1 model calls');
  assert.ok(!s.includes('\n'));
  assert.strictEqual(lib.statusSummary(undefined), 'dLLM: the server is not running');
});

test('package.json leaves decode.threshold to the model: default null, as the server', () => {
  // VS Code sends every dllm.* default in initializationOptions, so a number here would
  // override the τ the model directory recommends.
  const manifest = require('../package.json');
  const threshold = manifest.contributes.configuration.properties['dllm.decode.threshold'];
  assert.strictEqual(threshold.default, null);
  assert.deepStrictEqual(threshold.type, ['number', 'null']);
});
