"""A model by name: `ORG/NAME[@REVISION]` -> a snapshot directory in the Hugging Face cache.

This module owns the Hub: which files of a repository the loader reads, what is refused before
anything is downloaded, where the cache is, what offline means, and how progress is reported.
Which texts are Hub names, and the checks of a name and its revision, are model_names.py's.

- Only what the loader reads is downloaded: config.json, generation_config.json, the safetensors
  weights (model.safetensors, or model.safetensors.index.json and exactly the shards its
  weight_map names) and the tokenizer files. No `*.py` file is ever fetched, so no repository
  code can run; pickle weights (`*.bin`, `*.pt`, ...) are never fetched either.
- A repository whose weights are pickle only, or that holds code and no weights, is refused
  from its file listing, before any download. `check` (the loader's family test) runs on
  config.json before the weights download, so an unsupported model costs one small file.
- Files land in the standard cache (`HF_HUB_CACHE`, else `HF_HOME/hub`) through
  `huggingface_hub`, which writes each file to a temporary name and links it into the snapshot
  only when complete: an interrupted run leaves no corrupt file, and the next run fetches only
  what is missing (a dropped connection inside one file resumes with an HTTP range).
- A disk that refuses a write (full, over quota, past a file-size limit) is one line: how much
  the model takes and how much of it is not cached yet (sizes from the Hub's listing), where
  (HF_HOME or HF_HUB_CACHE) and how much is free there; the next run fetches the rest.
- `HF_HUB_OFFLINE=1`, or a Hub that cannot be reached: a complete cached snapshot is used; an
  uncached (or partly downloaded) one fails at once, saying what to run.
- `HF_ENDPOINT` names the Hub (tests run a stand-in on loopback). These are read at each call,
  not at import, so a process may change them.

Nothing here imports torch: the language server resolves (and downloads) before it loads.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .model_names import HubError, HubName

CONFIG_FILES = ("config.json", "generation_config.json")
CARD = "README.md"  # the model card: which languages the model knows (languages.py)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",  # sentencepiece: a protobuf, read as data
    "chat_template.jinja",
)
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# A write that the disk (or a quota, or a file-size limit) refuses.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
CODE_SUFFIXES = (".py",)

Progress = Callable[[str], None]  # one line, e.g. "org/name: 1.2 of 4.5 GB (27%)"


def cache_dir() -> Path:
    """The Hub cache this process uses: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def offline() -> bool:
    from huggingface_hub import constants

    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return constants.HF_HUB_OFFLINE or any(
        (v or "").strip().upper() in ("1", "ON", "YES", "TRUE") for v in flags
    )


def fetch(
    name: HubName,
    progress: Progress | None = None,
    check: Callable[[dict[str, Any]], object] | None = None,
) -> Path:
    """The snapshot directory of `name`, downloading what the loader reads if needed."""
    info = _model_info(name)
    if isinstance(info, str):
        return cached(name, info)
    files = {s.rfilename for s in info.siblings or ()}
    weights = _weights_plan(name, files)
    return _download(name, files, weights, progress, check)


def fetch_config(name: HubName) -> dict[str, Any]:
    """config.json of `name` alone (the memory check reads nothing else), from the cache when
    offline."""
    info = _model_info(name)
    if isinstance(info, str):
        return _read_json(str(cached(name, info) / "config.json"), name)
    from huggingface_hub import hf_hub_download

    if "config.json" not in {s.rfilename for s in info.siblings or ()}:
        raise HubError(f"model {name}: the repository has no config.json")
    with _library_errors(name, ["config.json"]):
        file = hf_hub_download(
            name.repo, "config.json", revision=name.revision, cache_dir=str(cache_dir()),
            endpoint=endpoint(),
        )  # fmt: skip
    return _read_json(file, name)


def _model_info(name: HubName) -> Any:
    """The Hub's model info for `name`, or a string saying why the Hub cannot be asked
    (offline, unreachable, failing); a HubError for a name the Hub does not know."""
    if offline():
        return "HF_HUB_OFFLINE is set"
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return HfApi(endpoint=endpoint()).model_info(name.repo, revision=name.revision)
    except RevisionNotFoundError:
        raise HubError(f"model {name}: {name.repo} has no revision {name.revision!r}") from None
    except GatedRepoError:
        raise HubError(
            f"model {name.repo} is gated: accept its terms on its Hub page, then log in "
            "(hf auth login)"
        ) from None
    except RepositoryNotFoundError:
        raise HubError(
            f"model {name.repo}: no such model on the Hub ({endpoint()}); check the name, "
            "or log in (hf auth login) if it is private"
        ) from None
    except HfHubHTTPError as e:
        if e.response is not None and e.response.status_code < 500:
            raise HubError(f"model {name}: the Hub refused ({_first_line(e)})") from None
        return f"the Hub at {endpoint()} failed ({_first_line(e)})"
    except Exception as e:  # no network, refused, timed out: httpx's errors or OSError
        if not (isinstance(e, OSError) or _is_http(e)):
            raise
        return f"the Hub at {endpoint()} cannot be reached ({_first_line(e)})"


