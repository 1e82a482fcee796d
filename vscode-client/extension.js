'use strict';
// VS Code client for dllm-infill-ls. Inline completion, code actions, work-done progress and
// workspace/applyEdit are handled by vscode-languageclient itself; this file starts the server,
// keeps its settings in sync and gives the server's commands their editor arguments. Next edits
// (textDocument/copilotInlineEdit) are asked for and shown by nextEdit.js.

const vscode = require('vscode');
const { LanguageClient, DidChangeConfigurationNotification } = require('vscode-languageclient/node');
const { documentSelector, withoutKeys, findExecutable, statusLine, statusSummary } = require('./lib');
const { reportInlineEvents } = require('./reports');
const { NextEdits } = require('./nextEdit');

const SECTION = 'dllm';
const FILL = 'dllm.fillFunctionBody';
const REFACTOR = 'dllm.refactorSelection';
const REFINE = 'dllm.refineSelection';
const SNOOZE = 'dllm.snooze';
const SHOW_STATUS = 'dllm.showStatus';
// Settings that the client itself uses: the process to start and the document selector.
const RESTART_ON = ['dllm.serverPath', 'dllm.languages'];
// Settings that only the client reads; the server reports keys it does not know.
const CLIENT_ONLY = ['serverPath'];

let client; // LanguageClient | undefined
let outputChannel; // one channel for every (re)start of the server
let restarting = Promise.resolve(); // restarts run one after another
let statusItem; // the status bar item: loading, ready or failed; a click shows the status
let polling; // the timer that asks the server for dllm/status
let pollRound = 0; // bumped to stop a polling loop, including a tick already in flight
// Clients that a restart is replacing. Their settings notifications are dropped: sent while the
// restart stops the client, one fails ("Starting server failed") and languageclient shows that
// as an error; the new client gets the settings at its start anyway.
const retired = new WeakSet();

/** The `dllm` settings as a plain nested object, e.g. {decode: {policy: 'threshold'}}. */
function currentSettings() {
  return JSON.parse(JSON.stringify(vscode.workspace.getConfiguration().get(SECTION) || {}));
}

/** What the server is sent, as initializationOptions and in didChangeConfiguration. */
function serverSettings() {
  return withoutKeys(currentSettings(), CLIENT_ONLY);
}

function createClient() {
  const settings = currentSettings();
  let self; // this client, for the middleware
  // stdio is the default transport. Setting `transport: TransportKind.stdio` explicitly would
  // make vscode-languageclient append a `--stdio` argument (accepted, and the same thing).
  const serverOptions = { command: settings.serverPath || 'dllm-infill-ls' };
  const clientOptions = {
    documentSelector: documentSelector(settings.languages),
    // Sends {settings: {dllm: ...}} after initialize and on every change under `dllm`.
    synchronize: { configurationSection: SECTION },
    initializationOptions: serverSettings, // evaluated at each start
    outputChannel,
    middleware: {
      executeCommand: (command, args, next) => withEditorArguments(self, command, args, next),
      workspace: {
        // The default would send the whole section, serverPath included.
        didChangeConfiguration: async () => {
          if (retired.has(self) || !self.isRunning()) {
            return;
          }
          try {
            await self.sendNotification(DidChangeConfigurationNotification.type, {
              settings: { [SECTION]: serverSettings() },
            });
          } catch (error) {
            if (!retired.has(self) && self.isRunning()) {
              throw error;
            }
          }
        },
      },
    },
  };
  self = new LanguageClient('dllm-infill', 'dLLM Infill', serverOptions, clientOptions);
  reportInlineEvents(self); // shown and partly accepted items, for the server's counts
  return self;
}

/**
 * vscode-languageclient registers every command the server advertises in
 * executeCommandProvider, so dllm.* commands are not registered here (a second registration
 * of the same id fails). Invoked from the palette or a keybinding they arrive without
 * arguments; this middleware fills them in from the active editor. Calls that already carry
 * arguments (the server's code actions) pass through unchanged. The server applies the result
 * itself with workspace/applyEdit and reports failures with window/showMessage.
 */
async function withEditorArguments(c, command, args, next) {
  if (command === SNOOZE) {
    return args.length > 0 ? next(command, args) : snoozeMinutes(command, next);
  }
  const known = command === FILL || command === REFACTOR || command === REFINE;
  if (!known || (args.length > 0 && typeof args[0] === 'string')) {
    return next(command, args);
  }
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    vscode.window.showWarningMessage('dLLM: open a file first.');
    return undefined;
  }
  const document = editor.document;
  if (vscode.languages.match(c.clientOptions.documentSelector, document) === 0) {
    vscode.window.showWarningMessage(`dLLM: "${document.languageId}" is not in dllm.languages.`);
    return undefined;
  }
  const c2p = c.code2ProtocolConverter;
  const uri = c2p.asUri(document.uri);
  if (command === FILL) {
    return next(command, [uri, c2p.asPosition(editor.selection.active)]);
  }
  if (editor.selection.isEmpty) {
    vscode.window.showInformationMessage('dLLM: select the code first.');
    return undefined;
  }
  const commandArgs = [uri, c2p.asRange(editor.selection)];
  if (command === REFACTOR) {
    const instruction = await vscode.window.showInputBox({
      title: 'dLLM: Regenerate selection',
      prompt: 'Optional instruction; leave empty to regenerate without one',
      ignoreFocusOut: true,
    });
    if (instruction === undefined) {
      return undefined; // Escape cancels
    }
    if (instruction.trim() !== '') {
      commandArgs.push(instruction.trim());
    }
  }
  return next(command, commandArgs);
}

