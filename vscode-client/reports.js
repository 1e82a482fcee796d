'use strict';
// Tells dllm-infill-ls what the user did with its inline completions, so that the server can
// count acceptance per language (on this machine only: the server sends nothing anywhere).
// Accepting an item whole runs the item's own command (`dllm.accepted`), which VS Code does by
// itself. That an item was shown, and that a word or line of it was accepted, VS Code tells a
// provider through handleDidShowCompletionItem and handleDidPartiallyAcceptCompletionItem, part
// of the `inlineCompletionsAdditions` API proposal: where VS Code lets the extension use it
// (`--enable-proposed-api dllm-infill.dllm-infill`), the language client's provider is
// registered again with those two handlers, which send `textDocument/didShowCompletion` and
// `textDocument/didPartiallyAcceptCompletion`; elsewhere the provider stays as it was and only
// acceptances are counted.

const vscode = require('vscode');
const { wireItem, acceptedLength } = require('./lib');

const INLINE = 'textDocument/inlineCompletion';

/** Adds the show and partial-accept reports to `client`'s inline completion provider. */
function reportInlineEvents(client) {
  const feature = client.getFeature(INLINE);
  if (!feature || typeof feature.registerLanguageProvider !== 'function') {
    return;
  }
  const register = feature.registerLanguageProvider.bind(feature);
  feature.registerLanguageProvider = (options, id) => {
    const [plain, provider] = register(options, id);
    const shown = new WeakSet();
    const taken = new WeakMap(); // item → the longest accepted length reported
    const send = (method, params) => {
      if (client.isRunning()) {
        client.sendNotification(method, params).catch(() => undefined);
      }
    };
    provider.handleDidShowCompletionItem = (item) => {
      const wire = wireItem(item);
      if (wire && !shown.has(item)) {
        shown.add(item);
        send('textDocument/didShowCompletion', { item: wire });
      }
    };
    // VS Code 1.100 calls it twice per accept: with the length, then with {kind, acceptedLength}.
    provider.handleDidPartiallyAcceptCompletionItem = (item, info) => {
      const wire = wireItem(item);
      const length = acceptedLength(info);
      if (wire && length > (taken.get(item) || 0)) {
        taken.set(item, length);
        send('textDocument/didPartiallyAcceptCompletion', { item: wire, acceptedLength: length });
      }
    };
    let reporting;
    try {
      const selector = client.protocol2CodeConverter.asDocumentSelector(options.documentSelector);
      reporting = vscode.languages.registerInlineCompletionItemProvider(selector, provider);
    } catch {
      // The proposal is not enabled for this extension: completions as before, unreported.
      delete provider.handleDidShowCompletionItem;
      delete provider.handleDidPartiallyAcceptCompletionItem;
      return [plain, provider];
    }
    plain.dispose();
    return [reporting, provider];
  };
}

module.exports = { reportInlineEvents };
