'use strict';
// Next edits: after the user edits, the server may propose the edit that follows (rename the
// other uses of a renamed name, ...), asked with `textDocument/copilotInlineEdit`. One is shown
// at a time:
// - on the cursor's line, inline: the replaced text struck through and the new text after it in
//   ghost styling, and a hint at the line's end; Tab applies it;
// - elsewhere, a marker in the gutter (and the overview ruler) at the edit's line, the change
//   previewed at its place, and a hint at the end of the cursor's line; Tab jumps there (the
//   edit is then on the cursor's line), Tab again applies it.
// Esc dismisses it; so does any other change of the document, or another editor. The server
// counts, per kind of suggestion, the edits shown (`textDocument/didShowInlineEdit` with the
// edit, sent once when it is drawn) and accepted (applying runs the edit's `command`,
// `dllm.nextEditAccepted` with the id the server issued).

const vscode = require('vscode');
const { ExecuteCommandRequest } = require('vscode-languageclient/node');
const { nextEditOf, previewText, onLines } = require('./lib');

const REQUEST = 'textDocument/copilotInlineEdit';
const DID_SHOW = 'textDocument/didShowInlineEdit';
const DID_FOCUS = 'textDocument/didFocus'; // Copilot's: the document in view
const VISIBLE = 'dllm.nextEditVisible';
const AT_CURSOR = 'dllm.nextEditAtCursor';
const TAB = 'dllm.nextEdit.tab';
const DISMISS = 'dllm.nextEdit.dismiss';
const DELAY_MS = 200; // after the last change; a newer change restarts the wait

