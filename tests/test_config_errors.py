"""Every invalid setting and unreachable service is one clear line naming the variable, at start
or in a CLI command, never a traceback."""

from __future__ import annotations

import base64
import json
import socket

import pytest
from click.testing import CliRunner

from worker.cli import main
from worker.config import ConfigError, Settings


def jwt(role: str) -> str:
    claims = base64.urlsafe_b64encode(json.dumps({"iss": "supabase", "role": role}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{claims}.c2lnbmF0dXJl"


SUPABASE = {"SUPABASE_URL": "https://project.supabase.co", "DATABASE_URL": "postgresql://arc@127.0.0.1:5432/arc"}


@pytest.mark.parametrize(("env", "named"), [
    ({"DATABASE_URL": "postgres://arc:secret@db:notaport/arc"}, "DATABASE_URL"),
    ({"DATABASE_URL": "host = = ="}, "DATABASE_URL"),
    ({"ARC_AUTH_HEADER": "bad header:"}, "ARC_AUTH_HEADER"),
    ({"OPENAI_BASE_URL": "not a url"}, "OPENAI_BASE_URL"),
    ({"LLM_BASE_URL": "ftp://models.example"}, "LLM_BASE_URL"),
    ({"AZURE_OPENAI_API_VERSION": "banana"}, "AZURE_OPENAI_API_VERSION"),
    ({**SUPABASE, "SUPABASE_KEY": jwt("anon")}, "SUPABASE_KEY"),
    ({**SUPABASE, "SUPABASE_KEY": jwt("authenticated")}, "SUPABASE_KEY"),
    ({**SUPABASE, "SUPABASE_KEY": "sb_publishable_abc123"}, "SUPABASE_KEY"),
])
def test_a_bad_setting_is_one_line_naming_it(env, named):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    message = str(err.value)
    assert f"{named}:" in message and "\n" not in message and "secret" not in message, message


def test_good_settings_still_pass():
    Settings.from_env({**SUPABASE, "SUPABASE_KEY": jwt("service_role"), "ARC_AUTH_HEADER": "X-Api-Key",
                       "OPENAI_BASE_URL": "http://127.0.0.1:9000/v1", "AZURE_OPENAI_API_VERSION": "2025-01-01-preview"})
    Settings.from_env({"DATABASE_URL": "host=127.0.0.1 port=5432 dbname=arc user=arc"})


def test_a_data_dir_that_is_a_file_is_one_line(tmp_path):
    afile = tmp_path / "data"
    afile.write_text("not a folder")
    with pytest.raises(ConfigError, match="ARC_DATA_DIR: .* is a file"):
        Settings.from_env({"ARC_DATA_DIR": str(afile)})
    for command in (["documents", "list"], ["ingest", "--sample"]):
        result = CliRunner().invoke(main, command, env={"ARC_DATA_DIR": str(afile / "below"), "DATABASE_URL": ""})
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
        assert "ARC_DATA_DIR" in result.output and "Traceback" not in result.output, result.output


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [["documents", "list"], ["ingest", "--sample"], ["db", "init"],
                                     ["documents", "show", "x"], ["ask", "fences?"]])
def test_an_unreachable_database_is_one_line_for_every_command(command, tmp_path):
    url = f"postgresql://arc@127.0.0.1:{closed_port()}/arc"
    result = CliRunner().invoke(main, command, env={"DATABASE_URL": url, "ARC_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [lines[-1]] and lines[-1].startswith("Error: database unreachable (DATABASE_URL)"), result.output
