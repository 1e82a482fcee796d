"""llama.vim, the llama.cpp server's own Vim/Neovim client, unmodified in a real headless Neovim
against the service's llama.cpp-compatible `POST /infill` (the HTTP front, the builtin model):
it must show the model's fill as ghost text and accept it into the buffer with Tab.

llama.vim is in no package registry, so a pinned copy of it (MIT, with its licence) is vendored
under vendor/llama.vim (its README names the commit); `LLAMA_VIM_DIR` points the test at another
checkout instead. Neovim is the 0.11 wheel from PyPI that test_neovim.py installs. llama.vim
talks through `curl`, which must be on PATH (setup_llama_vim.sh installs it); every call it makes
goes through a recorder placed ahead of the real curl on PATH (it saves the arguments and the
JSON body, then runs curl), so the test can check what llama.vim sent and ask the server the
same question again. Off unless DLLM_EDITOR_TESTS=1 (`make editor-test`), like the other editor
tests; once asked for, a set-up that fails (no Neovim, no curl, no llama.vim) fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_neovim import NEOVIMS, install

from infill_engine import Engine, load
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address

pytestmark = pytest.mark.skipif(
    os.environ.get("DLLM_EDITOR_TESTS") != "1",
    reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
)

HERE = Path(__file__).resolve().parent
VENDORED = HERE / "vendor" / "llama.vim"  # the pinned copy; vendor/llama.vim/README.md
TOKEN = "llama-vim-token"
# The blank line inside mean()'s body in data/llama_sample.py. The service answers what an editor
# would show (decide.py): here the line the file's spread() already has (a draft), where the
# builtin model's own text ("a") would add a syntax error.
LINE = 3
TYPED = "    total = "  # typed there; llama.vim asks for a fill once the cursor moves
RECORDER = """#!/bin/sh
# records one curl call (its arguments and the body on stdin), then runs the real curl
n=$(mktemp "{log}/call.XXXXXX")
printf '%s\\n' "$@" > "$n.args"
tee "$n.body" | exec "{curl}" "$@"
"""


def llama_vim_dir() -> Path:
    path = Path(os.environ.get("LLAMA_VIM_DIR") or VENDORED)
    if not (path / "autoload" / "llama.vim").is_file():
        pytest.fail(f"{path} has no autoload/llama.vim (LLAMA_VIM_DIR names a llama.vim checkout)")
    return path


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


@pytest.fixture
def served(engine: Engine) -> Iterator[tuple[Service, str]]:
    service = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=8))
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        yield service, f"http://127.0.0.1:{http.bound.port}"


def recorder(work: Path) -> tuple[Path, Path]:
    """A folder holding the recording `curl`, and the folder its calls are saved in."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail(
            "llama.vim runs curl, which is not installed: run tests/editors/setup_llama_vim.sh"
        )
    bin_dir, log = work / "bin", work / "calls"
    bin_dir.mkdir()
    log.mkdir()
    script = bin_dir / "curl"
    script.write_text(RECORDER.format(log=log, curl=curl))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir, log


def calls(log: Path) -> list[tuple[list[str], dict[str, Any]]]:
    """llama.vim's curl calls: (arguments, JSON body), oldest first."""
    out = []
    for args in sorted(log.glob("*.args"), key=lambda p: p.stat().st_mtime_ns):
        body = args.with_suffix(".body").read_text()
        out.append((args.read_text().splitlines(), json.loads(body)))
    return out


def run_nvim(binary: Path, llama_vim: Path, work: Path, url: str) -> list[dict[str, Any]]:
    sample = work / "sample.py"
    sample.write_text((HERE / "data" / "llama_sample.py").read_text())
    result = work / "result.jsonl"
    bin_dir, log = recorder(work)
    config = {
        "endpoint_fim": f"{url}/infill",
        "api_key": TOKEN,
        "show_info": 2,  # the info after the hint: tokens and timings from the reply
        "auto_fim": True,
        "keymap_fim_accept_full": "<Tab>",
        "ring_update_ms": 200,  # send the extra context soon (1 s by default)
    }
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "DLLM_RESULT": str(result),
        "DLLM_LINE": str(LINE),
        "DLLM_TYPE": TYPED,
        "DLLM_CALLS": str(log),
        "LLAMA_CONFIG": json.dumps(config),
    }
    argv = [
        str(binary),
        "--clean",
        "--headless",
        "--cmd",
        f"set rtp^={llama_vim}",
        "--cmd",  # before plugin/llama.vim reads it
        "lua vim.g.llama_config = vim.json.decode(os.getenv('LLAMA_CONFIG'))",
        "-c",
        f"luafile {HERE / 'drive_llama_vim.lua'}",
        str(sample),
    ]
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=360)
    steps = (
        [json.loads(line) for line in result.read_text().splitlines()] if result.exists() else []
    )
    assert steps and steps[-1]["step"] == "done", f"{steps}\n{proc.stdout[-2000:]}{proc.stderr}"
    return steps


