"""The test suite's own layout: a test module imports shared helpers from tests/helpers.py and
fixtures come from tests/conftest.py, never from another test module (importing one runs its
module-level code again under another name and ties two files' insides together)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# `from tests.test_x import`, `from .test_x import`, `import tests.test_x`, and conftest alike,
# in code or in a script held in a string.
TEST_MODULE = re.compile(r"^(?:tests\.|\.)?(?:test_\w+|conftest)$")
IMPORT_IN_TEXT = re.compile(r"(?:from|import)\s+(?:tests\.|\.)?(?:test_\w+|conftest)\b")


def imported_test_modules(source: str) -> list[str]:
    """The test modules (and conftest) that ``source`` imports, in its code or in its strings."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
            if TEST_MODULE.match(name.lstrip(".") if node.level else name) or (node.level and not node.module):
                found.append(name)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if TEST_MODULE.match(alias.name)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += IMPORT_IN_TEXT.findall(node.value)
    return found


def test_the_check_finds_each_form_of_import():
    assert imported_test_modules("from tests.test_cli import make_pdf") == ["tests.test_cli"]
    assert imported_test_modules("def f():\n    from .test_pages import csrf") == [".test_pages"]
    assert imported_test_modules("from .conftest import make_settings") == [".conftest"]
    assert imported_test_modules("import tests.test_n8n") == ["tests.test_n8n"]
    assert imported_test_modules('SCRIPT = """\nfrom tests.test_reliability import document\n"""') \
        == ["from tests.test_reliability"]
    assert imported_test_modules("from tests.helpers import make_pdf\nfrom worker.cli import main") == []


def test_no_test_module_imports_another():
    offenders = {path.name: found for path in sorted(TESTS.glob("*.py"))
                 if path.name != Path(__file__).name and (found := imported_test_modules(path.read_text()))}
    assert offenders == {}, "import shared code from tests/helpers.py and fixtures from tests/conftest.py"


def test_each_test_is_marked_with_the_lanes_of_its_fixtures(request):
    assert request.node.get_closest_marker("unit"), "this test uses no heavy fixture: it is a unit test"
    for item in request.session.items:
        used = set(item.fixturenames)
        marks = {mark.name for mark in item.iter_markers()}
        if used & {"pg_server", "pg15_server", "worker_process"}:
            assert "database" in marks and "unit" not in marks, item.nodeid
        if used & {"embedder", "worker_process"}:
            assert "model" in marks and "unit" not in marks, item.nodeid
        if "unit" in marks:
            assert not marks & {"database", "model", "browser", "n8n", "docker"}, item.nodeid


def test_each_long_module_named_for_the_scheduler_exists():
    from tests.helpers import LONG_MODULES, ROOT, SPLIT_BY_N8N_VERSION

    missing = [module for module in [*LONG_MODULES, *SPLIT_BY_N8N_VERSION] if not (ROOT / module).is_file()]
    assert missing == [], "tests/helpers.py names modules that are not there"


def test_a_module_is_one_unit_of_work_and_an_n8n_module_one_per_version():
    from tests.helpers import N8N_VERSIONS, work_unit

    current, previous = N8N_VERSIONS
    assert work_unit("tests/test_cli.py::test_x") == "tests/test_cli.py"
    assert work_unit("tests/test_cli.py::test_x[2.40.7]") == "tests/test_cli.py"
    assert work_unit(f"tests/test_n8n.py::test_x[{previous}]") == f"tests/test_n8n.py@{previous}"
    assert work_unit(f"tests/test_n8n.py::test_y[{current}-setting0-cause]") == f"tests/test_n8n.py@{current}"
    assert work_unit("tests/test_n8n.py::test_without_n8n") == "tests/test_n8n.py"


def test_the_long_modules_start_first_and_the_rest_keep_their_order():
    from tests.helpers import LONG_MODULES, longest_first

    longest, second = sorted(LONG_MODULES, key=LONG_MODULES.__getitem__, reverse=True)[:2]
    units = ["tests/test_a.py", f"{second}@1", "tests/test_b.py", longest, "tests/test_c.py"]
    assert longest_first(units) == [longest, f"{second}@1", "tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]
