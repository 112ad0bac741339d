"""The grader's facts read from the package's source, kept on disk (grading/scan/source_facts.py):
the cached value is the computed one, a changed source or a bad file is never read as a fact,
and a cache that cannot be written only costs the time."""

from __future__ import annotations

import json
import os
import stat

import pytest

from transformer_lab.grading.scan import flags as review
from transformer_lab.grading.scan import forbidden, similarity, source_facts


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TLAB_CACHE_DIR", str(folder))
    return folder


def _fresh(root: str):
    """The package's units computed now, bypassing every cache."""
    units = []
    for label, text in similarity.package_sources(root).items():
        units.extend(u for u in similarity.units_of(text, label) if u.size)
    return units


def test_cached_facts_equal_the_computed_ones(cache):
    root = str(source_facts.PACKAGE)
    computed = tuple(_fresh(root))
    similarity.package_units.cache_clear()
    first = similarity.package_units(root)  # computed and written
    similarity.package_units.cache_clear()
    second = similarity.package_units(root)  # read back
    assert first == computed and second == computed
    assert [u.lines for u in second] == [u.lines for u in computed]
    forbidden.forbidden_table.cache_clear()
    review._forbidden_table.cache_clear()
    table = review._forbidden_table()  # computed and written
    review._forbidden_table.cache_clear()
    assert review._forbidden_table() == table == forbidden.forbidden_table()  # read back
    review._REEXPORTS.clear()
    rex = dict(review._reexports())
    review._REEXPORTS.clear()
    assert review._reexports() == rex
    names = sorted(p.name.split("-")[0] for p in cache.iterdir())
    assert names == ["forbidden", "reexports", "units"]
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700  # private to its user


def test_a_changed_source_is_a_new_key(tmp_path, cache):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text("def f(x):\n    return x + 1\n")
    before = source_facts.package_digest(str(package))
    (package / "mod.py").write_text("def f(x):\n    return x + 2\n")
    source_facts.package_digest.cache_clear()
    assert source_facts.package_digest(str(package)) != before
    calls = []
    for expected in (1, 1):
        got = source_facts.cached(
            "toy", lambda: calls.append(1) or expected, int, int, root=str(package)
        )
        assert got == expected
    assert len(calls) == 1  # the second call read the file


def test_a_malformed_units_file_is_computed_again(cache):
    root = str(source_facts.PACKAGE)
    cache.mkdir()
    path = cache / f"units-{source_facts.package_digest(root)[:32]}.json"
    path.write_text('[["f", "x.py", "nonsense"]]')
    similarity.package_units.cache_clear()
    units = similarity.package_units(root)
    assert len(units) > 100  # the package's units, not the file's
    assert len(json.loads(path.read_text())) == len(units)  # the file was rewritten with them
    for data in ([], None, [["f", "x.py", []]]):  # no units, nothing, a unit without prints
        with pytest.raises((ValueError, TypeError)):
            similarity._decode_units(data)


@pytest.mark.parametrize("content", ["{not json", '{"v": "seven"}', "[]", "", "null"])
def test_a_malformed_file_is_computed_again(cache, content):
    def decode(data):
        if not isinstance(data["v"], int):
            raise TypeError("not an int")
        return data["v"]

    cache.mkdir()
    path = cache / f"toy-{source_facts.package_digest()[:32]}.json"
    path.write_text(content)
    assert source_facts.cached("toy", lambda: 7, lambda v: {"v": v}, decode) == 7
    assert json.loads(path.read_text()) == {"v": 7}


@pytest.mark.parametrize("shared", ["folder", "file"])
def test_a_cache_others_may_write_to_is_never_read(cache, shared):
    cache.mkdir()
    planted = cache / f"toy-{source_facts.package_digest()[:32]}.json"
    planted.write_text("99")  # what another user planted
    (cache if shared == "folder" else planted).chmod(0o777 if shared == "folder" else 0o666)
    assert source_facts.cached("toy", lambda: 7, int, int) == 7
    if shared == "folder":
        assert planted.read_text() == "99"  # and nothing is written into such a folder


def test_an_unwritable_cache_only_costs_the_time(tmp_path, monkeypatch):
    if os.geteuid() == 0:  # root writes anywhere: point the cache at a file instead
        blocker = tmp_path / "a_file"
        blocker.write_text("")
        monkeypatch.setenv("TLAB_CACHE_DIR", str(blocker / "cache"))
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        monkeypatch.setenv("TLAB_CACHE_DIR", str(locked / "cache"))
    assert source_facts.cached("toy", lambda: 7, int, int) == 7


def test_only_the_newest_versions_are_kept(cache):
    cache.mkdir()
    for k in range(6):
        old = cache / f"toy-{k:032d}.json"
        old.write_text("1")
        os.utime(old, (k, k))
    source_facts.cached("toy", lambda: 2, int, int)
    left = sorted(p.name for p in cache.glob("toy-*.json"))
    assert len(left) == source_facts.KEEP
    assert f"toy-{source_facts.package_digest()[:32]}.json" in left
