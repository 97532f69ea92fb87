"""The repository names no package registry's host: installers read the machine's own apt, pip and
npm configuration (scripts/debian-mirror.sh for Debian's archive), so the same scripts work
behind a mirror or a proxy and never reach past what the machine is configured to reach."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIRROR = ROOT / "scripts" / "debian-mirror.sh"
# Registries and archives a script might be tempted to spell (Debian, Ubuntu, PostgreSQL's apt,
# PyPI, npm, yarn, and the tarball host n8n's xlsx pin points at).
HOSTS = re.compile(r"(?:deb|ftp[\w.]*|security|snapshot|archive|cdn-fastly)\.debian\.org|archive\.ubuntu\.com"
                   r"|(?:apt|download)\.postgresql\.org|pypi\.org|pythonhosted\.org|registry\.npmjs\.org"
                   r"|registry\.yarnpkg\.com|cdn\.sheetjs\.com", re.I)
# This file spells them to look for them.
SELF = Path(__file__).relative_to(ROOT).as_posix()


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name and name != SELF]


def test_no_file_in_the_repository_spells_a_registry_host():
    found = []
    for path in tracked_files():
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in HOSTS.finditer(text)]
    assert not found, found


def mirror(etc: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(MIRROR)], env={"ARC_APT_ETC": str(etc), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)


def test_the_debian_mirror_comes_from_the_machines_apt_sources(tmp_path):
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.internal/debian/ http://second.internal/debian\n"
        "Suites: bookworm\nComponents: main\n\nTypes: deb\nURIs: http://mirror.internal/debian-security\n")
    done = mirror(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "http://mirror.internal/debian"


def test_a_one_line_sources_list_works_too(tmp_path):
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.internal/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] https://proxy.internal/debian bookworm main\n")
    done = mirror(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "https://proxy.internal/debian"


def test_no_source_is_one_clear_line(tmp_path):
    done = mirror(tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == "debian-mirror: no Debian archive in this machine's apt sources"


def test_the_installers_take_their_apt_line_from_it():
    for script in ("install-postgres15.sh", "portable-pgvector.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert 'debian-mirror.sh")' in text and 'deb-src $MIRROR trixie main' in text, script


def test_the_podman_installer_takes_its_debootstrap_mirror_from_it():
    """One reader of the apt sources: a second copy had drifted (it skipped debian.sources'
    priority and an apt line's [options])."""
    text = (ROOT / "scripts" / "install-podman.sh").read_text()
    assert 'MIRROR=$("$(dirname "$0")/debian-mirror.sh")' in text and '"$MIRROR"' in text
    assert "URIs:" not in text and '$1 == "deb"' not in text
