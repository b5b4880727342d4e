"""The package as a user gets it: `python -m build` makes a wheel and an sdist from a clean copy of
the tracked files, `twine check --strict` passes on both, their metadata names the homepage, the
docs, the Python versions and the version from `_version.py`, and the sdist installs in a fresh
venv (network: the package registry only) where the offline demo runs and finds what plain
retrieval misses."""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOSTED_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VOYAGE_API_KEY", "COHERE_API_KEY", "CO_API_KEY")


def version() -> str:
    text = (REPO / "contextual_retrieval_core" / "_version.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"$', text, re.M).group(1)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The wheel and the sdist, built without build isolation from the tracked files only."""
    pytest.importorskip("build")
    clone = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, tracked.split("\0")):
        source = REPO / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), "."], cwd=clone,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "SetuptoolsDeprecationWarning" not in result.stdout + result.stderr
    return out


def metadata_of(dist: Path) -> email.message.Message:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_string(zf.read(name).decode("utf-8"))


def test_twine_check_passes_on_the_wheel_and_the_sdist(dist):
    files = sorted(str(p) for p in dist.iterdir())
    assert sorted(Path(f).suffix for f in files) == [".gz", ".whl"]
    result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2


def test_metadata_names_the_version_homepage_docs_and_python_versions(dist):
    meta = metadata_of(dist)
    assert meta["Name"] == "contextual-retrieval-kit" and meta["Version"] == version()
    assert meta["Requires-Python"] == ">=3.10" and meta["License-Expression"] == "MIT"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Changelog"} <= set(urls) and all(u.startswith("https://") for u in urls.values())
    classifiers = meta.get_all("Classifier")
    # a classifier names a Python version only where the tests ran on it
    running = f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"
    assert running in classifiers
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "## Set up and run" in meta.get_payload()


def test_sdist_carries_the_packages_the_model_files_and_the_changelog(dist):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "contextual_retrieval_core/_version.py",
            "contextual_retrieval_llamaindex/__init__.py", "contextual_retrieval_langchain/__init__.py"} <= names
    assert any(n.startswith("contextual_retrieval_core/embeddings/data/") for n in names)


@pytest.mark.slow
def test_sdist_installs_in_a_fresh_venv_and_the_offline_demo_runs(dist, tmp_path):
    (sdist,) = dist.glob("*.tar.gz")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # --no-compile: pip's byte-compiling of every installed module is about a quarter of the install
    # (12 s here); it cannot fail the install, and the demo imports what it runs
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", f"{sdist}[local,chroma]"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=1800)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in HOSTED_KEYS and not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    demo = subprocess.run(["contextual-retrieval", "demo"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "contexts: structural (no LLM)" in demo.stdout and "vectors: embedded Chroma" in demo.stdout
    assert re.search(r"plain retrieval missed and contextual retrieval found: Q\d", demo.stdout), demo.stdout[-2000:]
    # the installed package is the sdist's, not this checkout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import contextual_retrieval_core as c; print(c.__file__, c.__version__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert str(venv) in where.stdout and where.stdout.split()[-1] == version()
    # passed: drop the venv (about 38,000 files), which every later pytest run would otherwise spend
    # seconds deleting from its old base temp folders; a failing run keeps it to look at
    shutil.rmtree(venv, ignore_errors=True)


# The wheel's names: nothing collides with the unrelated `contextual-retrieval` project on the package
# index (distribution `contextual-retrieval`, import package `contextual_retrieval`); the offline
# embedder's tokenizer ships inside it.
TAKEN_DISTRIBUTION = "contextual-retrieval"
TAKEN_IMPORT_PACKAGE = "contextual_retrieval"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def the_wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_wheel_distribution_name_is_not_the_taken_one(dist):
    wheel = the_wheel(dist)
    with zipfile.ZipFile(wheel) as zf:
        (metadata,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        name = re.search(r"^Name: (.+)$", zf.read(metadata).decode(), re.M).group(1).strip()
        entry_points = zf.read(metadata.replace("METADATA", "entry_points.txt")).decode()
    assert name == "contextual-retrieval-kit"
    assert _normalized(name) != _normalized(TAKEN_DISTRIBUTION)
    assert "contextual-retrieval = contextual_retrieval_core.app.cli:main" in entry_points  # the command stays


def test_wheel_top_level_import_packages_differ_from_the_taken_one(dist):
    wheel = the_wheel(dist)
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/")[0] for n in zf.namelist() if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"contextual_retrieval_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain"}
    assert TAKEN_IMPORT_PACKAGE not in tops and all(not t.endswith(".py") for t in tops)


def test_wheel_contains_the_tokenizer_files(dist):
    """The offline embedder's tokenizer ships inside the wheel, with its licence and notice."""
    members = set(zipfile.ZipFile(the_wheel(dist)).namelist())
    base = "contextual_retrieval_core/embeddings/data/all-MiniLM-L6-v2/"
    assert {base + "tokenizer.json", base + "LICENSE", base + "NOTICE"} <= members
