'use strict';
// The extension's pure parts: no `vscode` import, so `npm test` runs them under plain Node.

const fs = require('fs');
const path = require('path');

/** The document selector for the `dllm.languages` setting (python when empty or invalid). */
function documentSelector(languages) {
  const ids = Array.isArray(languages) && languages.length > 0 ? languages : ['python'];
  return ids.flatMap((language) => [
    { scheme: 'file', language },
    { scheme: 'untitled', language },
  ]);
}

/** A copy of the settings without the keys only the client reads. */
function withoutKeys(settings, keys) {
  const out = JSON.parse(JSON.stringify(settings || {}));
  for (const key of keys) {
    delete out[key];
  }
  return out;
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Where `command` resolves: an absolute or relative path as given, or the first match on PATH
 * (with PATHEXT on Windows). undefined when nothing executable is found.
 */
function findExecutable(command, env = process.env, platform = process.platform) {
  if (!command) {
    return undefined;
  }
  if (command.includes('/') || command.includes('\\')) {
    return isExecutable(command) ? command : undefined;
  }
  const exts = platform === 'win32' ? (env.PATHEXT || '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    for (const ext of exts) {
      const file = path.join(dir || '.', command + ext);
      if (isExecutable(file)) {
        return file;
      }
    }
  }
  return undefined;
}

/** The status bar text and tooltip for a `dllm/status` result (or an error string). */
function statusLine(status, error) {
  if (error) {
    return { text: '$(error) dLLM', tooltip: `dLLM: no status (${error})`, state: 'failed' };
  }
  const state = status && status.state;
  if (state === 'ready') {
    const tau = status.model_threshold == null ? '' : ` · τ ${status.model_threshold}`;
    return {
      text: '$(check) dLLM',
      tooltip: `dLLM ready: ${status.model} on ${status.device}${tau} · ${status.requests} requests`,
      state,
    };
  }
  if (state === 'failed') {
    return { text: '$(error) dLLM', tooltip: `dLLM: ${status.error || 'the model failed to load'}`, state };
  }
  return { text: '$(loading~spin) dLLM', tooltip: `dLLM: ${state || 'starting'}…`, state: state || 'starting' };
}

/** One line for the "Show Status" command. */
function statusSummary(status) {
  if (!status) {
    return 'dLLM: the server is not running';
  }
  const parts = [`dLLM: ${status.state}`, `${status.model} on ${status.device || '?'}`];
  if (status.model_threshold != null) {
    parts.push(`τ ${status.model_threshold}`);
  }
  parts.push(`${status.requests} requests`, `${status.model_calls} model calls`);
  if (status.error) {
    parts.push(status.error);
  }
  return parts.join(' · ');
}

module.exports = { documentSelector, withoutKeys, findExecutable, statusLine, statusSummary };