def _weights_plan(name: HubName, files: set[str]) -> str:
    """Which weights file decides the download (the index or the single file); refusals of
    pickle-only and code-only repositories, from the listing alone."""
    if INDEX in files:
        return INDEX
    if SINGLE in files:
        return SINGLE
    pickles = sorted(f for f in files if f.endswith(PICKLE_SUFFIXES))
    code = sorted(f for f in files if f.endswith(CODE_SUFFIXES))
    if pickles:
        raise HubError(
            f"model {name}: only pickle weights ({', '.join(pickles[:3])}), which can run code "
            "when loaded; only safetensors are accepted, and nothing was downloaded"
        )
    if code:
        raise HubError(
            f"model {name}: the repository holds only code ({', '.join(code[:3])}) and no "
            "safetensors weights; repository code is never fetched or run"
        )
    raise HubError(f"model {name}: no {SINGLE} or {INDEX} in the repository")


def _download(
    name: HubName,
    files: set[str],
    weights: str,
    progress: Progress | None,
    check: Callable[[dict[str, Any]], object] | None,
) -> Path:
    from huggingface_hub import hf_hub_download, snapshot_download

    if "config.json" not in files:
        raise HubError(f"model {name}: the repository has no config.json")
    common: dict[str, Any] = {
        "revision": name.revision, "cache_dir": str(cache_dir()), "endpoint": endpoint(),
    }  # fmt: skip
    wanted = ["config.json"]  # grows as the listing is read; the disk-full message sizes it
    with _library_errors(name, wanted):
        config = _read_json(hf_hub_download(name.repo, "config.json", **common), name)
        if check is not None:
            check(config)  # an unsupported family costs one small file, not the weights
        wanted += [f for f in (*CONFIG_FILES, *TOKENIZER_FILES, CARD) if f in files]
        if weights == INDEX:
            index = _read_json(hf_hub_download(name.repo, INDEX, **common), name)
            wanted += [INDEX, *_shards(index, name, files)]
        else:
            wanted.append(SINGLE)
        wanted[:] = sorted(set(wanted))
        bars = _reporter(str(name), progress) if progress is not None else None
        path = snapshot_download(name.repo, allow_patterns=wanted, tqdm_class=bars, **common)
    return Path(path)


def _shards(index: dict[str, Any], name: HubName, files: set[str]) -> list[str]:
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise HubError(f"model {name}: {INDEX} has no weight_map")
    shards = sorted({str(v) for v in weight_map.values()})
    bad = [s for s in shards if s not in files or not s.endswith(".safetensors")]
    if bad:
        raise HubError(f"model {name}: {INDEX} names shards the repository lacks: {bad[:3]}")
    return shards


def cached(name: HubName, reason: str) -> Path:
    """A complete snapshot of `name` in the cache, without any network; else a HubError saying
    what to run."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError

    partial = False
    try:
        path = Path(
            snapshot_download(
                name.repo, revision=name.revision, cache_dir=str(cache_dir()),
                local_files_only=True, allow_patterns=["*.json", "*.safetensors"],
            )
        )  # fmt: skip
    except IncompleteSnapshotError:
        path, partial = None, True
    except (LocalEntryNotFoundError, OSError, ValueError):
        path = None
    if path is not None and not missing_files(path):
        return path
    state = "only partly" if partial or path is not None else "not"
    raise HubError(
        f"model {name} is {state} in the Hugging Face cache ({cache_dir()}) and {reason}; "
        f"run `{name.download_command()}` where the Hub can be reached (or run this again "
        "online: it downloads what is missing)"
    )


def cached_card(name: HubName) -> Path | None:
    """The folder of `name`'s model card in the cache, without any network; None if absent."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(
            name.repo, CARD, cache_dir=str(cache_dir()), revision=name.revision
        )
    except (OSError, ValueError):
        return None
    return Path(found).parent if isinstance(found, str) else None