class NextEdits {
  /**
   * @param {() => import('vscode-languageclient/node').LanguageClient | undefined} getClient
   * @param {vscode.ExtensionContext} context
   * @param {vscode.LogOutputChannel} log
   */
  constructor(getClient, context, log) {
    this.getClient = getClient;
    this.log = log;
    this.timer = undefined;
    this.pending = undefined; // the CancellationTokenSource of the request in flight
    this.shown = undefined; // {editor, document, version, range, text, command}
    const ghost = new vscode.ThemeColor('editorGhostText.foreground');
    this.types = {
      // the text the edit replaces
      old: vscode.window.createTextEditorDecorationType({
        textDecoration: 'line-through',
        backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
      }),
      // the new text, drawn after the replaced one: ghost text inline, an insertion elsewhere
      inline: vscode.window.createTextEditorDecorationType({
        after: { color: ghost, fontStyle: 'italic' },
      }),
      preview: vscode.window.createTextEditorDecorationType({
        after: {
          backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
          border: '1px solid',
          borderColor: new vscode.ThemeColor('editorGutter.addedBackground'),
        },
      }),
      marker: vscode.window.createTextEditorDecorationType({
        gutterIconPath: context.asAbsolutePath('media/next-edit.svg'),
        gutterIconSize: 'contain',
        overviewRulerColor: new vscode.ThemeColor('editorGutter.addedBackground'),
        overviewRulerLane: vscode.OverviewRulerLane.Right,
        isWholeLine: true,
        backgroundColor: new vscode.ThemeColor('diffEditor.insertedLineBackground'),
      }),
      hint: vscode.window.createTextEditorDecorationType({
        after: { color: ghost, margin: '0 0 0 2em' },
      }),
    };
    context.subscriptions.push(
      ...Object.values(this.types),
      vscode.commands.registerCommand(TAB, () => this.tab()),
      vscode.commands.registerCommand(DISMISS, () => this.dismiss()),
      vscode.workspace.onDidChangeTextDocument((event) => this.changed(event)),
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        this.cancel();
        this.dismiss();
        this.focused(editor);
      }),
      vscode.window.onDidChangeTextEditorSelection((event) => {
        if (this.shown && event.textEditor === this.shown.editor) {
          this.render();
        }
      }),
      { dispose: () => this.cancel() }
    );
  }

  /** Tells the server which document is in view (it reads recently viewed code for edits). */
  focused(editor) {
    const client = this.getClient();
    if (!editor || !client || !client.isRunning() || !this.enabled()) {
      return;
    }
    if (vscode.languages.match(client.clientOptions.documentSelector, editor.document) === 0) {
      return;
    }
    const uri = client.code2ProtocolConverter.asUri(editor.document.uri);
    client.sendNotification(DID_FOCUS, { textDocument: { uri } }).catch(() => undefined);
  }

  enabled() {
    return vscode.workspace.getConfiguration('dllm').get('nextEdits.enabled', true) !== false;
  }

  /** A change of a document's text (not of its dirty state alone): whatever was shown there
   * goes; an edit in the active editor asks again after DELAY_MS. */
  changed(event) {
    if (event.contentChanges.length === 0) {
      return;
    }
    if (this.shown && event.document === this.shown.document) {
      this.dismiss();
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor || event.document !== editor.document) {
      return;
    }
    this.cancel();
    if (!this.enabled()) {
      return;
    }
    this.timer = setTimeout(() => this.ask(editor), DELAY_MS);
  }

  cancel() {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending) {
      this.pending.cancel();
      this.pending.dispose();
      this.pending = undefined;
    }
  }

  async ask(editor) {
    const client = this.getClient();
    const document = editor.document;
    if (!client || !client.isRunning() || editor !== vscode.window.activeTextEditor) {
      return;
    }
    if (vscode.languages.match(client.clientOptions.documentSelector, document) === 0) {
      return;
    }
    const c2p = client.code2ProtocolConverter;
    const version = document.version;
    const params = {
      textDocument: { uri: c2p.asUri(document.uri), version },
      position: c2p.asPosition(editor.selection.active),
    };
    const source = new vscode.CancellationTokenSource();
    this.pending = source;
    let result;
    try {
      result = await client.sendRequest(REQUEST, params, source.token);
    } catch (error) {
      if (!source.token.isCancellationRequested) {
        this.log.warn(`${REQUEST}: ${error.message}`);
      }
      return;
    } finally {
      if (this.pending === source) {
        this.pending = undefined;
      }
      source.dispose();
    }
    const edit = nextEditOf(result, params.textDocument.uri, version);
    if (
      !edit ||
      source.token.isCancellationRequested ||
      document.version !== version ||
      editor !== vscode.window.activeTextEditor
    ) {
      return;
    }
    const range = document.validateRange(client.protocol2CodeConverter.asRange(edit.range));
    this.show({ editor, document, version, range, text: edit.text, command: edit.command });
    if (edit.command && client.isRunning()) {
      client.sendNotification(DID_SHOW, { item: edit.wire }).catch(() => undefined);
    }
  }

  show(suggestion) {
    this.shown = suggestion;
    vscode.commands.executeCommand('setContext', VISIBLE, true);
    this.render();
  }

  /** Draws the shown edit as the cursor's place asks: inline on its line, else a marker and a
   * preview at the edit's place and a hint at the cursor. */
  render() {
    const s = this.shown;
    if (!s) {
      return;
    }
    const { editor, range, text } = s;
    const cursor = editor.selection.active.line;
    const inline = onLines(cursor, range.start.line, range.end.line);
    vscode.commands.executeCommand('setContext', AT_CURSOR, inline);
    // Text drawn after a position: the new text after the replaced one, the hint after the
    // cursor's line.
    const after = (at, contentText) => [
      { range: new vscode.Range(at, at), renderOptions: { after: { contentText } } },
    ];
    const newText = previewText(text);
    const hint = inline
      ? '⇥ Tab: apply · Esc: dismiss'
      : `⇥ Tab: next edit at line ${range.start.line + 1}`;
    const lineEnd = editor.document.lineAt(cursor).range.end;
    const draw = {
      old: range.isEmpty ? [] : [range],
      inline: inline && newText ? after(range.end, newText) : [],
      preview: !inline && newText ? after(range.end, newText) : [],
      marker: inline ? [] : [new vscode.Range(range.start, range.start)],
      hint: after(lineEnd, hint),
    };
    for (const [name, ranges] of Object.entries(draw)) {
      editor.setDecorations(this.types[name], ranges);
    }
  }

  clear() {
    const s = this.shown;
    this.shown = undefined;
    vscode.commands.executeCommand('setContext', VISIBLE, false);
    vscode.commands.executeCommand('setContext', AT_CURSOR, false);
    if (s) {
      for (const type of Object.values(this.types)) {
        s.editor.setDecorations(type, []);
      }
    }
  }

  dismiss() {
    this.clear();
  }

  /** Tab: to the edit when it is elsewhere, else apply it. */
  async tab() {
    const s = this.shown;
    if (!s) {
      return;
    }
    if (s.document.version !== s.version || s.editor !== vscode.window.activeTextEditor) {
      this.dismiss();
      return;
    }
    if (!onLines(s.editor.selection.active.line, s.range.start.line, s.range.end.line)) {
      s.editor.selection = new vscode.Selection(s.range.start, s.range.start);
      s.editor.revealRange(s.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      this.render();
      return;
    }
    await this.apply(s);
  }

  async apply(s) {
    this.clear();
    const edit = new vscode.WorkspaceEdit();
    edit.replace(s.document.uri, s.range, s.text);
    if (!(await vscode.workspace.applyEdit(edit))) {
      this.log.warn('next edit: the editor refused the edit');
      return;
    }
    // After the new text, where typing goes on.
    const end = s.document.positionAt(s.document.offsetAt(s.range.start) + s.text.length);
    if (vscode.window.activeTextEditor === s.editor) {
      s.editor.selection = new vscode.Selection(end, end);
    }
    const client = this.getClient();
    if (s.command && client && client.isRunning()) {
      try {
        await client.sendRequest(ExecuteCommandRequest.type, {
          command: s.command.command,
          arguments: s.command.arguments,
        });
      } catch (error) {
        this.log.warn(`${s.command.command}: ${error.message}`);
      }
    }
  }
}

module.exports = { NextEdits };