/**
 * dLLM: Snooze suggestions from the palette: asks for minutes (15 by default, 0 wakes them up).
 * The server keeps the snooze and says so with window/showMessage.
 */
async function snoozeMinutes(command, next) {
  const answer = await vscode.window.showInputBox({
    title: 'dLLM: Snooze suggestions',
    prompt: 'Minutes without automatic suggestions (0 turns them back on)',
    value: '15',
    ignoreFocusOut: true,
    validateInput: (text) =>
      /^\s*\d+(\.\d+)?\s*$/.test(text) && Number(text) <= 1440
        ? undefined
        : 'a number of minutes, 0 to 1440',
  });
  if (answer === undefined) {
    return undefined; // Escape cancels
  }
  return next(command, [Number(answer)]);
}

/** Stops a client that got as far as running; stop() throws in any other state. */
function stopClient(c) {
  return c && c.isRunning() ? c.stop() : Promise.resolve();
}

async function restart() {
  const old = client;
  client = undefined;
  await stopClient(old).catch(() => undefined);
  await start();
}

/** Start the server, or say plainly why it cannot start and how to fix it. */
async function start() {
  stopPolling();
  const command = currentSettings().serverPath || 'dllm-infill-ls';
  if (!findExecutable(command)) {
    showStatus(undefined, `"${command}" not found`);
    const choice = await vscode.window.showErrorMessage(
      `dLLM: the language server "${command}" was not found or is not executable. ` +
        'Install it (make setup in the repository creates .venv/bin/dllm-infill-ls) and set ' +
        'dllm.serverPath to its absolute path.',
      'Open Settings'
    );
    if (choice === 'Open Settings') {
      vscode.commands.executeCommand('workbench.action.openSettings', 'dllm.serverPath');
    }
    return;
  }
  client = createClient();
  showStatus({ state: 'starting' });
  try {
    await client.start();
  } catch (error) {
    showStatus(undefined, error.message);
    vscode.window.showErrorMessage(
      `dLLM: could not start "${command}" (${error.message}). ` +
        'Set dllm.serverPath to the dllm-infill-ls executable.'
    );
    return;
  }
  poll();
}

function showStatus(status, error) {
  const line = statusLine(status, error);
  statusItem.text = line.text;
  statusItem.tooltip = line.tooltip;
  statusItem.backgroundColor =
    line.state === 'failed'
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : line.health === 'slow' || line.health === 'failing'
        ? new vscode.ThemeColor('statusBarItem.warningBackground')
        : undefined;
  statusItem.show();
}

async function fetchStatus() {
  if (!client || !client.isRunning()) {
    return undefined;
  }
  return client.sendRequest('dllm/status', {});
}

function stopPolling() {
  pollRound += 1;
  clearTimeout(polling);
}

/** Ask for dllm/status every second while the model loads, then every 15 s. */
function poll() {
  stopPolling();
  const round = pollRound;
  const tick = async () => {
    let status;
    let error;
    try {
      status = await fetchStatus();
    } catch (e) {
      error = e.message;
    }
    if (round !== pollRound) {
      return; // a restart stopped this loop while the request was out
    }
    showStatus(status, error || (status ? undefined : 'the server is not running'));
    const settled = status && (status.state === 'ready' || status.state === 'failed');
    polling = setTimeout(tick, settled ? 15000 : 1000);
  };
  tick();
}

async function showStatusCommand() {
  let status;
  try {
    status = await fetchStatus();
  } catch (error) {
    status = undefined;
  }
  const choice = await vscode.window.showInformationMessage(statusSummary(status), 'Open Log');
  if (choice === 'Open Log') {
    outputChannel.show(true);
  }
}

async function activate(context) {
  // vscode-languageclient 10 logs through a LogOutputChannel (error/info/onDidChangeLogLevel);
  // a plain channel makes the client fail to start.
  outputChannel = vscode.window.createOutputChannel('dLLM Infill', { log: true });
  context.subscriptions.push(outputChannel);
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  statusItem.command = SHOW_STATUS;
  statusItem.name = 'dLLM Infill';
  context.subscriptions.push(statusItem);
  context.subscriptions.push(vscode.commands.registerCommand(SHOW_STATUS, showStatusCommand));
  context.subscriptions.push({ dispose: stopPolling });
  // Asks the running client for the edit after each of the user's edits (nextEdit.js).
  new NextEdits(() => client, context, outputChannel);
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_ON.some((key) => event.affectsConfiguration(key))) {
        // This listener was registered before any client's own, so it runs first: the running
        // client sends no more settings from here on.
        if (client) {
          retired.add(client);
        }
        restarting = restarting.then(restart).catch((error) => {
          vscode.window.showErrorMessage(`dLLM: restarting the server failed: ${error.message}`);
        });
      }
    })
  );
  await start();
}

function deactivate() {
  stopPolling();
  const old = client;
  client = undefined;
  return stopClient(old);
}

module.exports = { activate, deactivate };