def rendered(content: str) -> list[str]:
    """llama.vim's hint lines for a reply's content at the end of a line that is not blank:
    its lines, without trailing empty ones."""
    parts = content.split("\n")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def metric(text: str, name: str) -> float:
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    return float(lines.get(name, 0))


def test_llama_vim_shows_and_accepts_the_fill(
    served: tuple[Service, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llama_vim = llama_vim_dir()
    service, url = served
    nvim = next(n for n in NEOVIMS if n.label == "0.11")
    binary = install(nvim)

    steps = run_nvim(binary, llama_vim, tmp_path, url)
    by_step = {s["step"]: s for s in steps}
    failed = [s for s in steps if not s.get("ok")]
    assert not failed, steps
    assert {"loaded", "warm", "ghost", "accept", "cleared"} <= set(by_step), steps
    assert by_step["loaded"]["endpoint"] == f"{url}/infill"

    # What llama.vim sent: its llama.cpp fields, the token as a bearer header; first a warm-up
    # with the file's chunk as extra context (the fills leave out a chunk this close to the text
    # around the cursor), then the fills.
    made = calls(tmp_path / "calls")
    for args, _ in made:
        assert f"Authorization: Bearer {TOKEN}" in args and f"{url}/infill" in args
    warm = made[0][1]
    assert warm["n_predict"] == 0 and warm["response_fields"] == [""], warm
    assert warm["input_extra"][0]["filename"] == "sample.py"
    fims = [body for _, body in made if body.get("n_predict", 0) > 0]
    assert fims, made
    first = fims[0]
    assert first["prompt"] == TYPED and first["n_indent"] == len(TYPED) - len(TYPED.lstrip())
    assert first["input_suffix"].startswith("\n" + "    return total")
    assert {"content", "timings/predicted_n"} <= set(first["response_fields"])

    # The server answered them: counted as llama.cpp infill calls, none refused.
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        text = client.get("/metrics").text
        ok = metric(text, 'dllm_requests_total{code="ok",front="http",route="infill"}')
        assert ok >= 2  # the warm-up and at least the fill shown
        for code in ("unauthorized", "bad_request", "internal"):
            assert not metric(
                text, f'dllm_requests_total{{code="{code}",front="http",route="infill"}}'
            )
        assert service.counters.unauthorized == 0
        # llama.vim keeps the raw replies: compact JSON, which its check `"content"\s*:"` needs
        for raw in by_step["accept"]["cached"]:
            assert raw.startswith('{"content":"'), raw

        # The hint is the model's fill: the server's answer to a request llama.vim made, asked
        # again (greedy, so the same answer).
        ghost = by_step["ghost"]["lines"]
        answers = [client.post("/infill", json=body).json()["content"] for body in fims]
    assert "".join(ghost).strip(), "the hint is not blank"
    assert ghost in [rendered(a) for a in answers], (ghost, answers)
    assert by_step["ghost"]["at"] == [LINE - 1, len(TYPED)]  # at the cursor
    assert by_step["ghost"]["info"] and "g: " in by_step["ghost"]["info"]

    # Tab put the hint into the buffer where it was shown, and nothing else changed.
    accepted = by_step["accept"]["ghost"]
    before, after = by_step["accept"]["before"], by_step["accept"]["after"]
    expected = [*before[: LINE - 1], TYPED + accepted[0], *accepted[1:], *before[LINE:]]
    assert after == expected, (after, expected)
    with capsys.disabled():
        print(
            f"\nllama.vim in Neovim {by_step['loaded']['version']}: hint {ghost!r} after "
            f"{by_step['ghost']['t']:.1f} s, {len(made)} curl calls ({len(fims)} fills)"
        )
