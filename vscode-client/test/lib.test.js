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

test('nextEditOf takes the one edit for the document and version asked about', () => {
  const uri = 'file:///w/area.py';
  const range = { start: { line: 1, character: 11 }, end: { line: 1, character: 12 } };
  const command = { title: 'Accept', command: 'dllm.nextEditAccepted', arguments: ['a-1'] };
  const wire = { range, text: 'width', textDocument: { uri, version: 7 }, command };
  const edit = lib.nextEditOf({ edits: [wire] }, uri, 7);
  assert.deepStrictEqual(edit.range, range);
  assert.strictEqual(edit.text, 'width');
  assert.deepStrictEqual(edit.command.arguments, ['a-1']);
  assert.strictEqual(edit.wire, wire);
  // none, another version or document, a bad shape: nothing
  assert.strictEqual(lib.nextEditOf({ edits: [] }, uri, 7), undefined);
  assert.strictEqual(lib.nextEditOf(null, uri, 7), undefined);
  assert.strictEqual(lib.nextEditOf({ edits: [wire] }, uri, 8), undefined);
  assert.strictEqual(lib.nextEditOf({ edits: [wire] }, 'file:///w/other.py', 7), undefined);
  const backwards = { start: range.end, end: range.start };
  assert.strictEqual(lib.nextEditOf({ edits: [{ ...wire, range: backwards }] }, uri, 7), undefined);
  const negative = { start: { line: -1, character: 0 }, end: range.end };
  assert.strictEqual(lib.nextEditOf({ edits: [{ ...wire, range: negative }] }, uri, 7), undefined);
  assert.strictEqual(lib.nextEditOf({ edits: [{ ...wire, text: 3 }] }, uri, 7), undefined);
  // a command of the wrong shape is dropped, the edit kept
  const odd = lib.nextEditOf({ edits: [{ ...wire, command: { command: 5 } }] }, uri, 7);
  assert.strictEqual(odd.command, undefined);
});

test('previewText keeps an edit on one bounded line', () => {
  assert.strictEqual(lib.previewText('width'), 'width');
  assert.strictEqual(lib.previewText('a\n\tb\r\nc'), 'a⏎    b⏎c');
  const long = lib.previewText('x'.repeat(500));
  assert.strictEqual(long.length, 120);
  assert.ok(long.endsWith('…'));
});

test('onLines: an edit on the cursor line or across it', () => {
  assert.ok(lib.onLines(2, 2, 2));
  assert.ok(lib.onLines(3, 2, 4));
  assert.ok(!lib.onLines(1, 2, 2));
  assert.ok(!lib.onLines(5, 2, 4));
});

test('nextEditParts counts next edits per kind, and nothing before the first', () => {
  assert.deepStrictEqual(lib.nextEditParts({}), []);
  assert.deepStrictEqual(lib.nextEditParts({ next_edits: { asked: 3, kinds: {} } }), []);
  const kinds = {
    shape: { suggested: 1, shown: 1, accepted: 0 },
    rename: { suggested: 2, shown: 2, accepted: 1 },
    twin: { suggested: 0, shown: 0, accepted: 0 },
  };
  const line = 'next edits: 3 shown, 1 accepted (rename 1/2, shape 0/1)';
  assert.deepStrictEqual(lib.nextEditParts({ next_edits: { kinds } }), [line]);
  assert.deepStrictEqual(lib.nextEditParts({ stats: { next_edits: { kinds } } }), [line]);
  // in the status line, after the inline completions' counts
  const status = { state: 'ready', stats: { total: { shown: 1, accepted: 0 } }, next_edits: { kinds } };
  assert.ok(lib.statsParts(status).indexOf(line) > 0);
});
