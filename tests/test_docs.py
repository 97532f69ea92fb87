"""The docs keep up with the code: every setting is in the README, every SQL file is described,
and the README's two commands exist in the Makefile that .ci/run calls."""

from pathlib import Path

from worker.config import ENV_VARS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_every_environment_variable_is_documented():
    missing = [var for var in ENV_VARS if f"`{var}`" not in README]
    assert not missing, f"undocumented settings: {missing}"


def test_every_sql_file_is_described():
    for path in (ROOT / "sql").glob("*.sql"):
        assert f"sql/{path.name}" in README, path.name


def test_readme_commands_and_ci():
    assert "make run" in README and "make test" in README
    makefile = (ROOT / "Makefile").read_text()
    assert "\nrun:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()
