"""The chaos provider as a command, and its script format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from actors import ActorError, Code
from actors.testing.chaos import load_script

SCRIPT = """
seed = 3
[probabilities]
html = 0.0
[[faults]]
route = "openai"
kind = "status"
status = 429
headers = { "retry-after" = "2" }
times = 2
"""
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_command_serves_the_script(tmp_path: Path) -> None:
    script = tmp_path / "faults.toml"
    script.write_text(SCRIPT)
    command = [sys.executable, "-m", "actors.testing.chaos", "--port", "0", "--script", str(script)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            url = server.stdout.readline().split()[-1]
            assert url.startswith("http://127.0.0.1:")
            with httpx.Client(base_url=url, timeout=5) as client:
                statuses = [client.post("/v1/chat/completions", json=BODY) for _ in range(3)]
        finally:
            server.terminate()
    assert [r.status_code for r in statuses] == [429, 429, 200]
    assert statuses[0].headers["retry-after"] == "2"
    assert statuses[2].json()["choices"][0]["message"]["content"] == "echo: hi"


def test_bad_script_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ActorError) as caught:
        load_script('[[faults]]\nkind = "explode"\n')
    assert caught.value.code is Code.CONFIG_INVALID
    assert "$.faults[0].kind" in caught.value.message
    bad = tmp_path / "bad.toml"
    bad.write_text('seed = "x"\n')
    done = subprocess.run(
        [sys.executable, "-m", "actors.testing.chaos", "--script", str(bad)],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert done.returncode == 2
    assert "$.seed" in done.stderr
    assert "Traceback" not in done.stderr
