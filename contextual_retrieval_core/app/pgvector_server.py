"""A local PostgreSQL server with pgvector, from the `pgserver` wheel (no system package needed).

    pip install 'contextual-retrieval-kit[pgvector,pgserver]'
    python -m contextual_retrieval_core.app.pgvector_server start ./pgdata   # prints its URL
    python -m contextual_retrieval_core.app.pgvector_server stop ./pgdata

`start FOLDER` makes a cluster in FOLDER the first time (initdb: user "postgres", trust
authentication, listening on 127.0.0.1 only, on a port free then and kept in the cluster's
postgresql.conf), starts it in the background unless it runs already (its log: FOLDER/server.log),
and prints its URL, ``postgresql://postgres@127.0.0.1:PORT/postgres``. `url FOLDER` prints the
URL; `stop FOLDER` stops the server, keeping the data for the next `start`. The wheel's server
ships the pgvector extension, which the frameworks' stores create themselves (``CREATE EXTENSION
vector``). For development: any local user can connect, with no password.

PostgreSQL does not run as root: as root, the cluster belongs to the user named by
$CONTEXTUAL_RETRIEVAL_PG_USER (default "postgres"), who must exist and be able to reach FOLDER.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from contextual_retrieval_core.errors import NotFoundError, RunError

__all__ = ["server_binaries", "start", "stop", "url", "main"]

#: the settings `start` adds to a new cluster's postgresql.conf (the port is appended after them)
_SETTINGS = "\n# contextual_retrieval_core.app.pgvector_server\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
_PORT = re.compile(r"^port = (\d+)", re.M)


def server_binaries() -> Path:
    """The folder of the `pgserver` wheel's server programs (initdb, pg_ctl; pgvector beside
    them); RuntimeError naming the extra to install when it is missing."""
    spec = importlib.util.find_spec("pgserver")  # found, not imported: its import starts nothing we need
    if spec is None or not spec.submodule_search_locations:
        raise RunError("no PostgreSQL server wheel: pip install 'contextual-retrieval-kit[pgserver]' "
                           "(the pgserver package ships PostgreSQL with pgvector), or use your own server")
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "initdb").is_file():
        raise RunError(f"the pgserver package has no server programs in {found}: reinstall it "
                           "(pip install --force-reinstall pgserver)")
    return found


def _run_as(folder: Path) -> list[str]:
    """The command prefix that runs a server program as a user PostgreSQL accepts (not root)."""
    if os.geteuid() != 0:
        return []
    import pwd

    user = os.environ.get("CONTEXTUAL_RETRIEVAL_PG_USER", "postgres")
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise RunError(f"PostgreSQL does not run as root and there is no user {user!r} to run it: run this as "
                           "another user, or create one (useradd postgres) or name one in $CONTEXTUAL_RETRIEVAL_PG_USER") from None
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    return ["runuser", "-u", user, "--"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(result: subprocess.CompletedProcess, what: str, folder: Path) -> None:
    if result.returncode != 0:
        log = folder / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
        raise RunError(f"{what} failed in {folder}: {(result.stdout or '') + (result.stderr or '')}{tail}".strip())


def url(folder: str | Path) -> str:
    """The URL of the cluster in `folder` (``postgresql://postgres@127.0.0.1:PORT/postgres``);
    FileNotFoundError when `start` has not made one there."""
    conf = Path(folder) / "postgresql.conf"
    ports = _PORT.findall(conf.read_text(encoding="utf-8")) if conf.is_file() else []
    if not ports:
        raise NotFoundError(f"no cluster made by `start` in {folder}: run "
                                f"python -m contextual_retrieval_core.app.pgvector_server start {folder}")
    return f"postgresql://postgres@127.0.0.1:{ports[-1]}/postgres"


def start(folder: str | Path) -> str:
    """Make the cluster in `folder` if there is none, start it unless it runs; its URL."""
    folder = Path(folder).resolve()
    bin_dir = server_binaries()
    if not (folder / "PG_VERSION").is_file():
        if folder.exists() and any(folder.iterdir()):
            raise FileExistsError(f"{folder} holds files but no PostgreSQL cluster: name an empty or new folder")
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        prefix = _run_as(folder)
        made = subprocess.run([*prefix, str(bin_dir / "initdb"), "-D", str(folder), "-U", "postgres", "--auth=trust",
                               "-E", "UTF8", "--locale=C"], capture_output=True, text=True)
        _check(made, "initdb", folder)
        with open(folder / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(f"{_SETTINGS}port = {_free_port()}\n")
    prefix = _run_as(folder)
    pg_ctl = [*prefix, str(bin_dir / "pg_ctl"), "-D", str(folder)]
    if subprocess.run([*pg_ctl, "status"], capture_output=True).returncode != 0:  # not running
        # the server inherits pg_ctl's output: a file, not a pipe that would stay open behind it
        with open(os.devnull, "w") as quiet:
            started = subprocess.run([*pg_ctl, "-l", str(folder / "server.log"), "-w", "-t", "60", "start"],
                                     stdout=quiet, stderr=subprocess.PIPE, text=True)
        _check(started, "pg_ctl start", folder)
    return url(folder)


def stop(folder: str | Path) -> None:
    """Stop the server of the cluster in `folder` (nothing when it is not running)."""
    folder = Path(folder).resolve()
    url(folder)  # FileNotFoundError: no cluster there
    pg_ctl = [*_run_as(folder), str(server_binaries() / "pg_ctl"), "-D", str(folder)]
    if subprocess.run([*pg_ctl, "status"], capture_output=True).returncode == 0:
        _check(subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], capture_output=True, text=True), "pg_ctl stop", folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contextual_retrieval_core.app.pgvector_server",
                                     description="A local PostgreSQL server with pgvector, from the pgserver wheel.")
    parser.add_argument("command", choices=["start", "stop", "url"], help="start (prints the URL), stop, or print the URL")
    parser.add_argument("folder", help="the cluster's folder (made by the first start)")
    args = parser.parse_args(argv)
    try:
        if args.command == "stop":
            stop(args.folder)
        else:
            print(start(args.folder) if args.command == "start" else url(args.folder))
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
