"""A model by name (`ORG/NAME[@REVISION]`) through a Hub stand-in on loopback (HF_ENDPOINT):
only the files the loader reads are fetched, into the standard cache (HF_HOME); refusals come
before any download; offline reuse; every failure says what to do and leaves the cache usable."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import ROOT, VOCAB, make_dream
from hub_standin import HubStandIn, read_dir

from infill_engine import ModelLoadError, load, model_names
from infill_engine.loader import resolve_model_dir

SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


@pytest.fixture(scope="module")
def dream_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    src = tmp_path_factory.mktemp("dream")
    make_dream(src, shards=3)
    return read_dir(src)


@pytest.fixture
def hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dream_files: dict[str, bytes]
) -> Iterator[HubStandIn]:
    with HubStandIn() as h:
        files = dict(dream_files)
        files["pytorch_model.bin"] = b"not to be fetched"  # pickle beside safetensors
        files["modeling_dream.py"] = b"raise SystemExit('repository code ran')"
        files["README.md"] = b"# tiny"
        h.repo("org/tiny").add(files)
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.delenv("HF_HUB_CACHE", raising=False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        yield h


def downloads(hub: HubStandIn) -> set[str]:
    return {p.rsplit("/", 1)[1] for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p}


def test_sharded_download_fetches_only_what_the_loader_reads(hub: HubStandIn) -> None:
    seen: list[str] = []
    path = resolve_model_dir("org/tiny", progress=seen.append)
    assert path.is_relative_to(Path(os.environ["HF_HOME"]) / "hub" / "models--org--tiny")
    assert downloads(hub) == {
        "config.json", "model.safetensors.index.json", *SHARDS, "tokenizer.json",
        "tokenizer_config.json", "README.md",  # the card: which languages it knows
    }  # fmt: skip
    assert not (path / "pytorch_model.bin").exists() and not (path / "modeling_dream.py").exists()
    assert seen and seen[-1].endswith("(100%)") and "org/tiny" in seen[-1]
    by_name = load("org/tiny", device="cpu")
    ids = torch.randint(0, VOCAB, (1, 19), generator=torch.Generator().manual_seed(4))
    assert by_name.family == "dream"
    assert by_name.logits(ids).shape == (1, 19, VOCAB)


def test_a_dropped_connection_resumes_with_a_range(
    hub: HubStandIn, dream_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    # the library writes in 10 MB chunks, so a tiny shard's half never reaches the disk: smaller
    # chunks let the range start where the cut file stopped
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 4096)
    hub.cut_once.add(SHARDS[1])
    path = resolve_model_dir("org/tiny")
    ranges = [r for m, r in hub.fetched(SHARDS[1]) if m == "GET"]
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes=")
    assert int(ranges[1][len("bytes=") :].split("-")[0]) > 0  # from where it stopped
    assert (path / SHARDS[1]).read_bytes() == dream_files[SHARDS[1]]


def test_a_revision_pin(hub: HubStandIn, dream_files: dict[str, bytes]) -> None:
    old = dict(dream_files, **{"config.json": _config(dream_files, rope_theta=5000.0)})
    sha = hub.repo("org/tiny").add(old, ref="v1")
    assert json.loads((resolve_model_dir("org/tiny@v1") / "config.json").read_text()) == (
        json.loads(old["config.json"])
    )
    assert resolve_model_dir(f"org/tiny@{sha}").name == sha
    main = json.loads((resolve_model_dir("org/tiny") / "config.json").read_text())
    assert main["rope_theta"] == 10000.0


def test_offline_reuses_the_cache_and_names_the_command(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    online = resolve_model_dir("org/tiny")
    before = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model_dir("org/tiny") == online
    assert len(hub.requests) == before  # nothing asked of the Hub
    with pytest.raises(
        ModelLoadError, match=r"not in the Hugging Face cache .*`hf download org/other`"
    ):
        resolve_model_dir("org/other")
    with pytest.raises(ModelLoadError, match=r"`hf download org/tiny --revision v7`"):
        resolve_model_dir("org/tiny@v7")
    assert len(hub.requests) == before  # told at once from the cache: the Hub never asked


def test_an_unreachable_hub_uses_the_cache(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    online = resolve_model_dir("org/tiny")
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", dead)
    assert resolve_model_dir("org/tiny") == online
    with pytest.raises(ModelLoadError, match=r"cannot be reached .*hf download org/other"):
        resolve_model_dir("org/other")


def test_pickle_only_weights_are_refused_before_any_download(hub: HubStandIn) -> None:
    hub.repo("org/pickled").add({"config.json": b"{}", "pytorch_model.bin": b"x"})
    with pytest.raises(ModelLoadError, match=r"only pickle weights \(pytorch_model\.bin\)"):
        resolve_model_dir("org/pickled")
    assert downloads(hub) == set()
    assert not (Path(os.environ["HF_HOME"]) / "hub" / "models--org--pickled").exists()


def test_a_code_only_repository_is_refused(hub: HubStandIn) -> None:
    hub.repo("org/code").add({"config.json": b"{}", "modeling_x.py": b"import os"})
    with pytest.raises(ModelLoadError, match=r"only code \(modeling_x\.py\).*never fetched"):
        resolve_model_dir("org/code")
    assert downloads(hub) == set()


def test_an_unsupported_family_costs_only_its_config(
    hub: HubStandIn, dream_files: dict[str, bytes]
) -> None:
    files = dict(dream_files, **{"config.json": _config(dream_files, model_type="gpt2")})
    hub.repo("org/gpt").add(files)
    with pytest.raises(ModelLoadError, match="unknown model_type 'gpt2'"):
        resolve_model_dir("org/gpt")
    assert downloads(hub) == {"config.json"}


def test_unknown_names_and_revisions(hub: HubStandIn) -> None:
    with pytest.raises(ModelLoadError, match=r"org/nope: no such model on the Hub"):
        resolve_model_dir("org/nope")
    with pytest.raises(ModelLoadError, match=r"org/tiny has no revision 'v9'"):
        resolve_model_dir("org/tiny@v9")
    with pytest.raises(ModelLoadError, match=r"no such directory, and not a Hub name"):
        resolve_model_dir("not a name/with spaces")


@pytest.mark.parametrize(
    ("revision", "why"),
    [("/ABS", "it starts with '/'"), ("../../../escaped", "it holds '..'"),
     ("v1..v2", "it holds '..'"), ("main/", "it ends with '/'"), ("a//b", "it holds '//'"),
     ("x.lock", "a part of it ends with '.lock'"), ("a@{1}", "it holds '@{' or is '@'"),
     ("v1:x", "it holds ':'"), ("tab\tx", "it holds '\\t'")],
)  # fmt: skip
def test_a_revision_that_is_no_ref_is_refused_before_the_hub_or_the_disk(
    hub: HubStandIn, tmp_path: Path, revision: str, why: str
) -> None:
    """huggingface_hub writes a revision's commit to refs/REVISION in the cache: a Hub that
    answers for `org/tiny@/some/path` once had it write to /some/path."""
    target = tmp_path / "written"
    revision = revision.replace("/ABS", str(target))
    with pytest.raises(ModelLoadError) as e:
        resolve_model_dir(f"org/tiny@{revision}")
    message = str(e.value)
    name = f"org/tiny@{revision}"
    assert message == (
        f"model {name!r}: the revision {revision!r} is not a branch, tag or commit name ({why})"
    )
    with pytest.raises(model_names.HubError, match="is not a branch, tag or commit name"):
        model_names.HubName("org/tiny", revision)  # built directly: checked all the same
    assert hub.requests == []  # nothing asked of the Hub
    assert not target.exists() and not (Path(os.environ["HF_HOME"])).exists()


def test_branches_tags_and_commits_are_still_revisions(hub: HubStandIn) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    for revision in ("main", "v1.0", "release/2025-01", "refs/pr/1", sha, "dev_x-1"):
        assert model_names.parse_name(f"org/tiny@{revision}") == model_names.HubName(
            "org/tiny", revision
        )
    main = hub.repo("org/tiny").resolve("main")
    assert main is not None
    hub.repo("org/tiny").refs["dev.1"] = main
    assert resolve_model_dir("org/tiny@dev.1").name == main  # a branch, through the Hub
    assert resolve_model_dir(f"org/tiny@{main}").name == main  # a 40-hex commit


def test_a_folder_named_like_a_hub_model_does_not_stand_in_for_it(
    hub: HubStandIn,
    dream_files: dict[str, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A workspace (the language server's working directory) that holds `org/tiny/` does not
    replace the Hub's org/tiny; `./org/tiny` names the folder."""
    work = tmp_path / "work"
    folder = work / "org" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(_config(dream_files, rope_theta=5000.0))
    monkeypatch.chdir(work)
    told: list[str] = []
    with caplog.at_level("WARNING", logger="infill_engine.loader"):
        path = resolve_model_dir("org/tiny", progress=told.append)
    assert path.is_relative_to(Path(os.environ["HF_HOME"]))
    assert json.loads((path / "config.json").read_text())["rope_theta"] == 10000.0  # the Hub's
    note = (
        "model 'org/tiny': loading the Hub model; the folder ./org/tiny here is not used "
        "(write ./org/tiny to load the folder)"
    )
    assert [r.getMessage() for r in caplog.records] == [note]
    assert told[0] == note
    assert resolve_model_dir("./org/tiny") == Path("org/tiny")  # written as a path: the folder
    assert resolve_model_dir(str(folder)) == folder


