"""Real servers on loopback for the tests: a Chroma server (`chroma run`) and PostgreSQL.

The fixtures are imported into tests/conftest.py, so every test can ask for them. Each starts its
server on a free 127.0.0.1 port with its data in a temporary folder, waits until it answers, and
stops it at the end of the session. Where the server binary is missing the test is skipped with
the reason (and fails under ``--ci``, through conftest's `require`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent


def require(config: pytest.Config, ok: bool, reason: str) -> None:
    """tests/conftest.py's `require` (skip locally, fail under --ci), found among the loaded plugins
    (``import conftest`` would name whichever conftest was imported last)."""
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == _TESTS / "conftest.py":
            return plugin.require(config, ok, reason)
    raise RuntimeError("tests/conftest.py is not loaded: run pytest from the repository root")

__all__ = ["chroma_server", "chroma_executable", "postgres_server", "postgres_binaries", "start_postgres", "running_postgres", "restart_postgres", "stop_postgres", "pg_bin", "free_port", "PG_BIN_DIRS",
           "pgvector_bin", "pgvector_binaries", "pgvector_server"]


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def _chroma_executable() -> str | None:
    beside = Path(sys.executable).with_name("chroma")  # the venv's, installed by the chromadb package
    return str(beside) if beside.is_file() else shutil.which("chroma")


def chroma_executable(pytestconfig: pytest.Config) -> str:
    """The `chroma` command (skip locally, fail under --ci when there is none)."""
    exe = _chroma_executable()
    require(pytestconfig, exe is not None, "no `chroma` command: pip install 'contextual-retrieval-kit[chroma]'")
    assert exe is not None
    return exe


@pytest.fixture(scope="session")
def chroma_server(pytestconfig: pytest.Config) -> Iterator[str]:
    """URL (``http://127.0.0.1:PORT``) of a Chroma server started with the chromadb package's CLI."""
    exe = chroma_executable(pytestconfig)
    port = free_port()
    data = tempfile.mkdtemp(prefix="chroma-server-")
    log = open(Path(data) / "server.log", "wb")  # noqa: SIM115 - closed below
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [exe, "run", "--path", str(Path(data) / "db"), "--port", str(port), "--host", "127.0.0.1"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"chroma run exited with {proc.returncode}: {(Path(data) / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"chroma run did not answer on {url} within 90 s")
            time.sleep(0.2)
        yield url
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(data, ignore_errors=True)


#: Where Debian/Ubuntu's postgresql-NN packages put initdb and pg_ctl (newest first).
PG_BIN_DIRS = [Path(f"/usr/lib/postgresql/{v}/bin") for v in (17, 16, 15, 14)]


def pg_bin() -> Path | None:
    """The folder holding initdb and pg_ctl: Debian's, PATH's, or the pgserver package's; None if none."""
    for folder in PG_BIN_DIRS:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    try:  # the pgserver package ships the server binaries in its wheel
        import pgserver  # type: ignore[import-not-found]
    except ImportError:
        return None
    shipped = Path(pgserver.__file__).parent / "pginstall" / "bin"
    return shipped if (shipped / "initdb").is_file() else None


def _has_pgvector(bin_dir: Path) -> bool:
    """Whether the server in `bin_dir` has the pgvector extension (``vector.control``): Debian's
    postgresql-NN-pgvector puts it under /usr/share/postgresql/NN, the pgserver wheel beside its bin."""
    shares = [bin_dir.parent / "share" / "postgresql", bin_dir.parent / "share", Path("/usr/share/postgresql") / bin_dir.parent.name]
    return any((share / "extension" / "vector.control").is_file() for share in shares)


def pgvector_bin() -> Path | None:
    """The folder of server binaries (initdb, pg_ctl) whose PostgreSQL has pgvector: Debian's
    (with postgresql-NN-pgvector), PATH's, or the pgserver package's (it ships pgvector); None if none."""
    folders = [folder for folder in PG_BIN_DIRS if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file()]
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        folders.append(Path(found).parent)
    try:
        import pgserver  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        folders.append(Path(pgserver.__file__).parent / "pginstall" / "bin")
    return next((folder for folder in folders if (folder / "initdb").is_file() and _has_pgvector(folder)), None)


#: url -> (pg_ctl command for the cluster, its start options, environment), while it runs
_CLUSTERS: dict[str, tuple[list[str], list[str], dict[str, str]]] = {}


def stop_postgres(url: str) -> None:
    """Stop the cluster `running_postgres` started at `url` at once (every connection drops)."""
    pg_ctl, _, env = _CLUSTERS[url]
    subprocess.run([*pg_ctl, "-m", "immediate", "stop"], check=True, capture_output=True, env=env)


def start_postgres(url: str) -> None:
    """Start again the cluster `stop_postgres` stopped, on the same port and data."""
    pg_ctl, start_opts, env = _CLUSTERS[url]
    subprocess.run([*pg_ctl, *start_opts, "-w", "-t", "60", "start"], check=True, capture_output=True, env=env)


def restart_postgres(url: str, down_s: float = 1.0) -> None:
    """Stop the cluster `running_postgres` started at `url` at once (every connection drops, as
    in a crash), keep it down for `down_s` seconds, start it again on the same port and data."""
    stop_postgres(url)
    time.sleep(down_s)
    start_postgres(url)


@contextmanager
def running_postgres(bin_dir: Path) -> Iterator[str]:
    """Start a throwaway PostgreSQL cluster with the server binaries in `bin_dir`; yields its URL
    (``postgresql://USER@127.0.0.1:PORT/postgres``) and removes it afterwards.

    initdb into a temporary folder (trust authentication, loopback only), pg_ctl start on a free
    port with the socket in the same folder, pg_ctl stop -m immediate at the end. PostgreSQL
    refuses to run as root, so as root the cluster belongs to the user named by
    $CONTEXTUAL_RETRIEVAL_PG_USER (default "postgres", created by the Debian package).
    """
    data = Path(tempfile.mkdtemp(prefix="pg-test-"))
    port = free_port()
    run_as: list[str] = []
    user = os.environ.get("USER") or "postgres"
    if os.geteuid() == 0:
        import pwd

        user = os.environ.get("CONTEXTUAL_RETRIEVAL_PG_USER", "postgres")
        entry = pwd.getpwnam(user)  # KeyError: no such user
        os.chown(data, entry.pw_uid, entry.pw_gid)
        os.chmod(data, 0o700)
        run_as = ["runuser", "-u", user, "--"]
    db = data / "db"
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    subprocess.run(
        [*run_as, str(bin_dir / "initdb"), "-D", str(db), "-U", user, "--auth=trust", "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True, env=env,
    )
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off -c max_connections=200"
    start = subprocess.run(
        [*run_as, str(bin_dir / "pg_ctl"), "-D", str(db), "-l", str(data / "server.log"), "-o", opts, "-w", "-t", "60", "start"],
        capture_output=True, env=env,
    )
    if start.returncode != 0:
        log = (data / "server.log").read_text(errors="replace") if (data / "server.log").exists() else ""
        shutil.rmtree(data, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {start.stderr.decode(errors='replace')}{log[-2000:]}")
    url = f"postgresql://{user}@127.0.0.1:{port}/postgres"
    _CLUSTERS[url] = [*run_as, str(bin_dir / "pg_ctl"), "-D", str(db)], ["-l", str(data / "server.log"), "-o", opts], env
    try:
        yield url
    finally:
        _CLUSTERS.pop(url, None)
        subprocess.run([*run_as, str(bin_dir / "pg_ctl"), "-D", str(db), "-m", "immediate", "stop"], capture_output=True, env=env)
        shutil.rmtree(data, ignore_errors=True)


def postgres_binaries(pytestconfig: pytest.Config) -> Path:
    """The PostgreSQL server binaries a throwaway cluster runs on, and a user to own it when the
    tests run as root (skip locally, fail under --ci when either is missing)."""
    bin_dir = pg_bin()
    require(
        pytestconfig,
        bin_dir is not None,
        "no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql (Debian), "
        "pip install pgserver, or put them on PATH",
    )
    assert bin_dir is not None
    if os.geteuid() == 0:
        import pwd

        user = os.environ.get("CONTEXTUAL_RETRIEVAL_PG_USER", "postgres")
        try:
            pwd.getpwnam(user)
        except KeyError:
            require(pytestconfig, False, f"running as root and no user {user!r} to own the PostgreSQL cluster")
    return bin_dir


@pytest.fixture(scope="session")
def postgres_server(pytestconfig: pytest.Config) -> Iterator[str]:
    """URL of a throwaway PostgreSQL cluster for the session (`running_postgres`)."""
    try:
        with running_postgres(postgres_binaries(pytestconfig)) as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


def pgvector_binaries(pytestconfig: pytest.Config) -> Path:
    """`postgres_binaries` for a server with the pgvector extension (skip locally, fail under --ci
    when there is none)."""
    postgres_binaries(pytestconfig)  # a server at all, and a user to own it as root
    bin_dir = pgvector_bin()
    require(
        pytestconfig,
        bin_dir is not None,
        "no PostgreSQL server with the pgvector extension (vector.control): apt-get install "
        "postgresql-NN-pgvector for the installed server's major version NN (Debian 13 and later), "
        "or pip install pgserver (its wheel ships pgvector)",
    )
    assert bin_dir is not None
    return bin_dir


@pytest.fixture(scope="session")
def pgvector_server(pytestconfig: pytest.Config) -> Iterator[str]:
    """URL of a throwaway PostgreSQL cluster with pgvector available (``CREATE EXTENSION vector``
    is left to the stores, as they do it themselves)."""
    try:
        with running_postgres(pgvector_binaries(pytestconfig)) as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))