def missing_files(path: Path) -> list[str]:
    """What a snapshot lacks of what the loader reads (config, weights, every shard)."""
    need = ["config.json"]
    index = path / INDEX
    if index.is_file():
        try:
            need += sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            return [INDEX]
    else:
        need.append(SINGLE)
    return [n for n in need if not (path / n).is_file()]


def _read_json(file: str, name: HubName) -> dict[str, Any]:
    try:
        data = json.loads(Path(file).read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise HubError(f"model {name}: {Path(file).name} is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise HubError(f"model {name}: {Path(file).name} is not a JSON object")
    return data


@contextmanager
def _library_errors(name: HubName, wanted: list[str]) -> Iterator[None]:
    """The library's errors during a download of `wanted`, as one line that says what to do;
    the caller's own check (e.g. an unsupported family) passes through."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        yield
    except HubError:
        raise
    except Exception as e:
        if not (isinstance(e, HfHubHTTPError | OSError) or _is_http(e)):
            raise
        again = (
            "files already complete are kept in the cache, and running the same command again "
            "fetches the rest"
        )
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            raise HubError(f"model {name}: {disk_full(name, wanted, e)}; {again}") from None
        raise HubError(f"model {name}: download stopped ({_first_line(e)}); {again}") from None


def disk_full(name: HubName, wanted: list[str], e: OSError) -> str:
    """What a download that the disk refused needs: the size of `wanted` (from the Hub's
    listing, when it answers), how much of it is not cached yet, and where it goes."""
    where = cache_dir()
    variable = "HF_HUB_CACHE" if os.environ.get("HF_HUB_CACHE") else "HF_HOME"
    text = f"the disk refused a write ({_first_line(e)}) in {where} ({variable})"
    sizes = _sizes(name, wanted)
    if sizes is not None:
        total, todo = sizes
        text += f"; the model takes {human_size(total)}, {human_size(todo)} of it not yet cached"
    free = None
    for place in (where, *where.parents):
        try:
            free = shutil.disk_usage(place).free
            break
        except OSError:
            continue
    if free is not None:
        text += f", and {human_size(free)} is free there"
    return text + f"; free some space or set {variable} to a larger disk"


def _sizes(name: HubName, wanted: list[str]) -> tuple[int, int] | None:
    """(bytes of `wanted`, bytes of those not in the cache), or None if the Hub does not say."""
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.hf_api import RepoFile

    try:
        listing = HfApi(endpoint=endpoint()).list_repo_tree(name.repo, revision=name.revision)
        sizes = {f.path: int(f.size) for f in listing if isinstance(f, RepoFile)}
    except Exception:  # the Hub is gone too: the message goes without sizes
        return None
    total = todo = 0
    for f in wanted:
        total += sizes.get(f, 0)
        got = try_to_load_from_cache(
            name.repo, f, cache_dir=str(cache_dir()), revision=name.revision
        )
        if not isinstance(got, str):
            todo += sizes.get(f, 0)
    return total, todo


def _is_http(e: BaseException) -> bool:
    return type(e).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _reporter(label: str, progress: Progress) -> type:
    """A tqdm class for snapshot_download that sends its byte counts to `progress` (at most
    every half second, and at the end) and draws nothing."""
    from tqdm import tqdm

    class Reporter(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["file"] = io.StringIO()  # counts kept, nothing drawn
            kwargs.pop("name", None)
            super().__init__(*args, **kwargs)
            self._sent = 0.0

        def update(self, n: float | None = 1) -> bool | None:
            out = super().update(n)
            desc = str(self.desc or "")
            if self.unit == "B" and desc.startswith("Downloading") and self.total:
                now = time.monotonic()
                if now - self._sent >= 0.5 or self.n >= self.total:
                    self._sent = now
                    progress(describe_bytes(label, self.n, self.total))
            return out

    return Reporter


def describe_bytes(label: str, done: float, total: float) -> str:
    pct = 100.0 * done / total if total else 0.0
    return f"downloading {label}: {human_size(done)} of {human_size(total)} ({pct:.0f}%)"


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def snapshots(cache: Path | None = None) -> Iterable[tuple[str, str, list[str], Path, int]]:
    """Every model snapshot in the cache: (repo, commit, refs naming it, directory, bytes)."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache or cache_dir())
    except CacheNotFound:
        return
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for rev in sorted(repo.revisions, key=lambda r: r.commit_hash):
            refs = sorted(rev.refs)
            yield repo.repo_id, rev.commit_hash, refs, Path(rev.snapshot_path), rev.size_on_disk
