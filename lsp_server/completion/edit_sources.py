"""The next-edit sources beside structure (next_edit.py): the dLLM's rewrite of the region
around the cursor, and a hosted next-edit API. Each is a `Source`: an async function of an
`EditAsk` and the settings, answering a list of candidates, empty when it has nothing or may
not run.

* `ModelSource`: the model in process (infill_engine/edits/rewrite.py, through the backend)
  rewrites the region around the cursor with the recent edits in its prompt. It runs where
  `nextEdits.model` says, and by default only where the model's fills may be shown unasked
  (decide.trusted: not the builtin model) and the model knows the document's language
  (languages.py). An engine elsewhere cannot rewrite: nothing.
* `HostedSource`: `nextEdits.hostedAddress` (`mercury+https://…`, engines/hosted_edit.py), one
  client per address, its key from the variable `engineApiKeyEnv` names; a new address closes
  the old client.
"""

from __future__ import annotations

from collections.abc import Callable

from infill_engine.edits.suggestion import Suggestion

from ..engines.backend import Backend, NotReady, Superseded
from ..engines.hosted_edit import HostedEdits, edit_key, parse_edit_address
from ..options import Options
from .inline import model_knows, model_trusted
from .next_edit import EditAsk


class ModelSource:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @staticmethod
    def wanted(ask: EditAsk, options: Options) -> bool:
        """Whether the model's rewrite may be asked for in this document."""
        setting = options.next_edits.model
        if setting is False or (setting is None and not model_trusted(options)):
            return False
        return model_knows(options, ask.language_id)

    async def __call__(self, ask: EditAsk, options: Options) -> list[Suggestion]:
        if not self.wanted(ask, options) or not self.backend.rewrites:
            return []
        try:
            found = await self.backend.rewrite(ask.text, ask.offset, ask.edits, ask.language_id)
        except (NotReady, Superseded, ValueError):  # not loaded, elsewhere, overtaken, too long
            return []
        return [found] if found is not None else []


class HostedSource:
    def __init__(self, tell: Callable[[str], None] | None = None) -> None:
        self.tell = tell
        self.client: HostedEdits | None = None

    def _for(self, address: str, options: Options) -> HostedEdits:
        if self.client is None or self.client.address != parse_edit_address(address):
            self.close()
            key_env = options.engine.key_env
            self.client = HostedEdits(
                address, edit_key(None, key_env), tell=self.tell, key_source=f"${key_env}"
            )
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    async def __call__(self, ask: EditAsk, options: Options) -> list[Suggestion]:
        address = options.next_edits.hosted_address
        if not address:
            self.close()
            return []
        viewed = [(e.uri, e.text) for e in ask.viewed]
        return await self._for(address, options).suggest(
            ask.uri, ask.language_id, ask.text, ask.offset, ask.edits, viewed
        )
