"""The instructor guide's PostgreSQL-without-root recipe, run exactly as written (issue 37, 7).

The block after ``<!-- recipe: postgres-without-root -->`` in docs/instructor_guide.md is run by
bash, unchanged, as an unprivileged user (``nobody`` when the tests run as root, else the
current user) with a fresh home, a bare environment and a non-UTF-8 locale (``LANG=C``); then
the course's gradebook code opens the database at the URL the recipe exported (nbgrader creates
its tables there; as root, the test first lets root connect, since Python's home is not
readable by ``nobody``). A gradebook
that does not exist or is not UTF-8 is refused with one sentence, never a traceback.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MARK = "<!-- recipe: postgres-without-root -->"


def recipe() -> str:
    guide = (REPO / "docs" / "instructor_guide.md").read_text(encoding="utf-8")
    block = guide[guide.index(MARK) :].split("```bash\n", 1)[1].split("```", 1)[0]
    return block


def _user() -> tuple[str | None, str]:
    """(runuser's user or None for oneself, a reason to skip or "")."""
    if os.geteuid() != 0:
        return None, ""
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return None, "running as root without a 'nobody' user to run the recipe as"
    if shutil.which("runuser") is None:
        return None, "running as root without runuser"
    return "nobody", ""


def test_the_recipe_is_what_the_guide_says():
    script = recipe()
    assert "initdb" in script and "createdb" in script and "TLAB_GRADEBOOK_URL" in script
    assert "sudo" not in script and "runuser" not in script  # no root anywhere in it


def test_the_postgres_recipe_runs_as_written_without_root(postgresql):
    user, why = _user()
    if why:
        pytest.skip(why)
    home = Path(tempfile.mkdtemp(prefix="tlab-guide-"))  # /tmp: reachable by nobody
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C",  # a non-UTF-8 locale: the recipe must still make a UTF-8 cluster
        "LC_ALL": "C",
    }

    def run(script: str) -> subprocess.CompletedProcess:
        argv = ["bash", "-euo", "pipefail", "-c", script]
        if user is not None:  # env -i: nothing of root's environment reaches the user
            pairs = [f"{k}={v}" for k, v in env.items()]
            argv = [shutil.which("runuser"), "-u", user, "--", "env", "-i", *pairs, *argv]
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, cwd=home, timeout=120,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    if user is not None:
        os.chmod(home, 0o700)
        shutil.chown(home, user=user)
    # After the recipe: root may connect too (peer: the OS user root), to check from here.
    grant = '"$PGBIN/psql" -h "$PGDATA" -d transformer_lab -qc "CREATE ROLE root SUPERUSER LOGIN"'
    after = (
        (grant + "\n" if user is not None else "")
        + '"$PGBIN/psql" -h "$PGDATA" -d transformer_lab -Atc "SHOW server_encoding"\n'
        + 'echo "URL=$TLAB_GRADEBOOK_URL"\n'
    )
    try:
        done = run(recipe() + after)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.strip().splitlines()
        assert lines[-2] == "UTF8"
        url = lines[-1].removeprefix("URL=")
        assert url == f"postgresql+psycopg:///transformer_lab?host={home}/pgdata"

        from transformer_lab.grading.record.gradebook import alembic_on_path, graded_in_gradebook

        alembic_on_path()
        assert graded_in_gradebook(url, "transformer-lab", "01_self_attention") == set()
    finally:
        pg = "PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)\n"
        run(pg + '"$PGBIN/pg_ctl" -D "$HOME/pgdata" -m fast stop')
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_server(postgresql):
    from pg_server import PostgresServer

    with PostgresServer() as server:
        yield server


def test_a_missing_or_non_utf8_gradebook_is_one_sentence(pg_server, one_sentence):
    import psycopg

    from transformer_lab.grading.record.gradebook import GradebookError, check_database

    with pytest.raises(GradebookError) as err:
        check_database(pg_server.url("never_created"))
    assert 'database "never_created" does not exist; create it (createdb)' in str(err.value)
    one_sentence(str(err.value))
    with psycopg.connect(
        host=str(pg_server.dir), user=pg_server.user, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(
            "CREATE DATABASE ascii ENCODING 'SQL_ASCII' TEMPLATE template0 "
            "LC_COLLATE 'C' LC_CTYPE 'C'"
        )
    with pytest.raises(GradebookError, match="its encoding is SQL_ASCII") as err:
        check_database(pg_server.url("ascii"))
    one_sentence(str(err.value))