def test_a_gated_model_says_what_to_do(hub: HubStandIn) -> None:
    hub.gated.add("org/tiny")
    with pytest.raises(ModelLoadError, match=r"org/tiny is gated: accept its terms") as e:
        resolve_model_dir("org/tiny")
    assert "hf auth login" in str(e.value)
    assert downloads(hub) == set()  # nothing fetched


def test_an_interrupted_download_resumes_on_the_next_run(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.fail.add(SHARDS[2])
    with pytest.raises(ModelLoadError, match=r"download stopped .*running the same command again"):
        resolve_model_dir("org/tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match=r"only partly in the Hugging Face cache"):
        resolve_model_dir("org/tiny")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    hub.fail.clear()
    done_before = {n for n in SHARDS[:2] if any(m == "GET" for m, _ in hub.fetched(n))}
    hub.requests.clear()
    path = resolve_model_dir("org/tiny")
    again = {n for n in SHARDS if any(m == "GET" for m, _ in hub.fetched(n))}
    assert SHARDS[2] in again and not (again & done_before)  # completed shards kept
    assert all((path / n).is_file() for n in SHARDS)
    assert not list((path.parent.parent / "blobs").glob("*.incomplete"))


# The CLI in a child whose files may not grow past a limit (RLIMIT_FSIZE): a write past it fails
# with EFBIG, as a full disk fails with ENOSPC (SIGXFSZ, which would kill it, is ignored).
_LIMITED = """
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv.pop(1))
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
runpy.run_module("infill_engine.cli", run_name="__main__")
"""


def test_a_full_disk_says_what_it_needs_and_the_next_run_resumes(
    hub: HubStandIn, dream_files: dict[str, bytes], tmp_path: Path
) -> None:
    sizes = {n: len(dream_files[n]) for n in SHARDS}
    limit = min(sizes.values()) + 1  # the smallest shard fits, the other two do not
    assert (
        max(len(b) for n, b in dream_files.items() if n not in SHARDS) < limit < max(sizes.values())
    )
    src = tmp_path / "a.py"
    src.write_text("def add(a, b):\n    return \n")
    args = ["fill", str(src), "--line", "2", "--col", "12", "--model", "org/tiny", "--span",
            "4", "--device", "cpu", "--json"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    full = subprocess.run(
        [sys.executable, "-c", _LIMITED, str(limit), *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert full.returncode == 2, full.stderr
    hf_home = os.environ["HF_HOME"]
    assert "Traceback" not in full.stderr
    message = full.stderr.strip().splitlines()[-1]
    total = sum(len(b) for n, b in dream_files.items() if n != "README.md")
    refused = "the disk refused a write (OSError: [Errno 27] File too large)"
    assert f"model org/tiny: {refused} in {hf_home}/hub (HF_HOME)" in message, message
    assert f"the model takes {total / 1000:.1f} KB" in message, message
    assert "free some space or set HF_HOME to a larger disk" in message, message
    assert "running the same command again fetches the rest" in message
    # nothing corrupt: every file the snapshot holds is whole, no partial file is left
    repo = Path(hf_home) / "hub" / "models--org--tiny"
    snapshot = next((repo / "snapshots").iterdir())
    held = {p.name: p.read_bytes() for p in snapshot.iterdir()}
    cards = {"README.md": b"# tiny"}  # the hub fixture's model card
    assert held and all(data == {**dream_files, **cards}[n] for n, data in held.items())
    assert not [p for p in SHARDS if sizes[p] >= limit and p in held]
    assert not list((repo / "blobs").glob("*.incomplete"))
    hub.requests.clear()
    assert resolve_model_dir("org/tiny") == snapshot  # the next run, without the limit
    fetched = {n for n in SHARDS if any(m == "GET" for m, _ in hub.fetched(n))}
    assert fetched == {n for n in SHARDS if sizes[n] >= limit}  # the shard that fit is kept
    assert {p.name: p.read_bytes() for p in snapshot.iterdir()} == {
        n: b for n, b in dream_files.items() if n.endswith(".json") or n in SHARDS
    } | cards
    assert load("org/tiny", device="cpu").family == "dream"


def test_cli_fill_and_models_by_name(hub: HubStandIn, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    src = tmp_path / "a.py"
    src.write_text("def add(a, b):\n    return \n")
    cmd = [sys.executable, "-m", "infill_engine.cli"]
    fill = subprocess.run(
        [*cmd, "fill", str(src), "--line", "2", "--col", "12", "--model", "org/tiny",
         "--span", "4", "--device", "cpu", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert fill.returncode == 0, fill.stderr
    assert json.loads(fill.stdout)["tokens"] >= 0
    listed = subprocess.run(
        [*cmd, "models", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["family"]) for r in rows] == [("org/tiny", "dream")]
    assert rows[0]["bytes"] > 100_000 and rows[0]["refs"] == ["main"]
    offline = subprocess.run(
        [*cmd, "fill", str(src), "--line", "2", "--col", "12", "--model", "org/absent",
         "--device", "cpu"],
        env=dict(env, HF_HUB_OFFLINE="1"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert offline.returncode == 2
    assert "hf download org/absent" in offline.stderr and "Traceback" not in offline.stderr


def _config(files: dict[str, bytes], **changes: object) -> bytes:
    return json.dumps(dict(json.loads(files["config.json"]), **changes)).encode()
